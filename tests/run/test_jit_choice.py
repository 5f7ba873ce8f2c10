"""A command's own driver compiles for a quick start, unless it is started for large files (engine.session).

C1 only saves a cold run of small datasets seconds of CPU but makes Spark's row loops about three times
slower, and a ``local`` driver runs every task (bench/README.md, "The JIT of a cold command"). So the
holder asks, when the JVM starts, how many bytes the command will read: ``run`` counts the files its
polling roots would ingest and the data its derivatives have not read (or, when the plan's query checks
start the JVM, the data the workspace holds), ``ingest`` the files it was given. The holder under test
records the settings it would start with and refuses to start; only the derivative tests use the shared
session, to ingest their root first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from odfproj.engine import session as session_module
from odfproj.engine.session import (
    DRIVER_JIT_ENV,
    DRIVER_JIT_OPTIONS,
    SHORT_LIVED_JIT_OPTIONS,
    SparkSessionHolder,
    SparkSettings,
)
from odfproj.errors import EngineError
from odfproj.ingest.fetch import fetch, pending_bytes
from odfproj.odf import model
from odfproj.plan.sources import PlanRequest
from odfproj.project.config import load_project
from odfproj.run import run as run_module
from odfproj.run.run import run_project
from tests.run.test_run import DERIVATIVE, ROOT
from tests.spark_helpers import RecordingHolder


class _NoJvm(SparkSessionHolder):
    """Records the settings a JVM would start with, then refuses to start one."""

    def __init__(self, master: str = "local[2]") -> None:
        super().__init__(SparkSettings(master=master))
        self.started: list[SparkSettings] = []

    def get(self):  # type: ignore[override]
        self.started.append(self.settings_to_start())
        raise EngineError("no JVM in this test")


def _jit(settings: SparkSettings) -> set[str]:
    return set(settings.effective_conf()["spark.driver.extraJavaOptions"].split())


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_JIT_ENV, raising=False)


def test_a_driver_started_for_large_work_gets_the_jit_of_long_runs() -> None:
    assert set(DRIVER_JIT_OPTIONS) <= _jit(SparkSettings(master="local[2]", large_work=True))
    small = _jit(SparkSettings(master="local[2]"))
    assert set(SHORT_LIVED_JIT_OPTIONS) <= small and not set(DRIVER_JIT_OPTIONS) & small


@pytest.mark.parametrize(
    ("master", "estimate", "large"),
    [
        ("local[2]", session_module.LARGE_WORK_BYTES, True),
        ("local[2]", session_module.LARGE_WORK_BYTES - 1, False),
        # A cluster's tasks run in executors of their own, which keep their JIT: the driver only plans.
        ("spark://10.0.0.5:7077", 10 * session_module.LARGE_WORK_BYTES, False),
    ],
)
def test_the_holder_sizes_the_driver_by_the_estimate_when_it_starts(master, estimate, large) -> None:
    holder = _NoJvm(master)
    asked: list[int] = []
    holder.size_work_by(lambda: asked.append(1) or estimate)
    assert not asked  # asked when the JVM starts, not before
    with pytest.raises(EngineError):
        holder.get()
    assert holder.started[0].large_work is large
    assert asked == ([1] if master.startswith("local") else [])


def test_pending_bytes_counts_the_files_a_glob_would_ingest(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "1.csv").write_bytes(b"x" * 100)
    (tmp_path / "data" / "2.csv").write_bytes(b"x" * 30)
    glob = model.FetchStepFilesGlob(path="data/*.csv")
    common = {"dataset": "d", "source": "s", "project_root": tmp_path, "environ": {}}
    assert pending_bytes(glob, prev_state=None, **common) == 130
    first = fetch(glob, prev_state=None, work_dir=tmp_path, system_time=datetime.now(UTC), **common).items[0]
    ingested = {first.display_name}
    assert pending_bytes(glob, prev_state=first.source_state, ingested=ingested, **common) == 30
    # Only the server of an HTTP resource knows its size: nothing is asked of it here.
    assert pending_bytes(model.FetchStepUrl(url="http://127.0.0.1:9/x.csv"), prev_state=None, **common) == 0


def _one_root(root: Path, size: int) -> Path:
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: jit\n")
    (root / "datasets" / "big.yaml").write_text(ROOT.format(name="big"))
    (root / "data" / "big").mkdir(parents=True)
    (root / "data" / "big" / "1.csv").write_text("id,city\n" + "1,Oslo\n" * (size // 7))
    return root


@pytest.mark.parametrize("threshold_of_file", [0.5, 2.0])
def test_a_run_starts_its_driver_by_the_files_its_roots_would_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold_of_file: float
) -> None:
    project = _one_root(tmp_path / "project", 7_000)
    size = (project / "data" / "big" / "1.csv").stat().st_size
    threshold = int(size * threshold_of_file)
    monkeypatch.setattr(session_module, "LARGE_WORK_BYTES", threshold)
    monkeypatch.setattr(run_module, "LARGE_WORK_BYTES", threshold)
    holder = _NoJvm()
    result = run_project(load_project(project), PlanRequest(), holder=holder)
    assert not result.ok and "no JVM in this test" in result.failed[0].message
    assert [s.large_work for s in holder.started] == [threshold <= size]
    log = next((project / ".odf").rglob("run-*.log")).read_text() if threshold <= size else ""
    assert ("compiles for long work" in log) is (threshold <= size)


@pytest.mark.spark
@pytest.mark.parametrize("validate", [True, False], ids=["checks-start-the-jvm", "the-step-starts-it"])
@pytest.mark.parametrize("large", [True, False])
def test_a_new_derivative_counts_its_inputs_data(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, large: bool, validate: bool
) -> None:
    """A derivative added over data ingested before (a pull request adding a view) reads all of it.

    Its query is checked while planning, which starts the JVM before the plan says what the run reads:
    then the data the workspace holds sizes it; without the checks the derivative's step does.
    """
    project = _one_root(tmp_path / "project", 7_000)
    assert run_project(load_project(project), PlanRequest(), holder=RecordingHolder(spark)).ok  # the root
    (project / "datasets" / "big.view.yaml").write_text(DERIVATIVE.format(name="big.view", input="big"))
    stored = sum(f.stat().st_size for f in (project / ".odf" / "datasets" / "big" / "data").iterdir())
    assert stored > 0
    threshold = stored if large else stored + 1
    monkeypatch.setattr(session_module, "LARGE_WORK_BYTES", threshold)
    monkeypatch.setattr(run_module, "LARGE_WORK_BYTES", threshold)
    holder = _NoJvm()
    if validate:
        with pytest.raises(EngineError, match="no JVM in this test"):
            run_project(load_project(project), PlanRequest(), holder=holder)
    else:
        result = run_project(load_project(project), PlanRequest(), holder=holder, validate_queries=False)
        assert [r.dataset for r in result.failed] == ["big.view"]  # the root had nothing new: no JVM
    assert [s.large_work for s in holder.started] == [large]


def test_a_step_whose_chain_cannot_be_read_counts_nothing(tmp_path: Path) -> None:
    """The estimate runs as the JVM starts: an error there would fail the step that asked for Spark
    with another step's problem. That step's own execution reports it."""
    from odfproj.plan.model import Ingest, Transform
    from odfproj.run.uptodate import UpToDate
    from odfproj.storage.workspace import Workspace

    workspace = Workspace(tmp_path / "ws")
    chains = run_module._Chains({}, {}, set(), UpToDate.load(workspace.root))
    runner = run_module._StepRunner(workspace, _NoJvm(), tmp_path, None, {}, None, False, chains)
    steps = [Transform("ghost.view", None), Ingest("ghost", None, "FilesGlob", "data/*.csv")]
    assert runner.pending_input_bytes(steps) == 0
