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
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import store_env

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


def start(name: str, command: list[str], base: Path, env: dict[str, str] | None = None) -> Started:
    """Run ``command`` in a new process group, its output in ``base/NAME.log``; ``env`` adds variables."""
    log = base / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**spark_env(base), **(env or {})},
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


def hiding(folder: Path) -> list[str]:
    """The command prefix that runs a command in a mount namespace of its own where ``folder`` is an
    empty tmpfs: the command (a worker, and the executors it starts) cannot see what the driver keeps
    there, as a worker on another host could not. Skips the test where namespaces cannot be made."""
    unshare = ["unshare", "--mount", "--propagation", "private"]
    probe = (
        subprocess.run([*unshare, "true"], capture_output=True, check=False)
        if shutil.which("unshare")
        else None
    )
    if probe is None or probe.returncode != 0:
        pytest.skip(
            "workers that cannot see the driver's disk need mount namespaces (unshare --mount, as root)"
        )
    return [*unshare, "sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"', str(folder)]


@contextlib.contextmanager
def standalone_cluster(
    base: Path, *, hide: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[Cluster]:
    """A standalone master and two workers (2 cores, 1 GiB each) on 127.0.0.1, stopped at the end.

    ``hide``: a folder neither worker (nor any executor) sees; each worker then has a scratch folder
    of its own too. ``env``: variables for the workers and their executors (a store's credentials).
    """
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
            worker_env = dict(env or {})
            if hide is not None:
                (base / f"local{n}").mkdir()
                worker_env["SPARK_LOCAL_DIRS"] = str(base / f"local{n}")
            worker = start(
                f"worker{n}",
                [
                    *(hiding(hide) if hide is not None else []),
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
                worker_env,
            )
            started.append(worker)
            work_dirs.append(work)
        for worker in started[1:]:
            worker.wait_for(r"Successfully registered with master")
        yield Cluster(url, tuple(work_dirs), base)
    finally:
        for process in reversed(started):
            process.stop()


@pytest.fixture(scope="package")
def standalone(tmp_path_factory) -> Iterator[Cluster]:
    """A standalone master and two workers (2 cores, 1 GiB each) on 127.0.0.1."""
    with standalone_cluster(tmp_path_factory.mktemp("standalone")) as cluster:
        yield cluster


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


@contextlib.contextmanager
def connect_on(
    cluster: Cluster,
    name: str,
    *,
    conf: dict[str, str] | None = None,
    jars: tuple[Path, ...] = (),
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[ConnectServer]:
    """A Spark Connect server whose driver runs its work on ``cluster``'s workers, stopped at the end.

    ``conf`` and ``jars``: more of its settings and class path (a store's connector, as its operator
    would give them); ``prefix``: a command to run it under (:func:`hiding`); ``env``: its variables.
    """
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        cluster.master_url,
        "--driver-memory",
        "512m",
    ]
    if jars:
        command += ["--jars", ",".join(str(j) for j in jars)]
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        **APP_CONF,
        **(conf or {}),
    }
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    server = start(name, [*(prefix or []), *command], cluster.base, env)
    try:
        port = server.wait_for(r"Spark Connect server started at: \S+?:(\d+)").group(1)
        yield ConnectServer(f"sc://127.0.0.1:{port}", server.log)
    finally:
        server.stop()


@pytest.fixture(scope="package")
def connect_server(standalone) -> Iterator[ConnectServer]:
    """A Spark Connect server whose driver runs its work on the standalone cluster's workers."""
    with connect_on(standalone, "connect") as server:
        yield server


@dataclass(frozen=True)
class StoreOnly:
    """A cluster whose workers share nothing with the driver but an S3 server (:func:`store_only`)."""

    cluster: Cluster
    #: The folder the workers cannot see: put the driver's projects, caches and temporary files in it.
    driver: Path
    #: The store's variables (endpoint, credentials), as the workers have them too.
    aws: dict[str, str]

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.aws["AWS_ENDPOINT_URL"],
            region_name=self.aws["AWS_REGION"],
            aws_access_key_id=self.aws["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.aws["AWS_SECRET_ACCESS_KEY"],
        )

    def new_bucket(self) -> str:
        name = f"odfproj-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def driver_env(self, bucket: str) -> dict[str, str]:
        """The variables of a driver process whose workspace is ``s3://BUCKET/repo`` and whose temporary
        files and Spark scratch stay in the hidden folder."""
        (self.driver / "tmp").mkdir(exist_ok=True)
        return {
            **self.aws,
            "ODFPROJ_WORKSPACE": f"s3://{bucket}/repo",
            "TMPDIR": str(self.driver / "tmp"),
            "SPARK_LOCAL_DIRS": str(self.driver / "local"),
        }


@pytest.fixture(scope="package")
def store_only(tmp_path_factory, s3_endpoint: str) -> Iterator[StoreOnly]:
    """A standalone cluster whose workers (and their executors) cannot see the driver's folder, which
    holds the driver's projects, caches and temporary files: the only storage they share with it is
    the S3 server. The workers get the store's credentials in their environment, as an instance role
    would give them; the driver gets them the same way."""
    aws = store_env(s3_endpoint)
    driver = tmp_path_factory.mktemp("driver")
    with standalone_cluster(tmp_path_factory.mktemp("store-only"), hide=driver, env=aws) as cluster:
        yield StoreOnly(cluster, driver, aws)


@pytest.fixture(scope="package")
def store_only_connect(store_only: StoreOnly) -> Iterator[ConnectServer]:
    """A Spark Connect server on the store-only cluster, which cannot see the driver's folder either. It
    brings its own S3A connector and S3 settings, as a Connect server's operator gives them (odfproj
    sends none to a server): the cached connector jars, and S3A's settings from the same variables."""
    from odfproj.engine.packages import package, resolved_jars
    from odfproj.engine.s3a import environment_conf
    from tests.conftest import s3a_jars_or_skip

    s3a_jars_or_skip()
    with connect_on(
        store_only.cluster,
        "connect-store-only",
        conf=environment_conf(store_only.aws),
        jars=resolved_jars(package("s3a")),
        prefix=hiding(store_only.driver),
        env=store_only.aws,
    ) as server:
        yield server
