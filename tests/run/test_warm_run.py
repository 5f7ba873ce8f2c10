"""``odfproj run`` on the warm engine (run/warm_run.py): one real server for the module, real commands.

The server is started once in a folder of the module's own (``ODFPROJ_ENGINE_DIR``) and leased while
the tests use it; every warm run is ``python -m odfproj --warm run`` in a subprocess, as a user runs it,
and what it prints and writes is compared with a cold run of the same project on the shared session
(tests/cli_inprocess.py). Ctrl-C is a real SIGINT to the command, timed by the run's own output. The
last test kills the server in the middle of a run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odfproj.engine.session import SparkSettings
from odfproj.engine.warm.choice import DIR_ENV, SWITCH_ENV, session_refusal
from odfproj.engine.warm.client import stream
from odfproj.engine.warm.lifecycle import WarmEngine
from odfproj.engine.warm.protocol import USED_STAMP, ServerInfo
from odfproj.errors import EngineError
from odfproj.project.config import load_project
from odfproj.project.loader import PlanRequest
from odfproj.run.run import RUN_RESULTS_FILE
from odfproj.run.warm_run import needs_spark
from odfproj.run.warm_server import ENTRY
from odfproj.state.read import read_changelog
from odfproj.storage.workspace import Workspace
from tests import manifests
from tests.cli_inprocess import cli_in, run_main
from tests.run.test_interrupt import _project as many_roots
from tests.run.test_interrupt import _Run
from tests.run.test_run import make_project

pytestmark = pytest.mark.spark

#: A variable the project declares and a derivative's query reads: the command has it, the server not.
CITY = "ODFPROJ_TEST_WARM_CITY"


@dataclass
class Server:
    engine: WarmEngine
    info: ServerInfo


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    assert CITY not in os.environ
    engine = WarmEngine(tmp_path_factory.mktemp("warm-run-engine"), entry=ENTRY, idle=600.0)
    try:
        with engine.lease() as info:
            yield Server(engine, info)
    finally:
        engine.stop()


def _env(server: Server, root: Path, **extra: str) -> dict[str, str]:
    """The command's environment: this server's folder, no Spark or switch variables, a private TMPDIR."""
    scratch = root.parent / f"tmp-{root.name}"
    scratch.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_") and k != SWITCH_ENV}
    return {**env, DIR_ENV: str(server.engine.directory), "COLUMNS": "200", "TMPDIR": str(scratch), **extra}


def _warm(server: Server, root: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "odfproj", "--warm", "run", *args]
    return subprocess.run(
        command, cwd=root, env=_env(server, root, **extra), capture_output=True, text=True, timeout=600
    )


def _project(root: Path) -> Path:
    """test_run's project (a good root, a failing one, a push-only one, a view of each) and a derivative
    whose query reads a declared environment variable."""
    make_project(root)
    (root / "odfproj.yaml").write_text(f"name: runs\nenv:\n  - {CITY}\n")
    query = f"SELECT * FROM src WHERE city = '{{{{ env_var('{CITY}') }}}}'"
    text = manifests.derivative("good.here", {"src": "good"}, query)
    (root / "datasets" / "good.here.yaml").write_text(text)
    return root


_TIMES = re.compile(r"\d+(\.\d+)?s\b")
_LOG = re.compile(r"run-[0-9T.]+Z\.log")
_BOX = re.compile(r"[\u2500-\u257f]+")


def _lines(text: str, root: Path) -> list[str]:
    """What a run printed, without its times, its folder or its table's widths."""
    text = _LOG.sub("run-T.log", text.replace(str(root), "ROOT"))
    lines = (" ".join(_BOX.sub(" ", _TIMES.sub("Ts", line)).split()) for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("WAIT ")]


#: Columns that hold the moment of the run: the roots' data has no event time, so it is the ingest's.
_MOMENTS = ("system_time", "event_time")


def _records(root: Path) -> dict[str, list[dict]]:
    workspace = Workspace(load_project(root).workspace())
    tables = {name: read_changelog(workspace.open(name)) for name in workspace.list_datasets()}
    return {
        name: table.drop_columns([c for c in _MOMENTS if c in table.column_names]).to_pylist()
        for name, table in tables.items()
    }


def _results(root: Path) -> list[tuple[str, str, str, int, int]]:
    saved = json.loads((root / ".odf" / RUN_RESULTS_FILE).read_text())
    return [
        (
            r["unique_id"],
            r["status"],
            r["message"].replace(str(root), "ROOT"),
            r["records_added"],
            r["blocks_added"],
        )
        for r in saved["results"]
    ]


