"""Warm and cold say the same: every refusal and failure of run, plan, sql, ingest and test, both ways.

Each case copies one small project (run once, cold, by the module's fixture) into a ``cold`` and a ``warm``
folder of the same length, changes both copies the same way, runs the command in each, once with
``--cold`` and once with ``--warm`` on the module's one warm server (``ODFPROJ_ENGINE_DIR`` in a temp
folder), and compares exit code, stdout and stderr, and for ``run`` what it writes for later: its log
file's lines and ``run_results.json``. ``run``, ``plan`` and ``sql`` run in-process (their warm path talks
to the server over its socket); ``ingest`` and ``test`` run warm in a subprocess, as
tests/engine/test_warm.py does, because their warm path is a Spark Connect client, which marks its whole
process as one (the rest of the suite must not inherit that). A case whose warm path must reach the
server checks that it did (the server's ``used`` stamp), so a silent fall-back to cold passes nothing.

What may differ, and is normalised (:func:`_same`), is only: the case folder's name (``cold``/``warm``),
durations (and the table padding they change), the run log's time-stamped name, and the cold run's
``WAIT ... starting Spark`` line (the warm server's JVM is already up); in the run log, also each line's
time and Spark's own log; in ``run_results.json``, the times.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odfproj.engine.warm.choice import DIR_ENV, SWITCH_ENV
from odfproj.engine.warm.lifecycle import WarmEngine
from odfproj.engine.warm.protocol import USED_STAMP
from odfproj.run.run import RUN_RESULTS_FILE
from odfproj.run.warm_server import ENTRY
from tests import manifests
from tests.cli_inprocess import cli_in, run_main_split
from tests.run.test_run import DERIVATIVE, PUSH_ROOT, ROOT

pytestmark = pytest.mark.spark

#: Wide, so that no line wraps, the same both ways (in-process and in the warm subprocess).
COLUMNS = "200"

TESTS = """\
good:
  - not_null: [id]
