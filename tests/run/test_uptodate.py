"""A run answers the datasets with nothing to do without their executors, and says what they would say.

Roots whose source has nothing new (``ingest.fetch.nothing_new``) and derivatives that an earlier run found
up to date at the same chain heads (``run.uptodate``) report the executor's own result without its code
running; every result, line and file is the one the executor gives (compared with ``--full-refresh``, which
asks every derivative's executor). What the run executes is observed by wrapping the step runner's executor, which
still runs for real. A no-op ``odfproj run`` in a fresh interpreter imports neither PySpark nor py4j and
starts no warm server; that it never reaches a running one is tests/run/test_warm_run.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from odfproj.engine.warm.lifecycle import WarmEngine
from odfproj.plan.sources import PlanRequest
from odfproj.project.config import load_project
from odfproj.run import run as run_module
from odfproj.run.run import RunResult, run_project
from odfproj.run.uptodate import UPTODATE_FILE
from odfproj.run.warm_server import ENTRY
from tests.cli.test_startup import SPARK, odfproj
from tests.run.test_run import DERIVATIVE, PUSH_ROOT, ROOT
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark


def _project(root: Path) -> Path:
    """A polled root with a view, and a push-only root (nothing pushed) with a view."""
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: uptodate\n")
    for name, text in {
        "good": ROOT.format(name="good"),
        "good.view": DERIVATIVE.format(name="good.view", input="good"),
        "pushed": PUSH_ROOT.format(name="pushed"),
        "pushed.view": DERIVATIVE.format(name="pushed.view", input="pushed"),
    }.items():
        (root / "datasets" / f"{name}.yaml").write_text(text)
    (root / "data" / "good").mkdir(parents=True)
    (root / "data" / "good" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    return root


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The datasets whose executor (ingest or transform code) ran, in the runs of the test."""
    names: set[str] = set()
    real = run_module._StepRunner._execute

    def execute(runner: run_module._StepRunner, step: run_module.DataStep) -> run_module.DatasetRun:
        names.add(step.dataset)
        return real(runner, step)

    monkeypatch.setattr(run_module._StepRunner, "_execute", execute)
    return names


def _fields(result: RunResult) -> list[dict]:
    """Every dataset's result as run_results.json has it, without its time."""
    return [{k: v for k, v in r.to_json().items() if k != "execution_time"} for r in result.results]


def _runner(spark, root: Path) -> Callable[..., tuple[RunResult, RecordingHolder]]:
    def run(**options: object) -> tuple[RunResult, RecordingHolder]:
        holder = RecordingHolder(spark)
        return run_project(load_project(root), PlanRequest(), holder=holder, **options), holder  # type: ignore[arg-type]

    return run


def test_a_second_no_op_answers_from_the_chain_heads_what_the_executors_say(
    spark, tmp_path, executed
) -> None:
    root = _project(tmp_path / "p")
    run = _runner(spark, root)
    first, _ = run()
    assert first.ok and first.records_added == 4  # two in good, two in its view
    assert executed == {"good", "good.view", "pushed.view"}
    assert not (root / ".odf" / UPTODATE_FILE).exists()  # every chain moved (created by this run's apply)

    executed.clear()
    second, holder = run()
    assert executed == {"good.view", "pushed.view"}  # the root's folder has nothing new
    assert not holder.created
    recorded = json.loads((root / ".odf" / UPTODATE_FILE).read_text())["datasets"]
    assert {name: entry["outcome"]["message"] for name, entry in recorded.items()} == {
        "good.view": "no new input data",
        "pushed.view": "no new input data",
    }
    executed.clear()
    third, holder = run()
    assert executed == set() and not holder.created
    refreshed, _ = run(full_refresh=True)  # asks every derivative's executor
    assert executed == {"good.view", "pushed.view"}
    assert _fields(second) == _fields(third) == _fields(refreshed)
    assert [(r.dataset, r.message) for r in third.results] == [
        ("good", "up to date"),
        ("good.view", "no new input data"),
        ("pushed", "no polling source (push-only root)"),
        ("pushed.view", "no new input data"),
    ]
    log = third.log_file.read_text() if third.log_file else ""
    assert re.search(r"SUCCESS good\.view \(transform\) in [0-9.]+s: 0 record\(s\), no new input data", log)


def test_new_data_is_executed_and_only_its_downstream(spark, tmp_path, executed) -> None:
    root = _project(tmp_path / "p")
    run = _runner(spark, root)
    run()
    run()  # good.view is recorded up to date
    executed.clear()
    (root / "data" / "good" / "2.csv").write_text("id,city\n3,Quito\n")
    result, _ = run()
    assert executed == {"good", "good.view"}
    assert {r.dataset: r.records_added for r in result.results} == {
        "good": 1,
        "good.view": 1,
        "pushed": 0,
        "pushed.view": 0,
    }
    # A file that sorts before the last ingested one is never read: the real fetch warns about it.
    run()  # good.view is recorded again
    executed.clear()
    (root / "data" / "good" / "0.csv").write_text("id,city\n9,Rome\n")
    result, holder = run()
    assert executed == {"good"} and not holder.created
    assert result.ok and result.records_added == 0
    assert "will never be ingested: data/good/0.csv" in (
        result.log_file.read_text() if result.log_file else ""
    )


def test_a_record_of_other_heads_or_a_damaged_one_is_not_believed(spark, tmp_path, executed) -> None:
    root = _project(tmp_path / "p")
    run = _runner(spark, root)
    run()
    run()
    record = root / ".odf" / UPTODATE_FILE
    saved = json.loads(record.read_text())
    saved["datasets"]["pushed.view"]["outcome"]["message"] = "made up"
    saved["datasets"]["pushed.view"]["head"] = "f1620" + "0" * 64  # not its head
    record.write_text(json.dumps(saved))
    executed.clear()
    result, _ = run()
    assert "pushed.view" in executed
    assert {r.dataset: r.message for r in result.results}["pushed.view"] == "no new input data"
    record.write_text('{"format": 1, "datasets": [')  # torn
    executed.clear()
    result, _ = run()
    assert "pushed.view" in executed and result.ok
    assert set(json.loads(record.read_text())["datasets"]) == {"good.view", "pushed.view"}


def test_a_no_op_run_imports_no_spark_and_starts_no_server(spark, tmp_path) -> None:
    root = _project(tmp_path / "p")
    run = _runner(spark, root)
    run()
    run()  # good.view is recorded up to date
    (tmp_path / "scratch").mkdir()
    for switch in ("off", "on"):  # on: no server is running, and a run with nothing to do starts none
        ran = odfproj("run", cwd=root, scratch=tmp_path / "scratch", ODFPROJ_WARM_ENGINE=switch)
        assert ran.code == 0, ran.stdout + ran.stderr
        assert "3 succeeded, 0 failed, 1 skipped; 0 record(s) added" in ran.stdout
        assert ran.imported_any(SPARK) == [], switch
        assert ran.imported("odfproj.run.run") and not ran.imported("odfproj.transform.coordinator")
        assert WarmEngine(tmp_path / "scratch" / "engine", entry=ENTRY).status() is None