def test_a_warm_run_prints_and_writes_what_a_cold_run_does(server, spark, monkeypatch, tmp_path) -> None:
    hot, cold = _project(tmp_path / "hot"), _project(tmp_path / "cold")
    monkeypatch.setenv(CITY, "Oslo")  # the cold run reads it in this process; the warm one is sent it
    cold_run = cli_in(spark, monkeypatch, lambda: cold)
    for step in ("first", "after a new file"):
        code, printed = cold_run("--cold", "run")
        done = _warm(server, hot, **{CITY: "Oslo"})
        assert (done.returncode, code) == (1, 1), f"{step}: {done.stdout}{done.stderr}\n{printed}"
        assert "Traceback" not in done.stdout + done.stderr
        assert _lines(done.stdout + done.stderr, hot) == _lines(printed, cold), step
        assert _results(hot) == _results(cold), step
        warm_records = _records(hot)
        assert warm_records == _records(cold), step
        assert [r["city"] for r in warm_records["good.here"]] == ["Oslo"] * (1 if step == "first" else 2)
        for root in (hot, cold):  # the derivatives now take their incremental paths
            (root / "data" / "good" / "2.csv").write_text("id,city\n3,Oslo\n4,Quito\n")
    assert server.engine.status() is not None  # the same server throughout


def test_a_run_of_another_target_says_why_it_stays_cold(server, tmp_path) -> None:
    root = tmp_path / "jvm"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text(
        "name: jvm\ntargets:\n  dev:\n    spark_conf:\n      spark.driver.memory: 2g\n"
    )
    done = _warm(server, root)  # nothing to run: the cold run starts no JVM either
    assert done.returncode == 0, done.stderr
    assert "warm engine" not in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "odfproj", "--warm", "-v", "run"],
        cwd=root,
        env=_env(server, root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "warm engine not used (the target's spark_conf sets spark.driver.memory, which needs a JVM of its "
        "own): this run starts a JVM of its own"
    ) in done.stderr


def test_the_server_refuses_a_static_setting_it_does_not_have(spark) -> None:
    assert session_refusal(spark, SparkSettings(conf={"spark.sql.shuffle.partitions": "3"})) is None
    refused = session_refusal(spark, SparkSettings(conf={"spark.sql.warehouse.dir": "/elsewhere"}))
    assert refused is not None and "spark.sql.warehouse.dir" in refused and "static" in refused


def test_a_run_with_nothing_to_do_needs_no_spark(tmp_path, monkeypatch) -> None:
    root = make_project(tmp_path / "proj")
    config = load_project(root)
    assert needs_spark(config, PlanRequest(select=("pushed",)))  # its definitions are to be written
    monkeypatch.chdir(root)
    code, out = run_main("--cold", "apply", "--auto-approve", "--select", "pushed")  # no query: no JVM
    assert code == 0, out
    assert not needs_spark(config, PlanRequest(select=("pushed",)))  # a push-only root: nothing to poll
    assert needs_spark(config, PlanRequest())  # new definitions, files to read


def test_a_run_with_nothing_to_do_never_reaches_the_running_server(
    server, spark, monkeypatch, tmp_path
) -> None:
    """The command plans first: with nothing that needs Spark it runs in its own process (no JVM) and
    prints and writes what a cold run does, and the server's ``used`` stamp stays as it was."""
    hot, cold = _project(tmp_path / "hot"), _project(tmp_path / "cold")
    for root in (hot, cold):  # its file fails every run, so that root always has something to read
        for name in ("bad", "bad.view"):
            (root / "datasets" / f"{name}.yaml").unlink()
    monkeypatch.setenv(CITY, "Oslo")
    cold_run = cli_in(spark, monkeypatch, lambda: cold)
    assert _warm(server, hot, **{CITY: "Oslo"}).returncode == 0  # the first run has data to read
    assert cold_run("--cold", "run")[0] == 0
    used = server.engine.directory / USED_STAMP
    os.utime(used, (0, 0))
    done = _warm(server, hot, **{CITY: "Oslo"})
    code, printed = cold_run("--cold", "run")
    assert (done.returncode, code) == (0, 0), done.stdout + done.stderr
    assert used.stat().st_mtime == 0, "a run with nothing to do reached the server"
    assert "0 record(s) added" in done.stdout
    assert _lines(done.stdout + done.stderr, hot) == _lines(printed, cold)
    assert _results(hot) == _results(cold)


