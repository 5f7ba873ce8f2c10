"""The warm engine (engine/warm/): one real server on 127.0.0.1 for the module, and its bookkeeping.

The server is started once, by two leases racing over a stale record (as two commands would), kept up
by those leases while the tests use it, and its last test lets it stop by itself once idle. What runs on
it is compared with the cold path on the shared session: the plan's checks in-process (over the server's
socket, no Connect client in this process) and ``odfproj sql`` as a user runs it, in a subprocess (a
Connect client marks its whole process as one, which the rest of the suite must not inherit).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa
import pytest

from odfproj.cli import options as options_cmd
from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.settings import analysis_settings
from odfproj.engine.warm.choice import (
    DIR_ENV,
    IDLE_ENV,
    SWITCH_ENV,
    engine_dir,
    idle_timeout,
    warm_choice,
    warm_eligible,
)
from odfproj.engine.warm.client import WarmSessionHolder
from odfproj.engine.warm.lifecycle import WarmEngine
from odfproj.engine.warm.protocol import STATE_FILE, ServerInfo
from odfproj.errors import EngineError
from odfproj.odf import model
from odfproj.plan.engine_checks import query_checker
from odfproj.plan.queries import DerivativeCheck
from odfproj.plan.served_checks import WarmChecks
from odfproj.project.config import load_project
from odfproj.run.warm_server import ENTRY
from odfproj.state.read import read_changelog
from odfproj.state.views import run_sql
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import cli_in, run_main_split
from tests.state.test_views import workspace  # noqa: F401 - the fixture: a project run cold, twice
from tests.transform.helpers import schema_with
from tests.transform.mode_cases import CASES

REPO = Path(__file__).resolve().parents[2]

#: Short, so that the last test sees the server stop by itself; the leases below keep it up until then.
IDLE_S = 6.0


# --- choosing it: no server needed ------------------------------------------------------------------------


def test_it_is_on_by_default_and_off_where_ci_is_set_unless_asked_for() -> None:
    assert warm_choice(None, {}).enabled
    assert not warm_choice(None, {"CI": "true"}).enabled
    assert warm_choice(None, {"CI": "true", SWITCH_ENV: "on"}).enabled
    assert not warm_choice(None, {SWITCH_ENV: "off"}).enabled
    assert warm_choice(True, {"CI": "1", SWITCH_ENV: "off"}).enabled  # the flag decides
    assert not warm_choice(False, {}).enabled
    with pytest.raises(EngineError, match=r"ODFPROJ_WARM_ENGINE='maybe': expected on or off"):
        warm_choice(None, {SWITCH_ENV: "maybe"})
    with pytest.raises(EngineError, match=r"ODFPROJ_WARM_IDLE='soon'"):
        idle_timeout({IDLE_ENV: "soon"})
    assert idle_timeout({IDLE_ENV: "30"}) == 30.0


def test_under_ci_a_command_gets_a_jvm_of_its_own(monkeypatch) -> None:
    monkeypatch.delenv(SWITCH_ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    assert type(options_cmd.session_holder(SparkSettings(master="local[2]"))) is SparkSessionHolder
    monkeypatch.setenv(SWITCH_ENV, "on")
    assert isinstance(options_cmd.session_holder(SparkSettings(master="local[2]")), WarmSessionHolder)


def test_only_a_local_target_without_jvm_settings_runs_warm() -> None:
    assert warm_eligible(SparkSettings(master="local[*]", conf={"spark.sql.shuffle.partitions": "8"}))
    assert not warm_eligible(SparkSettings(master="local[*]", conf={"spark.driver.memory": "8g"}))
    assert not warm_eligible(SparkSettings(master="spark://10.0.0.5:7077"))
    assert not warm_eligible(SparkSettings(master="sc://spark.internal:15002"))


def test_the_folder_is_one_per_installation_unless_named(tmp_path) -> None:
    assert engine_dir({DIR_ENV: str(tmp_path)}) == tmp_path
    cached = engine_dir({"XDG_CACHE_HOME": str(tmp_path)})
    assert cached.parent == tmp_path / "odfproj" / "engine" and len(cached.name) == 12


def test_a_stale_record_is_removed_and_a_stranger_is_never_signalled(tmp_path) -> None:
    engine = WarmEngine(tmp_path, entry=ENTRY)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # a live process that took a dead server's pid, and does not answer on the socket
        record = ServerInfo(stranger.pid, 1, "t", str(tmp_path / "rpc.sock"), 0.0, 1.0)
        (tmp_path / STATE_FILE).write_text(record.to_json())
        assert engine.status() is None
        assert not (tmp_path / STATE_FILE).exists()
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    (tmp_path / STATE_FILE).write_text('{"pid": 12')  # half a record, from a crash
    assert engine.status() is None and not (tmp_path / STATE_FILE).exists()
    assert engine.stop() is None


def test_a_server_that_cannot_start_is_one_line_naming_its_log_and_leaves_nothing(tmp_path) -> None:
    engine = WarmEngine(tmp_path, entry="odfproj.no_such_module")
    with pytest.raises(EngineError) as caught, engine.lease():
        pass
    message = str(caught.value)
    assert message.startswith("the warm engine did not start (exit 1): ") and "\n" not in message
    assert "No module named odfproj.no_such_module" in message and str(tmp_path / "server.log") in message
    assert not (tmp_path / STATE_FILE).exists() and engine.status() is None


def test_engine_status_without_a_server(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    code, out, err = run_main_split("--cold", "engine", "status")
    assert code == 0, err
    assert out == f"not running (folder {tmp_path})\ncommands use it: no (--cold)\n"


# --- a real server ----------------------------------------------------------------------------------------


@dataclass
class Warm:
    engine: WarmEngine
    leased: list[ServerInfo]
    stale_pid: int
    leases: ExitStack


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    directory = tmp_path_factory.mktemp("warm-engine")
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale_pid = int(ended.stdout)
    stale = ServerInfo(stale_pid, 1, "stale", str(directory / "rpc.sock"), 0.0, 1.0)
    (directory / STATE_FILE).write_text(stale.to_json())
    engine = WarmEngine(directory, entry=ENTRY, idle=IDLE_S)
    leases = ExitStack()
    lock = threading.Lock()
    barrier = threading.Barrier(2)

    def lease(_: int) -> ServerInfo:
        barrier.wait()  # two commands at once
        context = engine.lease()
        info = context.__enter__()
        with lock:
            leases.push(context.__exit__)
        return info

    try:
        with ThreadPoolExecutor(2) as pool:
            leased = list(pool.map(lease, range(2)))
        yield Warm(engine, leased, stale_pid, leases)
    finally:
        leases.close()
        engine.stop()


def test_two_commands_at_once_start_one_server_over_a_stale_record(warm) -> None:
    first, second = warm.leased
    assert first == second and first.pid != warm.stale_pid
    status = warm.engine.status()
    assert status is not None and status.info == first and status.in_use
    assert stat.S_IMODE(warm.engine.directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((warm.engine.directory / STATE_FILE).stat().st_mode) == 0o600


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of sockets listening on ``port`` (``/proc/net/tcp*``, hex as the kernel writes)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.rpartition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_it_listens_on_loopback_only_and_refuses_a_client_without_its_token(warm) -> None:
    port = warm.leased[0].port
    # 127.0.0.1 as IPv4, or as the IPv4-mapped IPv6 address Java binds
    assert _listening_addresses(port) <= {"0100007F", "0000000000000000FFFF00000100007F"}
    assert _listening_addresses(port)
    client = (
        "from pyspark.sql.connect.session import SparkSession\n"
        f"SparkSession.builder.remote('sc://127.0.0.1:{port}').create().sql('SELECT 1').collect()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    refused = subprocess.run(
        [sys.executable, "-c", client], capture_output=True, text=True, env=env, timeout=120
    )
    assert refused.returncode != 0 and "UNAUTHENTICATED" in refused.stderr


INPUT = schema_with(("k", pa.string()), ("v", pa.int64()))


def test_the_plans_checks_on_it_equal_the_cold_ones(warm, engine) -> None:
    holder = WarmSessionHolder(analysis_settings(), warm.engine)
    warm_checks, cold_checks = WarmChecks(holder), query_checker(engine)
    try:
        inputs = {"a": INPUT, "b": INPUT}
        for n, (name, steps, expected) in enumerate(CASES):  # every execution mode
            transform = model.TransformSql(
                engine="spark", queries=tuple(model.SqlQueryStep(query=q, alias=a) for a, q in steps)
            )
            checked = warm_checks(DerivativeCheck(name, transform, inputs))
            assert str(checked.mode) == expected, name  # what the cold check yields (test_modes_spark)
            if n < 4:  # schema and mode, compared with the cold check itself
                assert checked == cold_checks(DerivativeCheck(name, transform, inputs)), name
        for query in ("SELECT nope FROM a", "SELECT event_time, rand() AS r FROM a", "DROP TABLE a"):
            transform = model.TransformSql(engine="spark", query=query)
            with pytest.raises(InvalidQueryError) as cold:
                cold_checks(DerivativeCheck("bad", transform, {"a": INPUT}))
            with pytest.raises(InvalidQueryError) as hot:
                warm_checks(DerivativeCheck("bad", transform, {"a": INPUT}))
            assert str(hot.value) == str(cold.value)
        read_only = MappingProxyType(inputs)  # what a caller may hold; pickle refuses it as it is
        plain = model.TransformSql(engine="spark", query="SELECT event_time, k FROM a")
        check = DerivativeCheck("ro", plain, read_only)  # type: ignore[arg-type]
        assert warm_checks(check) == cold_checks(check)
        assert holder.server().pid == warm.leased[0].pid  # the same server, not a new one
    finally:
        holder.stop()


def test_a_roots_ingest_check_on_it_equals_the_cold_one(warm, engine) -> None:
    holder = WarmSessionHolder(analysis_settings(), warm.engine)
    warm_checks, cold_checks = WarmChecks(holder), query_checker(engine)

    def source(query: str) -> model.AddPushSource:
        return model.AddPushSource(
            source_name="default",
            read=model.ReadStepCsv(schema=("city STRING", "amount BIGINT")),
            merge=model.MergeStrategyLedger(primary_key=("city",)),
            preprocess=model.TransformSql(engine="spark", query=query),
        )

    try:
        fine = source("SELECT city, amount * 2 AS doubled FROM input")
        schema = warm_checks.source_schema("root", fine, None)
        assert schema is not None and "doubled" in schema.names
        assert schema == cold_checks.source_schema("root", fine, None)
        dropped = source("SELECT amount FROM input")  # the primary key is gone
        with pytest.raises(InvalidQueryError) as cold:
            cold_checks.source_schema("root", dropped, None)
        with pytest.raises(InvalidQueryError) as hot:
            warm_checks.source_schema("root", dropped, None)
        assert str(hot.value) == str(cold.value)
    finally:
        holder.stop()


def _warm_sql(warm: Warm, root: Path, query: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_") and k != SWITCH_ENV}
    env[DIR_ENV] = str(warm.engine.directory)
    command = [sys.executable, "-m", "odfproj", "--warm", "sql", "--format", "json", query]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_sql_on_it_equals_a_cold_run(warm, engine, workspace) -> None:  # noqa: F811 - the fixture
    prices = workspace.root.parent  # the project of test_views' workspace
    query = "SELECT p.item, p.price, t.total FROM `prices` p CROSS JOIN `price.totals` t ORDER BY p.item"
    hot = _warm_sql(warm, prices, query)
    assert hot.returncode == 0, hot.stderr
    cold = run_sql(engine, workspace, query)
    assert [json.loads(line) for line in hot.stdout.splitlines()] == cold.to_pylist()
    refused = _warm_sql(warm, prices, "SELECT item, rand() FROM `prices`")
    assert refused.returncode == 1
    assert (
        refused.stderr.startswith("error: query: function rand is not allowed")
        and refused.stderr.count("\n") == 1
    )
    status = warm.engine.status()
    assert status is not None and status.info.pid == warm.leased[0].pid


PUSHED = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: main
      read:
        kind: NdJson
        schema:
          - event_time TIMESTAMP
          - id BIGINT
          - v STRING
      merge:
        kind: Append
"""

