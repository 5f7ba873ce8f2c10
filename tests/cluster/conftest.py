"""A real Spark standalone cluster and a real Spark Connect server on 127.0.0.1, from PySpark's own jars.

Everything is started with ephemeral ports, its own temporary folders, small memory and
``SPARK_LOCAL_IP=127.0.0.1``, each process in a process group of its own; a finalizer stops each
group (the workers' executors with them) even when a test fails or the run is interrupted, and an
``atexit`` hook does the same if the interpreter ends without running finalizers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

#: How long a master, worker or Connect server may take to come up on a loaded machine.
START_TIMEOUT_S = 180.0

#: Process groups started here and not yet stopped (for the atexit safety net).
_RUNNING: set[int] = set()


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Started:
    """A process group started by a fixture, with the log its output goes to."""

    name: str
    process: subprocess.Popen
    log: Path

    def wait_for(self, pattern: str, timeout: float = START_TIMEOUT_S) -> re.Match[str]:
        """The first match of ``pattern`` in the log; fails naming the log's tail if it never comes."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            match = compiled.search(text)
            if match:
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-30:]) if self.log.exists() else ""
        pytest.fail(f"{self.name} did not log {pattern!r} (exit {self.process.poll()}):\n{tail}")

    def stop(self) -> None:
        stop_group(self.process)


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the process group, then SIGKILL if it has not ended within 20 s."""
    pgid = process.pid
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
            break
    # The group may outlive its leader (an executor mid-start): make sure nothing of it is left.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    _RUNNING.discard(pgid)


@atexit.register
def _stop_leftovers() -> None:
    for pgid in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def spark_env(base: Path) -> dict[str, str]:
    """The environment of every Spark process started here: loopback only, own folders and config."""
    conf_dir = base / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for key in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "MASTER"):
        env.pop(key, None)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_PID_DIR=str(base / "pids"),
        SPARK_LOCAL_DIRS=str(base / "local"),
        SPARK_DAEMON_MEMORY="512m",  # the Connect server counts as a daemon: its driver needs 450 MiB at least,
    )
    return env


def start(name: str, command: list[str], base: Path) -> Started:
    """Run ``command`` in a new process group, its output in ``base/NAME.log``."""
    log = base / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=spark_env(base),
            cwd=base,
            start_new_session=True,
        )
    _RUNNING.add(process.pid)
    return Started(name, process, log)


@dataclass(frozen=True)
class Cluster:
    """A running standalone master with its workers' folders."""

    master_url: str
    work_dirs: tuple[Path, ...]
    base: Path


@pytest.fixture(scope="package")
def standalone(tmp_path_factory) -> Iterator[Cluster]:
    """A standalone master and two workers (2 cores, 1 GiB each) on 127.0.0.1."""
    base = tmp_path_factory.mktemp("standalone")
    spark_class = str(spark_home() / "bin" / "spark-class")
    started: list[Started] = []
    try:
        master = start(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
            ],
            base,
        )
        started.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://\S+)").group(1)
        work_dirs = []
        for n in (1, 2):
            work = base / f"work{n}"
            work.mkdir()
            worker = start(
                f"worker{n}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--webui-port",
                    "0",
                    "--cores",
                    "2",
                    "--memory",
                    "1g",
                    "--work-dir",
                    str(work),
                    url,
                ],
                base,
            )
            started.append(worker)
            work_dirs.append(work)
        for worker in started[1:]:
            worker.wait_for(r"Successfully registered with master")
        yield Cluster(url, tuple(work_dirs), base)
    finally:
        for process in reversed(started):
            process.stop()


#: Each application gets 2 executors of 1 core and 512 MiB: one per worker, as the master spreads them.
APP_CONF = {
    "spark.cores.max": "2",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
}


@dataclass(frozen=True)
class ConnectServer:
    url: str
    log: Path


@pytest.fixture(scope="package")
def connect_server(standalone) -> Iterator[ConnectServer]:
    """A Spark Connect server whose driver runs its work on the standalone cluster's workers."""
    base = standalone.base
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        standalone.master_url,
        "--driver-memory",
        "512m",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        "spark.connect.grpc.binding.port=0",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
    ]
    for key, value in APP_CONF.items():
        command += ["--conf", f"{key}={value}"]
    server = start("connect", command, base)
    try:
        port = server.wait_for(r"Spark Connect server started at: \S+?:(\d+)").group(1)
        yield ConnectServer(f"sc://127.0.0.1:{port}", server.log)
    finally:
        server.stop()
