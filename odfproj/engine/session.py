"""The one SparkSession of an odfproj process, created lazily and configured from the active target.

Starting a JVM costs seconds, so nothing here runs at import time: commands with no data work (validate,
plan, a no-op run) never create a session. ``SparkSessionHolder.created`` lets callers and tests prove it.

A target is either classic Spark, whose driver runs in this process behind py4j (``local[...]``,
``spark://``, ``yarn``, ``k8s://``), or a Spark Connect server (``sc://``), where the driver runs
elsewhere and this process is a gRPC client. Classic-only machinery (the quiet gateway, the JVM's log
level, the interrupt guards of a JVM start) applies to the first only; :func:`is_connect` says which.
"""

from __future__ import annotations

import logging
import os
import re
import select
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields, replace
from types import FrameType, MappingProxyType
from typing import IO, TYPE_CHECKING, Any

from odfproj.engine.credentials import SPARK_REDACTION_REGEX, redacted
from odfproj.engine.packages import session_jars
from odfproj.errors import EngineError

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import DataFrame, SparkSession

#: Settings every odfproj session gets; a target's ``spark_conf`` may override only the tuning keys of
#: ``engine.settings.ALLOWED_SPARK_CONF`` (shuffle partitions, parallelism, adaptive execution).
BASE_CONF: Mapping[str, str] = MappingProxyType(
    {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        # Manifests must not read arbitrary files through `SELECT * FROM parquet.`/etc/...``.
        "spark.sql.runSQLOnFiles": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        "spark.sql.adaptive.enabled": "true",
        # Parquet timestamps as the common data schema wants them: INT64 millis, UTC-adjusted.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
        "spark.sql.legacy.timeParserPolicy": "CORRECTED",
        # PySpark 4 records the Python call site of every Column and function call in the JVM (about
        # four py4j round trips each, 92 instead of 24 per small select, measured) so that an error can
        # name the line that built the column. odfproj builds its columns itself: the line would be
        # odfproj's, never the user's, whose SQL errors name their query.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # What Spark hides where it shows its conf: its default and the credential keys it misses.
        "spark.redaction.regex": SPARK_REDACTION_REGEX,
    }
)


#: The driver JVM's optimising compiler (C2) waits for code ten times hotter than its default. A run is
#: thousands of short queries, each analysed, planned and code-generated once, and C2 spent 39 % of
#: bench_dag's 50-dataset run CPU compiling code that hardly ran again; with these thresholds the run
#: took 9 % less CPU. C1 only (``-XX:TieredStopAtLevel=1``) saved 27 % there but made a 10M-row local job
#: 27 % more CPU-hungry, these thresholds cost that job nothing (bench/README.md, "Fixed costs of a
#: run"): a ``local`` driver runs the executors' tasks too, and large local jobs must not pay for small
#: ones. Executors of a cluster have JVMs of their own and keep the default. These are the options of a
#: driver that lives long (the warm engine's server) or is started for large work; a command's own driver
#: otherwise takes :data:`SHORT_LIVED_JIT_OPTIONS`.
DRIVER_JIT_OPTIONS = (
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
)

#: A command's own driver (no warm engine: CI, ``--cold``) compiles with C1 only, unless the command
#: starts it for large work (:data:`LARGE_WORK_BYTES`). It lives for one command, and a cold JIT compiles
#: Spark's analyser, planner and scheduler while the command waits: on bench_dag's 50-dataset cold first
#: run, C2 and tiered C1 took 20 of 65 s of CPU, and C1 only (whose code also runs without the profiling
#: of tiered C1) took 22 % off the run's CPU (bench/README.md, "Cold runs").
SHORT_LIVED_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1",)

#: The input (bytes of files to read) from which a command's own ``local`` driver compiles as the
#: long-lived one does. Its tasks run in the driver's JVM, and C1's code is slow on rows: plain
#: CSV-to-Parquet of 20M rows (783 MB) took 45-50 s with C1 only against 15-20 s with
#: :data:`DRIVER_JIT_OPTIONS`, an Append ingest of them 83 s against 25 s (bench/README.md, "The JIT of a
#: cold command"), while C1 saves a cold run of small datasets about 10 s of CPU: the break-even is near
#: 150 MB of CSV.
LARGE_WORK_BYTES = 128 * 1024 * 1024