LINES = (
    '{"event_time": "2024-01-01T00:00:00Z", "id": 1, "v": "a"}\n'
    '{"event_time": "2024-01-02T00:00:00Z", "id": 2, "v": null}\n'
    '{"event_time": "2024-01-02T00:00:00Z", "id": 1, "v": "twice"}\n'
    '{"event_time": "2024-01-03T00:00:00Z", "id": 3, "v": "\u00fc"}\n'
)


def test_ingest_on_it_writes_the_records_a_cold_ingest_writes(warm, spark, monkeypatch, tmp_path) -> None:
    root = tmp_path / "proj"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: pushed\n")
    for name in ("hot", "cold"):
        (root / "datasets" / f"{name}.yaml").write_text(PUSHED.format(name=name))
    lines = tmp_path / "lines.ndjson"
    lines.write_text(LINES)
    code, out = cli_in(spark, monkeypatch, lambda: root)("--cold", "ingest", "cold", str(lines))
    assert code == 0, out
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_") and k != SWITCH_ENV}
    env[DIR_ENV] = str(warm.engine.directory)
    hot = subprocess.run(
        [sys.executable, "-m", "odfproj", "--warm", "ingest", "hot", str(lines)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert hot.returncode == 0, hot.stderr
    pushed = Workspace(load_project(root).workspace())
    assert verify_dataset(pushed.open("hot"), integrity=True) == []
    records = {n: read_changelog(pushed.open(n)).drop_columns(["system_time"]) for n in ("hot", "cold")}
    assert records["hot"].num_rows == 4 and records["hot"].equals(records["cold"])


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry.name))
    return kids


def test_last_it_stops_by_itself_once_idle_and_unused(warm) -> None:
    pid = warm.leased[0].pid
    jvms = _children(pid)
    assert jvms, "the server's JVM is its child"
    warm.leases.close()  # the commands end
    deadline = time.monotonic() + IDLE_S + 60
    while time.monotonic() < deadline and (warm.engine.directory / STATE_FILE).exists():
        time.sleep(0.5)
    assert not (warm.engine.directory / STATE_FILE).exists()
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in [pid, *jvms]):
        time.sleep(0.5)
    assert not any(Path(f"/proc/{p}").exists() for p in [pid, *jvms]), "nothing is left behind"
    assert "stopping: idle for 6 s" in (warm.engine.directory / "server.log").read_text()
