"""``odfproj watch``: re-plan on file changes with real watchdog, errors that do not stop it, clean exit.

Everything here but the ``--apply`` test is JVM-free. Waits are generous (a loaded 2-core machine),
but the plan-arrival latency itself is measured from the write with ``time.monotonic`` and held to 2 s.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from odfproj.errors import ManifestError
from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.apply import apply_plan
from odfproj.run.environments import ensure_environment
from odfproj.run.run import Status
from odfproj.run.watch import (
    WatchCycle,
    WatchedDir,
    Watcher,
    _glob_base,
    affected_datasets,
    one_line,
    watch,
)
from odfproj.storage.workspace import Workspace
from tests.conftest import REPO_DIR
from tests.project.conftest import PROJECT_FILES, write_files

#: How long to wait for anything to happen: generous, so that a loaded machine is not a failure.
WAIT = 30.0
#: The requirement: a saved manifest yields its new plan within this many seconds of the write.
MAX_LATENCY = 2.0

ORDERS = "datasets/sales/orders.yaml"
BROKEN_YAML = "kind: DatasetSnapshot\nversion: 1\ncontent: [\n  name: broken\n"


def applied_project(root: Path) -> Path:
    """The conftest project (seven manifests, macros, vars), applied: its plan is "no changes"."""
    write_files(root, PROJECT_FILES)
    config = load_project(root)
    plan, _ = plan_project(config, PlanRequest())
    workspace = Workspace(config.workspace())
    with workspace.lock(purpose="test"):
        apply_plan(plan, workspace)
    return root


def edit(path: Path, old: str, new: str) -> str:
    text = path.read_text()
    assert old in text
    text = text.replace(old, new)
    path.write_text(text)
    return text


# --- the Watcher, without threads -------------------------------------------------------------------


def test_glob_base() -> None:
    assert _glob_base("datasets/**/*.yaml") == (Path("datasets"), True)
    assert _glob_base("models/sales/*.yaml") == (Path("models/sales"), False)
    assert _glob_base("*.yaml") == (Path("."), False)
    assert _glob_base("**/*.yaml") == (Path("."), True)
    assert _glob_base("datasets/one.yaml") == (Path("datasets"), False)


def test_watched_dirs_leave_out_the_workspace_and_hidden_folders(tmp_path: Path) -> None:
    root = applied_project(tmp_path / "shop")
    (root / ".git").mkdir()
    watcher = Watcher(load_project(root), PlanRequest())
    assert watcher.watched_dirs() == {
        WatchedDir(root, False),
        WatchedDir(root / "datasets", True),
        WatchedDir(root / "macros", True),
    }
    (root / "odfproj.yaml").write_text("name: shop\nmanifests: ['**/*.yaml']\n")
    (root / "notes").mkdir()
    roots = Watcher(load_project(root), PlanRequest()).watched_dirs()
    assert {w.path.name for w in roots if w.recursive} == {"datasets", "macros", "notes"}
    (root / "odfproj.yaml").write_text("name: shop\nmanifests: ['models/sales/**/*.yaml']\n")
    (root / "models").mkdir()
    missing = Watcher(load_project(root), PlanRequest()).watched_dirs()
    # Until models/sales exists, models/ is watched for its creation.
    assert WatchedDir(root / "models", False) in missing


def test_changed_files_keeps_project_files_whose_bytes_changed(tmp_path: Path) -> None:
    root = applied_project(tmp_path / "shop")
    watcher = Watcher(load_project(root), PlanRequest())
    orders = root / ORDERS
    orders.touch()
    assert watcher.changed_files([orders]) == (), "a touch changes no byte"
    edit(orders, "An example dataset", "Orders")
    (root / "datasets" / "sales" / "orders.yaml.swp").write_text("editor state")
    (root / ".odf" / "scratch.yaml").write_text("workspace file")
    (root / "data.csv").write_text("a,b\n")
    candidates = [orders, orders.with_suffix(".yaml.swp"), root / ".odf" / "scratch.yaml", root / "data.csv"]
    assert watcher.changed_files(candidates) == (orders,)
    assert watcher.changed_files([orders]) == (), "already seen"
    (root / "macros" / "sql.sql").write_text("{# nothing #}\n")
    (root / "datasets" / "other" / "weather.yaml").unlink()
    new = root / "datasets" / "new.yaml"
    new.write_text(PROJECT_FILES["datasets/other/weather.yaml"])
    # A folder event stands for the known files under it (a deleted or renamed folder).
    assert set(watcher.changed_files([root / "datasets", root / "macros" / "sql.sql"])) == {
        root / "macros" / "sql.sql",
        root / "datasets" / "other" / "weather.yaml",
        new,
    }


def test_cycle_reports_a_broken_manifest_in_one_line_and_recovers(tmp_path: Path) -> None:
    root = applied_project(tmp_path / "shop")
    watcher = Watcher(load_project(root), PlanRequest())
    first = watcher.cycle()
    assert first.initial and first.ok and first.plan is not None and not first.plan.has_changes
    orders = root / ORDERS
    good = orders.read_text()
    orders.write_text(BROKEN_YAML)
    broken = watcher.cycle([orders])
    assert broken.number == 1 and broken.changed == (ORDERS,)
    assert broken.plan is None and broken.error is not None and not broken.ok
    assert broken.error.startswith(f"{ORDERS}:") and "\n" not in broken.error
    orders.write_text(good.replace("An example dataset", "Orders"))
    fixed = watcher.cycle([orders])
    assert fixed.ok and fixed.plan is not None
    assert [(s.dataset, s.action) for s in fixed.plan.definitions if s.has_changes] == [
        ("com.example.orders", Action.UPDATE)
    ]
    # odfproj.yaml is read again on each cycle: a var change shows at once, a broken file is one line.
    config = root / "odfproj.yaml"
    edit(config, "currency: EUR", "currency: USD")
    changed_var = watcher.cycle([config])
    assert changed_var.plan is not None
    assert {s.dataset for s in changed_var.plan.definitions if s.has_changes} == {
        "com.example.orders",
        "com.example.fx-rates",
    }
    config.write_text("name: [\n")
    bad_config = watcher.cycle([config])
    assert (
        bad_config.error is not None and "odfproj.yaml" in bad_config.error and "\n" not in bad_config.error
    )


def test_watch_in_an_environment_keeps_it_across_cycles(tmp_path: Path) -> None:
    """``watch --env``: a cycle re-reads odfproj.yaml but stays in the environment; before the environment
    exists it plans against production (what the environment would start from)."""
    root = applied_project(tmp_path / "shop")
    watcher = Watcher(load_project(root).in_environment("pr-3"), PlanRequest())
    first = watcher.cycle()
    assert first.ok and first.plan is not None and not first.plan.has_changes  # production's plan
    assert watcher.config.environment is None
    ensure_environment(load_project(root).in_environment("pr-3"), None)
    orders = root / ORDERS
    orders.write_text(orders.read_text().replace("An example dataset", "Orders"))
    second = watcher.cycle([orders])
    assert second.ok and watcher.config.environment == "pr-3"
    assert second.plan is not None and Path(second.plan.workspace) == root / ".odf" / "envs" / "pr-3"


def test_one_line_names_the_first_problem_and_counts_the_rest() -> None:
    assert one_line(ManifestError(["a.yaml:1:1: bad"])) == "a.yaml:1:1: bad"
    assert one_line(ManifestError(["a.yaml:1:1: bad", "b.yaml:2:1: worse", "c.yaml:3:1: worst"])) == (
        "a.yaml:1:1: bad (and 2 more problems)"
    )


def test_apply_runs_the_changed_datasets_and_their_downstream_within_the_selection(tmp_path: Path) -> None:
    root = applied_project(tmp_path / "shop")
    edit(root / "datasets/sales/orders-enriched.yaml", "An example dataset", "Enriched")
    config = load_project(root)
    assert affected_datasets(*plan_project(config, PlanRequest())) == (
        "com.example.orders-enriched",
        "com.example.revenue",
        "com.example.revenue-daily",
    )
    narrowed = PlanRequest(exclude=("com.example.revenue-daily",))
    assert affected_datasets(*plan_project(config, narrowed)) == (
        "com.example.orders-enriched",
        "com.example.revenue",
    )


# --- the loop, with real watchdog ---------------------------------------------------------------------


class Loop:
    """``watch`` running in a thread; cycles arrive on a queue stamped with ``time.monotonic``."""

    def __init__(self, watcher: Watcher) -> None:
        self.cycles: queue.Queue[tuple[float, WatchCycle]] = queue.Queue()
        self.stop = threading.Event()
        self.observers: list[BaseObserver] = []
        self.errors: list[BaseException] = []

        def observer() -> BaseObserver:
            self.observers.append(Observer())
            return self.observers[-1]

        def run() -> None:
            try:
                watch(
                    watcher,
                    on_cycle=lambda c: self.cycles.put((time.monotonic(), c)),
                    stop_event=self.stop,
                    observer_factory=observer,
                )
            except BaseException as e:  # pragma: no cover - reported by the test
                self.errors.append(e)

        self.thread = threading.Thread(target=run, name="watch-under-test", daemon=True)
        self.thread.start()

    def next(self) -> tuple[float, WatchCycle]:
        try:
            return self.cycles.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail(f"no watch cycle within {WAIT}s (errors: {self.errors})")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[tuple[Path, Loop]]:
    root = applied_project(tmp_path / "shop")
    running = Loop(Watcher(load_project(root), PlanRequest()))
    yield root, running
    running.close()


def test_watch_replans_on_save_survives_a_broken_manifest_and_stops_cleanly(loop) -> None:
    root, running = loop
    _, initial = running.next()
    assert initial.initial and initial.plan is not None and not initial.plan.has_changes

    # Files in the workspace and files no glob matches cause no cycle; they are not even watched.
    (root / ".odf" / "scratch.yaml").write_text("not a manifest")
    (root / "datasets" / "notes.txt").write_text("not a manifest either")
    orders = root / ORDERS
    good = edit(orders, "An example dataset", "Orders, edited")
    written = time.monotonic()
    arrived, cycle = running.next()
    latency = arrived - written
    print(f"plan arrived {latency * 1000:.0f} ms after the write")
    assert cycle.changed == (ORDERS,) and cycle.ok
    assert cycle.plan is not None
    assert [(s.dataset, s.action) for s in cycle.plan.definitions if s.has_changes] == [
        ("com.example.orders", Action.UPDATE)
    ]
    assert latency < MAX_LATENCY

    # An editor's safe save: write a temporary file, then rename it over the manifest. One cycle.
    temp = orders.with_name(".orders.yaml.tmp")
    temp.write_text(BROKEN_YAML)
    os.replace(temp, orders)
    _, broken = running.next()
    assert broken.changed == (ORDERS,) and broken.plan is None
    assert broken.error is not None and broken.error.startswith(f"{ORDERS}:") and "\n" not in broken.error

    orders.write_text(good)
    written = time.monotonic()
    arrived, fixed = running.next()
    assert fixed.ok and fixed.changed == (ORDERS,) and fixed.plan is not None
    assert fixed.plan.has_changes
    assert arrived - written < MAX_LATENCY

    # A macro edit that renders the same manifests: a cycle, and the same plan as before.
    macro = root / "macros" / "sql.sql"
    macro.write_text("{# select every column #}\n" + macro.read_text())
    _, same = running.next()
    assert same.changed == ("macros/sql.sql",) and same.plan is not None
    assert same.plan.has_changes and {s.dataset for s in same.plan.definitions if s.has_changes} == {
        "com.example.orders"
    }

    running.close()
    assert not running.thread.is_alive() and not running.errors
    assert running.observers and not running.observers[0].is_alive(), "the observer is stopped and joined"
    assert running.cycles.empty()


def test_watch_follows_a_folder_created_while_watching(loop) -> None:
    root, running = loop
    running.next()
    folder = root / "datasets" / "later"
    folder.mkdir()
    (folder / "weather2.yaml").write_text(
        PROJECT_FILES["datasets/other/weather.yaml"].replace("org.other.weather", "org.other.weather2")
    )
    _, cycle = running.next()
    assert "datasets/later/weather2.yaml" in cycle.changed
    assert cycle.plan is not None
    assert [(s.dataset, s.action) for s in cycle.plan.definitions if s.has_changes] == [
        ("org.other.weather2", Action.CREATE)
    ]


# --- the command ----------------------------------------------------------------------------------------


def _children(pid: int) -> list[str]:
    """Command lines of the processes whose parent is ``pid`` (empty where /proc is missing)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_cli_watch_prints_plans_and_exits_0_on_sigint(tmp_path: Path) -> None:
    root = applied_project(tmp_path / "shop")
    env = {k: v for k, v in os.environ.items() if k != "ODFPROJ_WORKSPACE"}
    env.update(PYTHONUNBUFFERED="1", COLUMNS="200", PYTHONPATH=str(REPO_DIR))
    proc = subprocess.Popen(
        [sys.executable, "-m", "odfproj", "watch"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    seen: list[str] = []

    def read_until(marker: str) -> float:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line)
            if marker in line:
                return time.monotonic()
        proc.kill()
        pytest.fail(f"{marker!r} not printed within {WAIT}s; stdout so far:\n{''.join(seen)}")

    try:
        read_until("no changes (7 unchanged)")
        assert seen[0].startswith(f"watching 7 manifests in {root}; Ctrl-C to stop")
        # The tests' environment turns the warm engine off: said once, and no query is checked.
        assert seen[1].startswith("queries are not checked while watching: the warm engine is off")
        assert "initial plan" in seen[2]
        assert _children(proc.pid) == [], "plan-only watch starts no JVM (nor any other process)"
        edit(root / ORDERS, "An example dataset", "Orders, edited")
        read_until(f"changed: {ORDERS}")
        read_until("Plan: 0 to create, 1 to update, 6 unchanged, 0 refused.")
        assert any("~ com.example.orders" in line for line in seen)
        (root / ORDERS).write_text(BROKEN_YAML)
        read_until(f"error: {ORDERS}:")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(WAIT)
    while not lines.empty():
        seen.append(lines.get())
    out = "".join(seen)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err and "Traceback" not in out
    assert out.endswith("stopped watching\n")


# --- --apply: one warm session across cycles ------------------------------------------------------------

ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: cities
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/*.csv
      read:
        kind: Csv
        header: true
        schema:
          - id BIGINT
          - city STRING
      merge:
        kind: Ledger
        primaryKey: [id]
    - kind: SetInfo
      description: Cities
"""


class CountingHolder:
    """A SparkSessionHolder over the shared test session that counts who asks for it."""

    def __init__(self, spark) -> None:
        from odfproj.engine.session import SparkSettings

        self._spark = spark
        self.settings = SparkSettings(
            master="local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
        )
        self.gets = 0

    @property
    def created(self) -> bool:
        return self.gets > 0

    def get(self):
        self.gets += 1
        return self._spark

    def size_work_by(self, work_bytes) -> None:
        """The shared session is started already: the size of the work changes nothing."""

    def stop(self) -> None:  # the shared session outlives every test
        pass


@pytest.mark.spark
def test_watch_apply_applies_runs_and_refuses_on_one_session(spark, tmp_path: Path) -> None:
    root = tmp_path / "cities"
    write_files(root, {"odfproj.yaml": "name: cities\n", "datasets/cities.yaml": ROOT})
    (root / "data").mkdir()
    (root / "data" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    holder = CountingHolder(spark)
    events: list[object] = []
    watcher = Watcher(
        load_project(root),
        PlanRequest(),
        apply=True,
        holder=holder,  # type: ignore[arg-type]
        on_run_event=events.append,
        on_planned=events.append,
    )

    first = watcher.cycle()
    assert first.ok and first.run is not None, first.error
    assert [(r.dataset, r.status, r.records_added) for r in first.run.results] == [
        ("cities", Status.SUCCESS, 2)
    ]
    # The plan is handed out before the run starts, so that it is shown before the run's progress.
    planned, *progress = events
    assert isinstance(planned, WatchCycle) and planned.initial and planned.run is None
    assert planned.plan is not None and planned.plan.has_changes
    assert holder.created and [(e.dataset, e.phase) for e in progress] == [
        ("cities", "queued"),
        ("cities", "start"),
        ("cities", "spark"),  # this cycle's data work is the first to need the session
        ("cities", "finish"),
    ]
    dataset = Workspace(load_project(root).workspace()).open("cities")

    # A plan without changes runs nothing.
    assert watcher.cycle([root / "datasets" / "cities.yaml"]).run is None

    manifest = root / "datasets" / "cities.yaml"
    edit(manifest, "description: Cities", "description: Cities of the world")
    (root / "data" / "2.csv").write_text("id,city\n3,Pune\n")
    gets = holder.gets
    second = watcher.cycle([manifest])
    assert second.ok and second.run is not None and second.run.apply is not None
    assert [r.records_added for r in second.run.results] == [1]
    assert holder.gets > gets, "the same holder, hence the same warm session, serves every cycle"
    head = dataset.head()

    # Changing the merge strategy of a dataset with data is refused: shown, nothing applied.
    edit(manifest, "kind: Ledger\n        primaryKey: [id]", "kind: Append")
    refused = watcher.cycle([manifest])
    assert refused.refused and refused.run is None and not refused.ok
    assert dataset.head() == head