#: ``tiered`` or ``c1``: the JIT of every driver this process starts, whatever its lifetime and work.
DRIVER_JIT_ENV = "ODFPROJ_DRIVER_JIT"


def driver_jit_options(long_lived: bool, large_work: bool = False) -> tuple[str, ...]:
    """The driver JVM's JIT options: :data:`DRIVER_JIT_OPTIONS` if it lives long or was started for large
    work, else C1 only; :data:`DRIVER_JIT_ENV` overrides both."""
    chosen = os.environ.get(DRIVER_JIT_ENV, "").strip().lower()
    if chosen == "tiered" or ((long_lived or large_work) and chosen != "c1"):
        return DRIVER_JIT_OPTIONS
    return SHORT_LIVED_JIT_OPTIONS


#: Tuning for a ``local`` master, whose executors share one machine (and this process's JVM) with the
#: driver: no adaptive query execution by default. Each shuffle of an adaptive plan runs as a job of its
#: own and the rest of the plan is optimised again after it; a run's operations are mostly small, so on
#: bench_dag's 50-dataset run this was 231 of 539 Spark jobs, and turning it off saved 9-11 % of the
#: run's CPU (bench/README.md, "Fixed costs of a run"). Joins of small inputs are still broadcast, from
#: the files' statistics at planning. A target's ``spark_conf`` may turn it back on; a cluster keeps it.
LOCAL_TUNING_CONF: Mapping[str, str] = MappingProxyType({"spark.sql.adaptive.enabled": "false"})


#: Settings for work on few rows, on a ``local`` master (:meth:`odfproj.engine.spark.SparkEngine.small_work`).
#: Spark evaluates expressions interpreted instead of generating Java code for every operator and
#: expression and compiling it (Janino): an everyday derivative update of a few hundred rows is dozens of
#: distinct little plans, each compiled once and run on a handful of rows (on bench_dag's re-run,
#: compiling was 14 % of the driver's samples, about 360 classes a run). And the rows go through few
#: tasks and jobs: one shuffle partition, the files read packed into one split (each small file was a
#: task of its own, and each task costs scheduling and a serialised closure whatever its rows), joins
#: shuffled within the job instead of broadcast (each broadcast side was a Spark job of its own: a join
#: update ran five). Together they took 22 % off the warm re-run's driver CPU and 17 % off its time
#: (bench/README.md, "Session 13"; the joins' setting 10 % more).
#: The results depend on none of them, only the speed does. Large work keeps generated code and the
#: target's partitioning, which is what makes a million rows fast; a cluster's executors keep them too.
SMALL_WORK_CONF: Mapping[str, str] = MappingProxyType(
    {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.sql.shuffle.partitions": "1",
        "spark.sql.files.minPartitionNum": "1",
        "spark.sql.files.openCostInBytes": "1024",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
    }
)


#: The attribute that marks a session as small work's (:func:`mark_small_work`).
_SMALL_WORK_MARK = "_odfproj_small_work"


def mark_small_work(session: SparkSession) -> None:
    """Mark ``session`` (a child with :data:`SMALL_WORK_CONF`) as small work's: its frames go in one task."""
    setattr(session, _SMALL_WORK_MARK, True)


def is_small_work_frame(frame: DataFrame) -> bool:
    """Whether ``frame`` belongs to a small-work session (:func:`mark_small_work`); no round trip."""
    return bool(getattr(frame.sparkSession, _SMALL_WORK_MARK, False))


def in_one_partition(frame: DataFrame) -> DataFrame:
    """``frame`` as one partition the planner knows to be one, when it is small work's; else as it is.

    Small work has one shuffle partition, but the planner does not know a file scan's partitioning,
    so every aggregation, join and window over one still plans a shuffle: a stage of its own, with its
    tasks, its shuffle files and its scheduling (on bench_dag's re-run, a join update ran 5 stages for a
    few hundred rows). ``coalesce(1)`` merges the partitions without a shuffle and tells the planner so
    (a single partition satisfies every distribution an operator asks for): the update runs as one
    stage. It took 8-20 % off the full, join and grouped updates there (bench/README.md, "Session 15").
    Large work keeps its partitions, which is where its parallelism is.
    """
    return frame.coalesce(1) if is_small_work_frame(frame) else frame