def test_two_projects_at_once_keep_their_own_settings(server, tmp_path) -> None:
    codecs = {"zipped": "gzip", "packed": "zstd"}
    roots = {}
    for name, codec in codecs.items():
        root = many_roots(tmp_path / name)
        (root / "odfproj.yaml").write_text(
            f"name: {name}\ntargets:\n  dev:\n    spark_conf:\n      spark.sql.parquet.compression.codec: {codec}\n"
        )
        roots[name] = root
    runs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "odfproj", "--warm", "run", "--threads", "2"],
            cwd=root,
            env=_env(server, root),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, root in roots.items()
    }
    for run in runs.values():
        out, _ = run.communicate(timeout=600)
        assert run.returncode == 0, out
    for name, root in roots.items():
        files = list((root / ".odf").rglob("data/*"))
        assert files, name
        found = {pq.ParquetFile(f).metadata.row_group(0).column(0).compression for f in files}
        assert found == {codecs[name].upper()}, name
        (log,) = (root / ".odf" / "logs").glob("run-*.log")  # each run's log has its own lines only
        text, other = log.read_text(), next(n for n in roots if n != name)
        assert f"project {name}," in text and f"project {other}," not in text
        assert text.count("START city.r0 ") == 1, text


def _verified(root: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "odfproj", "verify", "--integrity"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _saved(root: Path) -> dict[str, dict]:
    saved = json.loads((root / ".odf" / RUN_RESULTS_FILE).read_text())
    assert saved["interrupted"] is True
    return {r["unique_id"]: r for r in saved["results"]}


def test_first_ctrl_c_finishes_the_dataset_in_progress_and_cancels_the_rest(server, tmp_path) -> None:
    root = many_roots(tmp_path / "proj")
    run = _Run(root, ("--warm", "run", "--no-validate-queries"), _env(server, root))
    run.wait_for("out", "START city.r1 ")
    run.interrupt()
    code = run.finish()
    out, err = "".join(run.out), "".join(run.err)
    assert code == 130, out + err
    assert "Traceback" not in out + err
    assert "interrupted: finishing the datasets in progress" in err
    assert "Run interrupted after" in out
    results = _saved(root)
    assert results["city.r0"]["status"] == "success" and results["city.r1"]["status"] == "success"
    cancelled = [n for n, r in results.items() if r["status"] == "cancelled"]
    assert cancelled and all(results[n]["message"].startswith("not started") for n in cancelled)
    _verified(root)
    again = _warm(server, root)  # the server serves on, and the run finishes the rest
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Run complete" in again.stdout


def test_second_ctrl_c_stops_at_once_and_the_server_serves_on(server, tmp_path) -> None:
    root = many_roots(tmp_path / "proj")
    run = _Run(root, ("--warm", "run", "--no-validate-queries"), _env(server, root))
    run.wait_for("out", "START city.r1 ")
    run.interrupt()
    run.wait_for("err", "press Ctrl-C again")
    run.interrupt()
    code = run.finish()
    out, err = "".join(run.out), "".join(run.err)
    assert code == 130, out + err
    assert "Traceback" not in out + err
    assert err.rstrip().endswith("interrupted") and "Run complete" not in out
    results = _saved(root)
    assert len(results) == 8 and any(r["status"] == "cancelled" for r in results.values())
    _verified(root)
    again = _warm(server, root, "--lock-timeout", "120")  # the lock is released once the run's threads end
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Run complete" in again.stdout


def test_a_request_of_another_version_is_refused_in_one_line(server) -> None:
    with pytest.raises(
        EngineError, match=r"does not know the request 'run_project_v9'.*another odfproj version"
    ):
        stream(server.info, "run_project_v9", None, on_message=lambda _: None)


def test_last_a_server_that_dies_mid_run_is_one_line(server, tmp_path) -> None:
    root = many_roots(tmp_path / "proj")
    run = _Run(root, ("--warm", "run", "--no-validate-queries"), _env(server, root))
    run.wait_for("out", "START city.r1 ")
    os.killpg(server.info.pid, signal.SIGKILL)
    code = run.finish()
    out, err = "".join(run.out), "".join(run.err)
    assert code != 0 and "Traceback" not in out + err, out + err
    error = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and "the warm engine went away during the command" in error[0], err
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(f"/proc/{server.info.pid}").exists():
        time.sleep(0.2)
    shutil.rmtree(root / ".odf" / "logs", ignore_errors=True)
    _verified(root)
