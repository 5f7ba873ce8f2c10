"""``odfproj watch`` checks changed queries on the warm engine (run/watch.py ``WarmQueryChecks``).

One real warm server for the module, in a folder of its own (``ODFPROJ_ENGINE_DIR``): the first test
has ``odfproj --warm watch`` start it (in the background, planning without checks meanwhile, then again
once it is up), the next one watches in-process with it warm and prints the save-to-output latency
(not asserted: a loaded 2-core machine). The rest need no JVM: the warm engine off (one notice, no
server, no JVM), and the checks' bookkeeping on a fake server (not ready, remembered, gone, failed).
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

import odfproj.run.watch as watch_module
from odfproj.cli.context import CliState
from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.warm.choice import DIR_ENV, IDLE_ENV, SWITCH_ENV
from odfproj.engine.warm.lifecycle import WarmEngine
from odfproj.engine.warm.protocol import STATE_FILE, ServerInfo
from odfproj.errors import EngineError
from odfproj.odf import model
from odfproj.plan.queries import DerivativeCheck
from odfproj.project.config import WORKSPACE_ENV, load_project
from odfproj.project.loader import PlanRequest
from odfproj.run.warm_server import ENTRY
from tests import manifests
from tests.conftest import REPO_DIR
from tests.project.conftest import write_files
from tests.run.test_watch import WAIT, Loop, _children

#: The first start of a JVM on a loaded machine is slow; everything after it is not.
START_WAIT = 300.0

GOOD = "SELECT event_time, id, city FROM cities"
MISSPELT = "SELECT event_time, id, cty FROM cities"
BIG = "datasets/big.yaml"


def project(root: Path) -> Path:
    """A root with a declared read schema and a derivative of it; nothing applied, so the initial plan
    creates both and checks the derivative's query against the root's planned schema."""
    cities = manifests.root("cities", path="data/*.csv", schema=["id BIGINT", "city STRING"])
    write_files(
        root,
        {
            "odfproj.yaml": "name: cities\n",
            "datasets/cities.yaml": cities,
            BIG: manifests.derivative("big", ["cities"], GOOD),
        },
    )
    return root


def save_query(root: Path, query: str) -> float:
    """Write the derivative with ``query``; the moment of the write."""
    (root / BIG).write_text(manifests.derivative("big", ["cities"], query))
    return time.monotonic()


class Command:
    """``odfproj ARGS watch`` in a subprocess, its stdout read line by line on a thread."""

    def __init__(self, root: Path, *args: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odfproj", *args, "watch"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.proc.stdout is not None
        out = self.proc.stdout
        threading.Thread(target=lambda: [self.lines.put(line) for line in out], daemon=True).start()

    def read_until(self, marker: str, wait: float = WAIT) -> list[str]:
        """The lines printed until one holding ``marker`` (included)."""
        deadline = time.monotonic() + wait
        chunk: list[str] = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            chunk.append(line)
            self.seen.append(line)
            if marker in line:
                return chunk
        self.proc.kill()
        pytest.fail(f"{marker!r} not printed within {wait:.0f}s; stdout so far:\n{''.join(self.seen)}")

    def interrupt(self) -> str:
        """Ctrl-C; everything it printed. It must exit 0, without a traceback."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        time.sleep(0.2)  # the reader thread's last lines
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        out, err = "".join(self.seen), self.proc.stderr.read()
        assert self.proc.returncode == 0, out + err
        assert "Traceback" not in out + err
        return out


def command_env(engine_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (WORKSPACE_ENV, SWITCH_ENV, "CI")}
    env.update(PYTHONUNBUFFERED="1", COLUMNS="200", PYTHONPATH=str(REPO_DIR), **{DIR_ENV: str(engine_dir)})
    env.update(extra)
    return env


# --- the warm engine off: said once, no server, no JVM ------------------------------------------------


def test_with_the_warm_engine_off_watch_says_so_once_and_starts_nothing(tmp_path: Path) -> None:
    root = project(tmp_path / "cities")
    engine_dir = tmp_path / "engine"
    watching = Command(root, env=command_env(engine_dir, **{SWITCH_ENV: "off"}))
    try:
        watching.read_until("Plan: 2 to create")
        notice = (
            "queries are not checked while watching: the warm engine is off (ODFPROJ_WARM_ENGINE=off); "
            "run checks them"
        )
        assert watching.seen[1] == notice + "\n", watching.seen
        save_query(root, MISSPELT)
        chunk = watching.read_until("Plan: 2 to create")
        assert any("query not validated" in line for line in chunk), chunk
        assert _children(watching.proc.pid) == [], "no JVM, no server"
    finally:
        out = watching.interrupt()
    assert out.count("queries are not checked") == 1 and "error:" not in out
    assert not (engine_dir / STATE_FILE).exists()