#: Where a driver in this process listens when its executors run in it too (``local``): loopback only.
#: A cluster's executors must reach the driver, so elsewhere Spark's own choice stands (the machine's
#: address, or ``SPARK_LOCAL_IP``).
LOCAL_DRIVER_CONF: Mapping[str, str] = MappingProxyType(
    {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
)


@dataclass(frozen=True)
class SparkSettings:
    """How to build the session: master URL, extra conf, and whether Spark's warnings also reach the console."""

    master: str = "local[*]"
    app_name: str = "odfproj"
    conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    verbose: bool = False
    #: Put Hadoop's S3A connector (``engine.packages``, from the jar cache) on the class path at start.
    s3a_connector: bool = False
    #: The driver lives for many commands (the warm engine's server): the JIT for long runs, and no
    #: class-data archive written at its exit (``engine.class_data``; one made by a command is used).
    long_lived: bool = False
    #: The command starts this driver for work of :data:`LARGE_WORK_BYTES` or more
    #: (:meth:`SparkSessionHolder.size_work_by`): the long-lived driver's JIT.
    large_work: bool = False

    def __repr__(self) -> str:
        """A dataclass's repr, with the conf as it may be shown: a credential's value never is."""
        shown = (
            f"{f.name}={redacted(self.conf) if f.name == 'conf' else getattr(self, f.name)!r}"
            for f in fields(self)
        )
        return f"SparkSettings({', '.join(shown)})"

    @property
    def is_connect(self) -> bool:
        """Whether the target is a Spark Connect server rather than a driver in this process."""
        return is_connect(self.master)

    @property
    def is_local(self) -> bool:
        """Whether the executors run in the driver's own JVM (a ``local`` master)."""
        return self.master.strip().startswith("local")

    def effective_conf(self) -> dict[str, str]:
        merged = dict(BASE_CONF)
        if self.is_local:
            merged.update(LOCAL_DRIVER_CONF)
            merged.update(LOCAL_TUNING_CONF)
        merged["spark.driver.extraJavaOptions"] = " ".join(
            (_log_options(), *driver_jit_options(self.long_lived, self.large_work))
        )
        # odfproj makes no tables; without this Spark leaves an empty spark-warehouse/ in the user's cwd.
        merged["spark.sql.warehouse.dir"] = os.path.join(tempfile.gettempdir(), "odfproj-spark-warehouse")
        jars = session_jars(s3a_connector=self.s3a_connector)  # odfproj's own choice, never a project's
        if jars:
            merged["spark.jars"] = ",".join(str(jar) for jar in jars)
        merged.update({str(k): str(v) for k, v in self.conf.items()})
        return merged


#: The scheme of a Spark Connect target's URL.
CONNECT_SCHEME = "sc://"

#: The oldest PySpark whose Connect client can open a fresh server-side session (``newSession``), which
#: every query scope needs for its own temporary views.
CONNECT_MIN_PYSPARK = (4, 3)

#: The Python packages PySpark's Connect client imports, beyond odfproj's own dependencies.
CONNECT_MODULES = ("pandas", "grpc", "grpc_status", "google.rpc", "zstandard")


def is_connect(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server (``sc://HOST:PORT``)."""
    return master.strip().startswith(CONNECT_SCHEME)


def create_spark_session(settings: SparkSettings) -> SparkSession:
    """Build (or reuse, Spark keeps one per JVM) a session configured as ``settings`` say."""
    if settings.is_connect:
        return _create_connect_session(settings)
    return _create_classic_session(settings)


def _create_classic_session(settings: SparkSettings) -> SparkSession:
    """A session whose driver runs in this process (local, standalone, YARN, Kubernetes), behind py4j."""
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    try:
        from pyspark import SparkConf
    except ImportError as e:  # pragma: no cover - pyspark is a dependency
        raise EngineError(f"pyspark is not installed: {e}") from None
    conf = SparkConf().setMaster(settings.master).setAppName(settings.app_name)
    for key, value in settings.effective_conf().items():
        conf.set(key, value)
    with _noting_interrupts() as interrupted:
        try:
            _launch_quiet_gateway(conf, settings.verbose, long_lived=settings.long_lived)
            session = _classic_get_or_create(conf)
        except Exception as e:  # the JVM failed to start: no Java, bad master URL, ...
            if interrupted.is_set():  # PySpark's clean-up after a Ctrl-C failed in turn: not a Java problem
                raise KeyboardInterrupt from None
            raise EngineError(
                f"could not start Spark (master {settings.master}): {_first_line(e)}; "
                "is Java 17+ installed or JAVA_HOME set? (./dev installs a JRE when none is found)"
            ) from None
    # Spark logs at WARN into the run's log file (see _forward_stderr); the console shows them only with -v.
    session.sparkContext.setLogLevel("WARN")
    _quiet_python_loggers(settings.verbose)
    return session


def _classic_get_or_create(conf: SparkConf) -> SparkSession:
    """The classic session of this process's JVM, made from ``conf`` if there is none yet.

    ``SparkSession.builder`` would hand back a Spark Connect session once a Connect session exists in
    the process (PySpark then marks the whole process as Connect), yet a process talking to a Connect
    target still needs the classic, local sandbox that checks queries (``engine.spark``). So the
    classic session is built from its parts, as the builder itself does in classic mode.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    existing = SparkSession._instantiatedSession
    if existing is not None and existing._sc._jsc is not None:
        return existing
    with _local_beside_connect():
        return SparkSession(SparkContext.getOrCreate(conf))


@contextmanager
def _local_beside_connect() -> Iterator[None]:
    """Let a SparkContext start in a process that PySpark has marked as a Spark Connect client.

    PySpark refuses that unless ``SPARK_LOCAL_REMOTE`` is set, the mark of its own local Connect
    mode, which also runs a classic driver beside a Connect client. The mark is held only while the
    context starts: a Connect session stopped while it is set would stop the classic session too.
    """
    if "SPARK_CONNECT_MODE_ENABLED" not in os.environ or "SPARK_LOCAL_REMOTE" in os.environ:
        yield
        return
    os.environ["SPARK_LOCAL_REMOTE"] = "1"
    try:
        yield
    finally:
        os.environ.pop("SPARK_LOCAL_REMOTE", None)


def _create_connect_session(settings: SparkSettings) -> SparkSession:
    """A Spark Connect client session on the server ``settings.master`` names.

    The server owns its driver and executors, so of odfproj's settings only the SQL ones (time zone,
    ANSI, Parquet timestamps, ``runSQLOnFiles``...) are set, on the session; JVM, log and UI settings
    are the server's. PySpark's functions module picks the Connect implementation only when the
    process is marked as Connect (``SPARK_CONNECT_MODE_ENABLED``), which PySpark's builder does too.
    """
    remote = _connect_session_class()
    _check_reachable(settings.master)
    try:
        session = remote.builder.remote(settings.master.strip()).create()
        apply_sql_conf(session, settings.effective_conf())
    except Exception as e:  # nothing listens there, TLS mismatch, a refused setting
        raise EngineError(f"could not reach Spark Connect at {settings.master}: {_first_line(e)}") from None
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # only once connected: a failed try leaves no mark
    _quiet_python_loggers(settings.verbose)
    return session


#: How long to wait for a Spark Connect server to accept a connection before saying it is not there.
CONNECT_PROBE_TIMEOUT_S = 10.0


def _check_reachable(master: str) -> None:
    """A one-line error at once when nothing accepts connections at ``master``'s host and port.

    PySpark's Connect client retries an unavailable server with backoff for many minutes before it
    gives up; a plain TCP connection answers the common mistakes (no server, wrong port) in seconds.
    """
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(master.strip().split("/;", 1)[0].replace(CONNECT_SCHEME, "http://", 1))
    host, port = address.hostname or "localhost", address.port or 15002  # Spark Connect's default port
    try:
        socket.create_connection((host, port), timeout=CONNECT_PROBE_TIMEOUT_S).close()
    except OSError as e:
        raise EngineError(
            f"could not reach Spark Connect at {master.strip()}: {e.strerror or e} "
            "(is the server running? see docs/guide/cluster.md)"
        ) from None


def connect_client_problem() -> str | None:
    """Why this installation cannot be a Spark Connect client (what to install), or ``None``.

    Nothing is started and the Connect client is not imported.
    """
    import importlib.util

    import pyspark as installed

    pyspark = installed.__version__
    version = tuple(int(part) for part in re.findall(r"\d+", pyspark)[:2])
    if version < CONNECT_MIN_PYSPARK:
        return (
            f"a Spark Connect target (sc://) needs pyspark {'.'.join(map(str, CONNECT_MIN_PYSPARK))} or "
            f"newer (installed: {pyspark}): pip install 'odfproj[connect]'"
        )
    missing = [name for name in CONNECT_MODULES if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        return (
            f"a Spark Connect target (sc://) needs the Connect client's packages ({', '.join(missing)} "
            "missing): pip install 'odfproj[connect]'"
        )
    return None


def _connect_session_class() -> Any:
    """PySpark's Connect ``SparkSession`` class, or a one-line error saying what to install."""
    problem = connect_client_problem()
    if problem is not None:
        raise EngineError(problem)
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession


#: The prefix of odfproj's own marks on a session (``engine.s3a.IN_PLACE_CONF``, ``engine.exchange.
#: EXCHANGE_CONF``): settings odfproj reads back, never Spark, which a project cannot set.
OWN_CONF_PREFIX = "spark.odfproj."


def apply_sql_conf(session: SparkSession, conf: Mapping[str, str]) -> None:
    """Set the session-level SQL settings of ``conf``, and odfproj's own marks, on ``session``; the others
    belong to its JVM.

    A Connect session starts from its server's defaults, and so does each of its child sessions,
    which is why query scopes call this as well. Spark registers no ``spark.odfproj.*`` key, so it
    calls them unmodifiable; they are set all the same (any unregistered key may be).
    """
    for key, value in conf.items():
        if key.startswith(OWN_CONF_PREFIX) or (
            key.startswith("spark.sql.") and session.conf.isModifiable(key)
        ):
            session.conf.set(key, value)


@contextmanager
def _noting_interrupts() -> Iterator[threading.Event]:
    """Notice a Ctrl-C while the session starts, so that it is reported as an interrupt and nothing else.

    A KeyboardInterrupt inside PySpark's start-up makes it stop the half-made context, which fails
    in turn: py4j logs connection tracebacks and the error that reaches us looks like a missing
    Java. The handler installed here records the interrupt and silences py4j's logger, then does
    what the handler it replaced would have done (a command's graceful handler just notes a first
    Ctrl-C and the start goes on). The previous handler is put back afterwards, which also undoes
    the SIGINT handler PySpark installs when a context starts on the main thread, so that a
    command's own interrupt handling stays in charge. Only the main thread can handle signals.
    """
    seen = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous = signal.getsignal(signal.SIGINT)

    def handle(signum: int, frame: FrameType | None) -> None:
        seen.set()
        logging.getLogger("py4j").disabled = True
        _pass_on(previous, signum, frame)

    signal.signal(signal.SIGINT, handle)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _pass_on(handler: Any, signum: int, frame: FrameType | None) -> None:
    """Do what ``handler`` (as ``signal.getsignal`` returned it) does with a SIGINT."""
    if callable(handler):
        handler(signum, frame)
    elif handler != signal.SIG_IGN:
        raise KeyboardInterrupt


@contextmanager
def _deferring_interrupts() -> Iterator[list[FrameType | None]]:
    """Hold a Ctrl-C back while PySpark launches the JVM; hand it on once the launch returned.

    Interrupted inside ``launch_gateway``, PySpark deletes the folder where the JVM is about to write
    its connection details; the JVM's main thread then fails while py4j's server thread keeps it
    alive: an orphan JVM for ever. So presses are counted, not acted upon, until the launch is over
    (a few seconds); then each is passed to the handler in place before (with Python's default, the
    first raises KeyboardInterrupt and the JVM, now waiting on its stdin, exits with this process).
    """
    pressed: list[FrameType | None] = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return
    previous = signal.getsignal(signal.SIGINT)

    def hold(signum: int, frame: FrameType | None) -> None:
        if not pressed:
            with suppress(OSError, ValueError, RuntimeError):
                sys.stderr.write("interrupted while the JVM starts: acted upon once it is up\n")
        pressed.append(frame)

    signal.signal(signal.SIGINT, hold)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)
    for frame in pressed:
        _pass_on(previous, signal.SIGINT, frame)


#: What the JVM prints on stderr at every start whatever the log configuration: the module system's
#: note on the vector API Spark enables, and the shell's announcement of its default log level; and,
#: at the S3A connector's first use, SLF4J's three lines on the AWS SDK finding no logger binding.
_STARTUP_NOISE = (
    "WARNING: Using incubator modules:",
    'Setting default log level to "',
    "To adjust logging level use sc.setLogLevel(",
    "SLF4J: ",
)


def _launch_quiet_gateway(conf: SparkConf, verbose: bool, *, long_lived: bool = False) -> None:
    """Start the JVM with its stderr piped through a filter that drops the start-up noise.

    PySpark starts the JVM with stderr inherited, so those lines would reach the user's terminal on
    every command that touches data. Launching the gateway ourselves (PySpark's documented
    ``popen_kwargs`` hook) lets a daemon thread forward every other line unchanged, so real JVM
    messages (out of memory, a crash) are still shown. Nothing happens when a JVM is already running.
    The JVM maps the class-data archive of ``engine.class_data``, or writes it at exit when there is none.
    """
    import subprocess

    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    from odfproj.engine import class_data

    if SparkContext._gateway is not None:  # PySpark's own record of its JVM
        return
    sharing = class_data.for_driver(dict(conf.getAll()), may_write=not long_lived)
    if sharing.options:
        options = conf.get("spark.driver.extraJavaOptions") or ""
        conf.set("spark.driver.extraJavaOptions", " ".join((options, *sharing.options)).strip())
    with _deferring_interrupts():
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    if sharing.writes is not None:
        system = gateway.jvm.java.lang.System
        sharing.started(gateway.proc.pid, system.getProperty("java.class.path"), _java_of(system))
    threading.Thread(
        target=_forward_stderr, args=(gateway.proc.stderr, verbose), daemon=True, name="jvm-stderr"
    ).start()
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


#: A line that log4j writes with odfproj's pattern (resources/spark/log4j2.properties).
_LOG4J_RECORD = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")

#: Lines that continue a log4j record: a stack trace and its causes.
_CONTINUATION = re.compile(r"^(\s|Caused by: |Suppressed: |\.\.\. )")

#: The exception a record carries, on the line right after the record's message.
_THROWABLE = re.compile(r"^[\w.$]+(Exception|Error|Throwable)\b")

#: Where Spark's own log records go: the run's log file (run/runlog.py listens on "odfproj"), and the
#: console only with -v. The NullHandler keeps Python's last-resort handler from printing them.
SPARK_LOGGER = logging.getLogger("odfproj.spark")
SPARK_LOGGER.addHandler(logging.NullHandler())

_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING}