"""


@dataclass
class Warm:
    engine: WarmEngine
    base: Path


@pytest.fixture(scope="module")
def warm(tmp_path_factory, spark) -> Iterator[Warm]:
    """One warm server for the module, and the base project after one cold run (good has 2 records)."""
    engine = WarmEngine(tmp_path_factory.mktemp("same-engine"), entry=ENTRY, idle=600.0)
    base = tmp_path_factory.mktemp("same") / "base"
    (base / "datasets").mkdir(parents=True)
    (base / "tests").mkdir()
    (base / "odfproj.yaml").write_text("name: same\n")
    for name, text in {
        "good": ROOT.format(name="good"),
        "good.view": DERIVATIVE.format(name="good.view", input="good"),
        "pushed": PUSH_ROOT.format(name="pushed"),
    }.items():
        (base / "datasets" / f"{name}.yaml").write_text(text)
    (base / "data" / "good").mkdir(parents=True)
    (base / "data" / "good" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    (base / "tests" / "good.yaml").write_text(TESTS)
    with pytest.MonkeyPatch.context() as monkeypatch:
        code, out = cli_in(spark, monkeypatch, lambda: base)("--cold", "run")
    assert code == 0, out
    try:
        with engine.lease():
            yield Warm(engine, base)
    finally:
        engine.stop()
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ  # no Connect client in this process


# --- what may differ -----------------------------------------------------------------------------------

_TIMES = re.compile(r"\b\d+(\.\d+)?s\b")
_LOG = re.compile(r"run-\d{8}T\d{6}\.\d+Z\.log")


def _same(text: str, root: Path) -> list[str]:
    """``text`` with only what legitimately differs normalised (see the module doc)."""
    text = _LOG.sub("run-T.log", text.replace(str(root), "ROOT"))
    lines = (" ".join(_TIMES.sub("Ts", line).split()) for line in text.splitlines())
    return [line for line in lines if not line.startswith("WAIT ")]


# --- the cases ------------------------------------------------------------------------------------------

Change = Callable[[Path], object]


def _write(relative: str, text: str) -> Change:
    return lambda root: (root / relative).write_text(text)


def _both(*changes: Change) -> Change:
    def change(root: Path) -> None:
        for each in changes:
            each(root)

    return change


#: A manifest the loader refuses (one problem) and one more (two problems in all).
BROKEN = _write(
    "datasets/broken.yaml",
    "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: broken\n  kind: Rooot\n  metadata: []\n",
)
BROKEN_TOO = _write(
    "datasets/broken.too.yaml",
    "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: broken.too\n  kind: Derivative\n  metadata: 3\n",
)
#: The evolution rules refuse a changed merge strategy on a dataset with data.
MERGE_CHANGED = _write(
    "datasets/good.yaml",
    ROOT.format(name="good")
    .replace("kind: Ledger", "kind: Append")
    .replace("        primaryKey: [id]\n", ""),
)


def _query(query: str) -> Change:
    return _write("datasets/good.view.yaml", manifests.derivative("good.view", {"src": "good"}, query))


UNKNOWN_COLUMN = _query("SELECT nope FROM src")
#: A Flink query that has no Spark equivalent (an UntranslatableQueryError: three constructor arguments).
UNTRANSLATABLE = _write(
    "datasets/good.view.yaml",
    manifests.derivative("good.view", {"src": "good"}, "SELECT * FROM src EMIT ON WINDOW CLOSE").replace(
        "engine: spark", "engine: flink"
    ),
)
FORBIDDEN = _query("SELECT id, rand() AS r FROM src")
#: A query the check accepts (an added column) that fails on the new record.
FAILS_WHILE_IT_RUNS = _both(
    _query("SELECT *, assert_true(id < 3) AS ok FROM src"), _write("data/good/2.csv", "id,city\n3,Rome\n")
)
#: A new file of good whose id is no number: its ingest fails in the run.
BAD_ROWS = _write("data/good/2.csv", "id,city\nnot-a-number,Oslo\n")
#: A file that sorts before the one already ingested: the run warns that it will never be ingested.
NEVER_INGESTED = _write("data/good/0.csv", "id,city\n9,Kyiv\n")
#: Tests that fail, warn, cannot run, and a test file validate refuses.
FAILING_TESTS = _write(
    "tests/good.yaml",
    TESTS
    + "  - accepted_values: {column: city, values: [Oslo]}\n"
    + "  - sql: SELECT * FROM `good` WHERE id > 1\n    name: warned\n    severity: warn\n"
    + "  - sql: SELECT nope FROM `good`\n    name: broken_query\n"
    + "pushed:\n  - not_null: [id]\n",  # no data yet: cannot run
)
WRONG_TESTS = _write("tests/good.yaml", "good:\n  - not_nul: [id]\n")
#: Lines for the push root: a string where a number belongs, and a line that is no JSON.
WRONG_TYPE = '{"id": "x", "v": "a"}\n'
UNPARSEABLE = '{"id": 1, "v": "a"}\n{not json\n'


@dataclass(frozen=True)
class Case:
    name: str
    change: Change
    args: tuple[str, ...]
    #: Run warm in a subprocess (a Connect client: ingest, test).
    apart: bool = False
    #: The lines of a file given on the command line (written in the project folder).
    lines: str | None = None
    #: Whether the warm command reaches the server (a plan whose queries did not change does not, nor a
    #: run whose plan needs no Spark).
    served: bool = True
    #: Whether the command fails (exit code not 0).
    fails: bool = True


CASES = (
    # A run whose plan refuses, or needs no Spark, stays in the command (run_project's hand_off).
    Case("run: a manifest refused", BROKEN, ("run",), served=False),
    Case("run: two manifests refused", _both(BROKEN, BROKEN_TOO), ("run",), served=False),
    Case("plan: a manifest refused", BROKEN, ("plan",), served=False),
    Case("plan: two manifests refused", _both(BROKEN, BROKEN_TOO), ("plan",), served=False),
    Case("run: an evolution rule refuses", MERGE_CHANGED, ("run",), served=False),
    Case("plan: an evolution rule refuses", MERGE_CHANGED, ("plan",), served=False),
    Case("plan: an unknown column", UNKNOWN_COLUMN, ("plan",)),
    Case("run: an unknown column", UNKNOWN_COLUMN, ("run",)),
    Case("plan: a forbidden function", FORBIDDEN, ("plan",)),
    Case("plan: a query that cannot be translated", UNTRANSLATABLE, ("plan",), served=False),
    Case("run: a query that cannot be translated", UNTRANSLATABLE, ("run",)),
    Case("run: a query fails while it runs", FAILS_WHILE_IT_RUNS, ("run",)),
    Case("run: an ingest fails, its reader skipped", BAD_ROWS, ("run",)),
    Case("run: a file never ingested (a warning)", NEVER_INGESTED, ("run",), fails=False),
    Case(
        "run: a selector that matches nothing",
        _both(),
        ("run", "--select", "nope"),
        fails=False,
        served=False,
    ),
    Case("run: data tests fail", FAILING_TESTS, ("run", "--select", "good")),
    Case("run: a test file refused", WRONG_TESTS, ("run",), served=False),
    Case("sql: not SQL", _both(), ("sql", "SELEC id FROM `good`")),
    Case("sql: an unknown dataset", _both(), ("sql", "SELECT * FROM `nope`")),
    Case("sql: an unknown column", _both(), ("sql", "SELECT nope FROM `good`")),
    Case("sql: a forbidden function", _both(), ("sql", "SELECT id, rand() FROM `good`")),
    Case("ingest: a wrong type", _both(), ("ingest", "pushed"), apart=True, lines=WRONG_TYPE),
    Case("ingest: a line that is no JSON", _both(), ("ingest", "pushed"), apart=True, lines=UNPARSEABLE),
    Case(
        "ingest: an unknown dataset", _both(), ("ingest", "nope"), apart=True, lines=WRONG_TYPE, served=False
    ),
    Case("test: fail, warn, cannot run", FAILING_TESTS, ("test",), apart=True),
    Case("test: a test file refused", WRONG_TESTS, ("test",), apart=True, served=False),
)


@dataclass(frozen=True)
class Said:
    code: int
    stdout: list[str]
    stderr: list[str]
    #: What the command's run log says (a run's: its own lines and odfproj's warnings), without times.
    log: list[str]
    #: The datasets' results in run_results.json (a run's), without their times.
    results: list[dict]


#: A run log's line: its time, level, logger and message.
_LOG_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) (?P<logger>\S+): (?P<message>.*)$")


def _run_log(root: Path, before: set[Path]) -> list[str]:
    """What odfproj wrote to the run log this command made, as ``LEVEL LOGGER: MESSAGE`` lines.

    Left out: Spark's own log (``odfproj.spark``, with its stack traces), which differs by session and
    moment, and the cold run's ``WAIT`` line (as on the console).
    """
    made = sorted(set((root / ".odf" / "logs").glob("*.log")) - before)
    lines, keep = [], False
    for path in made:
        for line in path.read_text().splitlines():
            match = _LOG_LINE.match(line)
            if match is not None:
                keep = match["logger"] != "odfproj.spark" and not match["message"].startswith("WAIT ")
                line = f"{match['level']} {match['logger']}: {match['message']}"
            if keep:  # a record's line, or one of its further lines
                lines.append(line)
    return _same("\n".join(lines), root)


def _results(root: Path) -> list[dict]:
    path = root / ".odf" / RUN_RESULTS_FILE
    results = json.loads(path.read_text().replace(str(root), "ROOT"))["results"] if path.exists() else []
    return [{k: v for k, v in r.items() if k != "execution_time"} for r in results]


def _copy(warm: Warm, folder: Path, case: Case) -> tuple[Path, set[Path]]:
    shutil.copytree(warm.base, folder)
    case.change(folder)
    return folder, set((folder / ".odf" / "logs").glob("*.log"))


def _args(case: Case, root: Path) -> tuple[str, ...]:
    if case.lines is None:
        return case.args
    lines = root / "lines.ndjson"
    lines.write_text(case.lines)
    return (*case.args, str(lines))


def _cold(case: Case, warm: Warm, folder: Path, spark, monkeypatch: pytest.MonkeyPatch) -> Said:
    root, logs = _copy(warm, folder, case)
    cli_in(spark, monkeypatch, lambda: root)  # the commands' holders on the shared session
    monkeypatch.chdir(root)
    code, out, err = run_main_split("--cold", *_args(case, root))
    return Said(code, _same(out, root), _same(err, root), _run_log(root, logs), _results(root))


def _warm(case: Case, warm: Warm, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Said:
    root, logs = _copy(warm, folder, case)
    args = ("--warm", *_args(case, root))
    if case.apart:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_") and k != SWITCH_ENV}
        env.update({DIR_ENV: str(warm.engine.directory), "COLUMNS": COLUMNS})
        done = subprocess.run(
            [sys.executable, "-m", "odfproj", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        monkeypatch.setenv(DIR_ENV, str(warm.engine.directory))
        monkeypatch.chdir(root)
        code, out, err = run_main_split(*args)
    return Said(code, _same(out, root), _same(err, root), _run_log(root, logs), _results(root))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_warm_and_cold_say_the_same(case: Case, warm: Warm, spark, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COLUMNS", COLUMNS)
    cold = _cold(case, warm, tmp_path / "cold", spark, monkeypatch)
    assert (cold.code != 0) is case.fails, "\n".join(cold.stdout + cold.stderr + cold.log)
    used = warm.engine.directory / USED_STAMP
    os.utime(used, (0, 0))
    hot = _warm(case, warm, tmp_path / "warm", monkeypatch)
    assert not case.served or used.stat().st_mtime > 0, "the warm command did not use the server"
    assert hot == cold