def test_the_switches_that_turn_the_checks_off_are_named(monkeypatch) -> None:
    from odfproj.cli.watch import _query_checks

    monkeypatch.delenv(SWITCH_ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    checks, notice = _query_checks(CliState())
    assert checks is None and notice is not None and "the warm engine is off (CI is set" in notice
    checks, notice = _query_checks(CliState(warm=False))
    assert checks is None and notice is not None and "(--cold)" in notice
    checks, notice = _query_checks(CliState(warm=True))  # chosen: nothing starts until start()
    assert isinstance(checks, watch_module.WarmQueryChecks) and notice is None


# --- the checks' bookkeeping, on a fake server ----------------------------------------------------------


class FakeHolder:
    """A WarmSessionHolder's lease, held back until ``up`` is set (a server starting)."""

    def __init__(self, socket: Path, *, fails: bool = False) -> None:
        self.engine = object()  # not a WarmEngine: no status to look at
        self.info = ServerInfo(os.getpid(), 1, "t", str(socket), 0.0, 1.0)
        self.up = threading.Event()
        self.fails = fails
        self.stops = 0

    def server(self) -> ServerInfo:
        self.up.wait(WAIT)
        if self.fails:
            raise EngineError("the warm engine did not start (exit 1): no java (log: server.log)")
        return self.info

    def stop(self) -> None:
        self.stops += 1


class FakeChecker:
    """Answers every derivative's check with its query's length; refuses queries with ``nope``."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.gone = False

    def __call__(self, check):
        transform = check.transform
        if self.gone:
            raise EngineError("the warm engine does not answer (Connection refused); --cold runs without it")
        self.asked.append(transform.query)
        if "nope" in transform.query:
            raise InvalidQueryError(f"query: no column nope in {check.dataset}")
        return len(transform.query)

    def source_schema(self, dataset, source, vocab):  # pragma: no cover - not asked here
        return None


def sql(query: str) -> model.TransformSql:
    return model.TransformSql(engine="spark", query=query)


def test_checks_wait_for_no_start_remember_answers_and_follow_a_server_that_went_away(tmp_path) -> None:
    holder, checker = FakeHolder(tmp_path / "no.sock"), FakeChecker()
    checks = watch_module.WarmQueryChecks(checker, holder, grace=0.05)  # type: ignore[arg-type]
    checks.start()
    # Starting: a check does not wait for it; the cycle plans without checks, and once more when up.
    with pytest.raises(watch_module.ChecksNotReady, match="the warm engine is starting"):
        checks(DerivativeCheck("big", sql(GOOD), {}))
    assert not checks.recheck_due()
    holder.up.set()
    deadline = time.monotonic() + WAIT
    while not checks.recheck_due():
        assert time.monotonic() < deadline, "no recheck once the server is up"
        time.sleep(0.01)
    assert not checks.recheck_due(), "once"
    # Up: answers, refusals included, are asked once per question.
    assert checks(DerivativeCheck("big", sql(GOOD), {})) == len(GOOD)
    with pytest.raises(InvalidQueryError, match="nope"):
        checks(DerivativeCheck("big", sql("SELECT nope"), {}))
    assert checks(DerivativeCheck("big", sql(GOOD), {})) == len(GOOD)
    with pytest.raises(InvalidQueryError, match="nope"):
        checks(DerivativeCheck("big", sql("SELECT nope"), {}))
    assert checker.asked == [GOOD, "SELECT nope"]
    # Gone (its socket does not answer a ping): released, leased again, this cycle plans without.
    checker.gone = True
    with pytest.raises(watch_module.ChecksNotReady, match="went away"):
        checks(DerivativeCheck("big", sql(MISSPELT), {}))
    assert holder.stops == 1
    deadline = time.monotonic() + WAIT
    while not checks.recheck_due():
        assert time.monotonic() < deadline, "no recheck once the server is up again"
        time.sleep(0.01)
    checker.gone = False
    with pytest.raises(InvalidQueryError):
        checks(DerivativeCheck("big", sql("SELECT nope"), {}))  # still remembered
    assert checks(DerivativeCheck("big", sql(MISSPELT), {})) == len(MISSPELT)
    checks.close()
    assert holder.stops == 2
    assert checks.take_notices() == [], "a fake engine has no status: nothing said about starting"


def test_a_server_that_cannot_start_is_said_once_and_watching_goes_on_unchecked(tmp_path) -> None:
    holder = FakeHolder(tmp_path / "no.sock", fails=True)
    checks = watch_module.WarmQueryChecks(FakeChecker(), holder, grace=0.05)  # type: ignore[arg-type]
    root = project(tmp_path / "cities")
    watcher = watch_module.Watcher(load_project(root), PlanRequest(), query_checks=checks)
    checks.start()
    starting = watcher.cycle()
    assert starting.plan is not None and starting.notice is not None and "is starting" in starting.notice
    holder.up.set()
    deadline = time.monotonic() + WAIT
    while checks.available():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert watcher.take_notices() == [
        "queries are not checked while watching: the warm engine did not start (exit 1): no java "
        "(log: server.log); run checks them"
    ]
    assert not watcher.recheck_due()
    save_query(root, MISSPELT)
    unchecked = watcher.cycle([root / BIG])
    assert unchecked.ok and unchecked.notice is None, "said once"
    assert watcher.take_notices() == []
    # A start still under way is not waited for by close().
    slow = FakeHolder(tmp_path / "no.sock")
    pending = watch_module.WarmQueryChecks(FakeChecker(), slow)  # type: ignore[arg-type]
    pending.start()
    began = time.monotonic()
    pending.close()
    assert time.monotonic() - began < 1.0 and slow.stops == 0
    slow.up.set()


# --- a real warm server ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_dir(tmp_path_factory) -> Iterator[Path]:
    """The module's warm engine folder; its server is stopped at the end, whoever started it."""
    directory = tmp_path_factory.mktemp("watch-engine")
    try:
        yield directory
    finally:
        WarmEngine(directory, entry=ENTRY).stop()


@pytest.mark.spark
def test_watch_starts_the_warm_engine_and_shows_a_query_error_then_the_schema(engine_dir, tmp_path) -> None:
    root = project(tmp_path / "cities")
    engine = WarmEngine(engine_dir, entry=ENTRY)
    watching = Command(root, "--warm", env=command_env(engine_dir, **{IDLE_ENV: "300"}))
    try:
        watching.read_until("starting the warm engine for query checks...")
        # Planned at once, without the checks while the server starts ...
        first = watching.read_until("queries not checked yet: the warm engine is starting")
        assert any("initial plan" in line for line in first)
        assert any("query not validated" in line for line in first), first
        # ... and again once it is up, with them.
        watching.read_until("the warm engine is up (", wait=START_WAIT)
        rechecked = watching.read_until("Plan: 2 to create")
        assert "planned again with the query checks" in rechecked[0]
        assert any("output schema (as the engine reports it" in line for line in rechecked), rechecked
        status = engine.status()
        assert status is not None and status.in_use, "watch leases the server while it runs"
        assert [c for c in _children(watching.proc.pid) if ENTRY not in c] == [], "no JVM of its own"

        written = save_query(root, MISSPELT)
        chunk = watching.read_until("error: ")
        print(f"query error shown {time.monotonic() - written:.2f}s after the save")
        assert chunk[-1].startswith(f"error: {BIG}: big: the query is invalid: ") and "cty" in chunk[-1], (
            chunk
        )
        assert any(line.startswith("! big [Derivative]") for line in chunk), "the plan shows it too"

        written = save_query(root, GOOD)
        chunk = watching.read_until("Plan: 2 to create")
        print(f"output schema shown {time.monotonic() - written:.2f}s after the save")
        assert any("output schema (as the engine reports it" in line for line in chunk), chunk
        assert any(line.strip() == "city string" for line in chunk), chunk
    finally:
        out = watching.interrupt()
    assert out.endswith("stopped watching\n")
    assert out.count("starting the warm engine") == 1
    status = engine.status()
    assert status is not None and not status.in_use, "released: left to its idle stop"


@pytest.mark.spark
def test_with_it_warm_a_save_is_checked_within_a_second_and_others_ask_nothing(
    engine_dir, tmp_path, monkeypatch
) -> None:
    from odfproj.cli.options import query_checker_for

    monkeypatch.setenv(DIR_ENV, str(engine_dir))
    root = project(tmp_path / "cities")
    checker, holder = query_checker_for(True, warm=True)
    assert checker is not None and holder is not None
    asked: list[str] = []

    class Counted:  # counts what reaches the server
        def __call__(self, check):
            asked.append(check.dataset)
            return checker(check)

        def source_schema(self, dataset, source, vocab):
            asked.append(dataset)
            return checker.source_schema(dataset, source, vocab)

    checks = watch_module.WarmQueryChecks(Counted(), holder)  # type: ignore[arg-type]
    checks.start()
    holder.server()  # waits for the lease of the background start (a ping), so that it is not timed
    running = Loop(watch_module.Watcher(load_project(root), PlanRequest(), query_checks=checks))
    try:
        _, initial = running.next()
        assert initial.ok and initial.notice is None, "a running server is leased within the grace"
        latencies: list[float] = []
        for n in range(6):  # a new query each time: nothing remembered
            bad = n % 2 == 0
            query = f"SELECT event_time, id, {'cty' if bad else 'city'} AS c{n} FROM cities"
            written = save_query(root, query)
            arrived, cycle = running.next()
            latencies.append(arrived - written)
            assert cycle.plan is not None and cycle.notice is None
            assert cycle.plan.has_refusals is bad, cycle.plan
        print(
            "save to checked plan, warm server (debounce "
            f"{watch_module.DEBOUNCE_SECONDS:.1f}s included): "
            + ", ".join(f"{s * 1000:.0f} ms" for s in latencies)
        )
        count = len(asked)
        config = root / "odfproj.yaml"
        config.write_text(config.read_text() + "# a comment\n")
        _, unrelated = running.next()
        assert unrelated.ok and len(asked) == count, "a save that changes no query asks the server nothing"
    finally:
        running.close()
        checks.close()
    assert not running.errors
    status = WarmEngine(engine_dir, entry=ENTRY).status()
    assert status is not None and not status.in_use