#: How long a log record may wait for more stack-trace lines before it is written to the log.
_RECORD_IDLE_S = 0.25


def _lines(stream: IO[bytes], idle: float) -> Iterator[bytes | None]:
    """The lines of ``stream`` as they come, and ``None`` whenever none came for ``idle`` seconds."""
    fd = stream.fileno()
    pending = b""
    while True:
        if not select.select([fd], [], [], idle)[0]:
            yield None
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if pending:
                yield pending
            return
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            yield line + b"\n"


def _forward_stderr(stream: IO[bytes], verbose: bool) -> None:
    """Route the JVM's stderr: log4j records to ``SPARK_LOGGER``, every other line to our stderr.

    Spark logs at WARN, so its warnings (and the stack traces of errors that reach the user as one
    line) are kept in the run's log file rather than lost; on the console they would bury odfproj's
    own output, so they are shown there only with -v. Lines that are not log records (a JVM crash,
    an out-of-memory message) are copied unchanged, and the start-up noise is dropped unless verbose.
    A record is written once its stack trace is complete, or after a short pause, so that the last
    warning of a run is in the run's log before the run closes it.
    """
    out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
    record: list[str] = []
    in_record = False
    level = logging.WARNING

    def flush_record() -> None:
        if record:
            SPARK_LOGGER.log(level, "%s", "".join(record).rstrip("\n"))
            record.clear()

    for raw in _lines(stream, _RECORD_IDLE_S):
        if raw is None:
            flush_record()
            continue
        line = raw.decode("utf-8", "replace")
        start = _LOG4J_RECORD.match(line)
        continues = in_record and (_CONTINUATION.match(line) or (len(record) == 1 and _THROWABLE.match(line)))
        if start or continues:
            if start:
                flush_record()
                level = _LEVELS.get(start.group(1), logging.ERROR)
            in_record = True
            record.append(line)
            if not verbose:
                continue
        else:
            flush_record()
            in_record = False
            if not verbose and line.startswith(_STARTUP_NOISE):
                continue
        try:
            if out is not None:
                out.write(raw)
                out.flush()
            else:
                sys.stderr.write(line)
        except (OSError, ValueError):  # stderr closed at exit: keep draining so the JVM never blocks
            out = None
    flush_record()


#: PySpark 4 loggers that print a JSON traceback for every analysis error, before raising it.
_NOISY_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _quiet_python_loggers(verbose: bool) -> None:
    import logging

    from pyspark.logger import PySparkLogger

    for name in _NOISY_LOGGERS:
        # Created through PySparkLogger so that its keyword-taking methods keep working.
        PySparkLogger.getLogger(name).setLevel(logging.WARNING if verbose else logging.CRITICAL)


#: What to release when a Connect session's holder stops, by the session's ``id``: child sessions,
#: global views (see :func:`child_session`, :func:`keep_until_stop`).
_CONNECT_LEFTOVERS: dict[int, list[Callable[[], object]]] = {}
_LEFTOVERS_LOCK = threading.Lock()


def is_connect_session(session: SparkSession) -> bool:
    """Whether ``session`` is a Spark Connect client rather than a classic (py4j) session."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def keep_until_stop(parent: SparkSession, release: Callable[[], object]) -> None:
    """Call ``release`` when the holder of the Connect session ``parent`` stops (errors are ignored).

    A Connect DataFrame resolves the views it reads only when it runs, so the views and sessions
    behind it must outlive the operation that made them.
    """
    with _LEFTOVERS_LOCK:
        _CONNECT_LEFTOVERS.setdefault(id(parent), []).append(release)


def child_session(parent: SparkSession) -> SparkSession:
    """A new session of ``parent``'s driver with its own temporary views and SQL settings.

    A Connect child is a client of its own; it lives until the holder of ``parent`` stops, which
    releases it on the server (a client left to the garbage collector can hang the process at exit).
    """
    child = parent.newSession()
    if is_connect_session(parent):
        keep_until_stop(parent, child.stop)
    return child


def _release_leftovers(parent: SparkSession) -> None:
    with _LEFTOVERS_LOCK:
        releases = _CONNECT_LEFTOVERS.pop(id(parent), [])
    for release in reversed(releases):
        with suppress(Exception):  # best effort: the server may be gone already
            release()


class SparkSessionHolder:
    """Creates the session on first use only; thread-safe, so worker threads can share it.

    ``session`` adopts one made already (the warm engine's server hands its own to the checks it runs).
    """

    def __init__(self, settings: SparkSettings, session: SparkSession | None = None) -> None:
        self.settings = settings
        self._session: SparkSession | None = session
        self._lock = threading.Lock()
        self._work_bytes: Callable[[], int] | None = None

    @property
    def created(self) -> bool:
        return self._session is not None

    def size_work_by(self, work_bytes: Callable[[], int]) -> None:
        """How to tell, when the JVM starts, how many bytes of input the command will give it to read.

        Asked once, at the start, and only for a driver of this command's own on a ``local`` master
        (whose JIT the tasks run on): from :data:`LARGE_WORK_BYTES` on it gets the long-lived driver's
        JIT (:func:`driver_jit_options`). Asking at the start rather than now lets a run that never
        needs Spark skip the estimate, and lets the estimate see the files as the first step finds them.
        """
        self._work_bytes = work_bytes

    def settings_to_start(self) -> SparkSettings:
        """The settings the JVM starts with: :attr:`settings`, sized by :meth:`size_work_by`'s estimate."""
        settings = self.settings
        if self._work_bytes is None or not settings.is_local or settings.long_lived or settings.large_work:
            return settings
        if self._work_bytes() < LARGE_WORK_BYTES:
            return settings
        return replace(settings, large_work=True)

    def get(self) -> SparkSession:
        with self._lock:
            if self._session is None:
                self.settings = self.settings_to_start()
                self._session = create_spark_session(self.settings)
            return self._session

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                _release_leftovers(self._session)
                self._session.stop()
                self._session = None


def _log_options() -> str:
    """JVM options pointing log4j2 at odfproj's configuration: WARN, to stderr, which _forward_stderr routes."""
    from importlib import resources

    config = resources.files("odfproj") / "resources" / "spark" / "log4j2.properties"
    return f"-Dlog4j2.configurationFile=file:{config}"


def _java_of(system: Any) -> str:
    """The ``java`` executable of the running JVM whose ``java.lang.System`` is ``system``."""
    return os.path.join(system.getProperty("java.home"), "bin", "java")


def _python() -> str:
    import sys

    return sys.executable


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
