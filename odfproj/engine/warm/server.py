"""What runs inside the warm engine's server process: its JVM, its endpoints, its requests, its idle stop.

:func:`serve_main` is what :meth:`~.lifecycle.WarmEngine._start` runs (``python -m ENTRY serve DIR IDLE``);
the entry module passes the handlers of the requests it answers. Each request runs on a thread of its
own with the server's classic session; a failure is the caller's answer, never the server's end.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any

from odfproj.engine.session import (
    SparkSessionHolder,
    SparkSettings,
)
from odfproj.engine.warm.lifecycle import claim_when_idle
from odfproj.engine.warm.protocol import (
    ABORT,
    CONNECT_CLIENT_MARKS,
    CONNECT_TOKEN_ENV,
    INTERRUPT,
    SOCKET_FILE,
    STATE_FILE,
    TOKEN_ENV,
    ServerInfo,
    last_line_of,
    receive,
    send,
)
from odfproj.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: The JVM-level settings of the server's one SparkContext: odfproj's base settings, loopback only,
#: the analysis sandbox's in-memory catalog, and the Connect plugin on an ephemeral loopback port.
SERVER_CONF: Mapping[str, str] = MappingProxyType(
    {
        "spark.sql.catalogImplementation": "in-memory",
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",
    }
)


#: How often the server looks at the clock, the locks and its JVM.
TICK_S = 1.0


#: A request the server answers: called with the server's classic session and the request's arguments.
Handler = Callable[..., Any]


#: A streaming request: called as ``handler(session, channel, *args)`` (see :class:`Channel`).
StreamHandler = Callable[..., Any]


class Channel:
    """The server's end of one streaming request: messages out, the caller's interrupts in.

    ``stop`` is set by :data:`STOP`, ``stop`` and ``abort`` by :data:`ABORT` or by the caller going
    away (its connection closed: a killed command), so that a request nobody waits for ends at once.
    """

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._done = False
        self.stop = threading.Event()
        self.abort = threading.Event()

    def send(self, message: object) -> None:
        """Send a message to the caller (from any thread); a caller gone away is not an error here."""
        with self._lock:
            if self._done:
                return
            with contextlib.suppress(OSError):
                send(self._conn, (None, message))

    def finish(self, result: tuple[bool, Any]) -> None:
        with self._lock:
            self._done = True
            send_answer(self._conn, result)

    def listen(self) -> None:
        """Read the caller's interrupts until its connection closes (then: abort, unless finished)."""
        while True:
            try:
                kind, level = receive(self._conn)
            except (OSError, EOFError, pickle.UnpicklingError, TypeError, ValueError):
                with self._lock:
                    if self._done:
                        return
                self.stop.set()
                self.abort.set()
                return
            if kind == INTERRUPT:
                self.stop.set()
                if level >= ABORT:
                    self.abort.set()


def send_answer(conn: socket.socket, result: tuple[bool, Any]) -> None:
    """Send a request's last answer, ``(ok, value)``, so that the caller can read it.

    An exception crosses as itself when it can be rebuilt from its pickle (every ``OdfprojError`` can:
    see :class:`odfproj.errors.OdfprojError`); one that cannot (a library's exception whose constructor
    wants more than its message, one holding a Java object) crosses as a one-line ``EngineError`` with
    its type and first line, which is all the caller could have shown of it. Both ends are the same
    installation, so what rebuilds here rebuilds there. A caller gone away is not an error here.
    """
    ok, value = result
    if not ok and not _rebuilds(value):
        result = (False, EngineError(_one_line(value)))
    try:
        send(conn, result)
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as e:  # a result that cannot cross
        with contextlib.suppress(OSError):
            send(conn, (False, EngineError(f"the warm engine's answer could not be sent: {_one_line(e)}")))


def _rebuilds(error: object) -> bool:
    """Whether ``error``'s pickle gives back an error of its class saying the same."""
    try:
        again = pickle.loads(pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        return False
    return type(again) is type(error) and str(again) == str(error)


def _one_line(error: object) -> str:
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def server_settings() -> SparkSettings:
    """The server's one SparkContext: local, odfproj's base settings and :data:`SERVER_CONF`, a long-lived driver."""
    return SparkSettings(master="local[*]", app_name="odfproj-warm", conf=SERVER_CONF, long_lived=True)


def connect_port(session: SparkSession) -> int:
    """The port the Connect plugin bound (ephemeral: ``spark.connect.grpc.binding.port=0``)."""
    service = getattr(
        getattr(session._jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"), "MODULE$"
    )
    return int(service.localPort())


#: What a Connect client does once before the server is announced (``python -c``, URL and folder as
#: arguments): the first query of a fresh JVM loads and compiles much of Spark (Connect's planner,
#: Parquet, Arrow, code generation), which took longer than the JVM's start on a loaded machine.
_WARM_UP = """
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from odfproj.engine.session import SparkSettings, create_spark_session
session = create_spark_session(SparkSettings(sys.argv[1]))
folder = Path(sys.argv[2])
pq.write_table(pa.table({"k": ["a", "b", "a"], "v": [1, 2, 3]}), folder / "warm-up.parquet")
frame = session.read.parquet(str(folder / "warm-up.parquet"))
frame.createOrReplaceTempView("t")
child = session.newSession()
frame.createOrReplaceGlobalTempView("warm_up")
child.sql("SELECT k, count(*) AS n, sum(v) AS s FROM global_temp.warm_up GROUP BY k ORDER BY k").toArrow()
session.sql("SELECT * FROM t WHERE v > 1").write.mode("overwrite").parquet(str(folder / "warm-up-out"))
session.catalog.dropGlobalTempView("warm_up")
child.stop()
session.stop()
"""


#: How long the warm-up may take before the server is announced anyway.
WARM_UP_TIMEOUT_S = 300.0


def _warm_up(port: int, token: str, directory: Path) -> None:
    """Run :data:`_WARM_UP` against this server; a failure is logged, the server still starts."""
    import shutil

    scratch = directory / "warm-up"
    scratch.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in CONNECT_CLIENT_MARKS}
    env[CONNECT_TOKEN_ENV] = token
    began = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _WARM_UP, f"sc://localhost:{port}", str(scratch)],
            env=env,
            capture_output=True,
            text=True,
            timeout=WARM_UP_TIMEOUT_S,
            check=False,
        )
        outcome = "done" if done.returncode == 0 else f"failed: {last_line_of(done.stderr)}"
    except subprocess.TimeoutExpired:
        outcome = "timed out"
    shutil.rmtree(scratch, ignore_errors=True)
    _say(f"warm-up {outcome} in {time.monotonic() - began:.1f} s")


def serve(
    directory: Path,
    idle: float,
    handlers: Mapping[str, Handler],
    warm_up: Callable[[SparkSession], object] | None = None,
    streams: Mapping[str, StreamHandler] | None = None,
) -> int:
    """Run a server in this process until it is idle for ``idle`` seconds, told to stop, or its JVM dies.

    Each handler is called as ``handler(session, *args)`` on a thread of its own, with the server's
    classic session; a streaming one (``streams``) as ``handler(session, channel, *args)``, see
    :func:`stream`. Before the record is written, a Connect client runs a few queries (and
    ``warm_up(session)`` whatever the checks need), so that the first command finds a warm JVM. The
    record is written last, once the JVM and both endpoints are up, and removed first when stopping,
    so a command never finds a record of a server that is not ready.
    """
    directory = Path(directory)
    token = os.environ.pop(TOKEN_ENV, "") or secrets.token_hex(24)
    os.environ[CONNECT_TOKEN_ENV] = (
        token  # the Connect plugin's JVM reads it: unauthenticated calls are refused
    )
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    holder = SparkSessionHolder(server_settings())
    session = holder.get()
    port = connect_port(session)
    sock_path = directory / SOCKET_FILE
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    os.chmod(sock_path, 0o600)
    listener.listen(16)
    listener.settimeout(TICK_S)
    _warm_up(port, token, directory)
    if warm_up is not None:
        try:
            warm_up(session)
        except Exception as e:  # a warm-up is an optimisation: the server serves anyway
            _say(f"warm-up of the checks failed: {type(e).__name__}: {last_line_of(str(e))}")
    info = ServerInfo(os.getpid(), port, token, str(sock_path), time.time(), idle)
    _write_atomically(directory / STATE_FILE, info.to_json())
    _say(f"ready: Connect on 127.0.0.1:{port}, checks on {sock_path}, idle timeout {idle:.0f} s")
    requests = {"ping": lambda _session: "pong", **handlers}
    streaming = dict(streams or {})

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                op, args = receive(conn)
                if op == "stop":
                    stopping.set()
                    send(conn, (True, None))
                    return
                if op in streaming:
                    _answer_stream(conn, streaming[op], session, args)
                    return
                handler = requests.get(op)
                if handler is None:
                    raise EngineError(
                        f"the warm engine does not know the request {op!r}: another odfproj version "
                        "started it (odfproj engine stop; the next command starts a current one)"
                    )
                result: tuple[bool, Any] = (True, handler(session, *args))
            except Exception as e:  # every failure is the caller's answer
                result = (False, e)
            send_answer(conn, result)

    reason = "stopped"
    try:
        while not stopping.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                conn = None
            except OSError:
                if stopping.is_set():
                    break
                raise
            if conn is not None:
                conn.settimeout(None)
                threading.Thread(target=answer, args=(conn,), daemon=True, name="warm-request").start()
                continue
            if session._sc._jsc is None:
                reason = "its JVM ended"
                break
            held = claim_when_idle(directory, info, idle)
            if held is not None:  # kept open (the locks held) until this process exits
                _HELD.extend(held)
                reason = f"idle for {idle:.0f} s"
                break
    finally:
        with contextlib.suppress(FileNotFoundError):
            (directory / STATE_FILE).unlink()
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        listener.close()
        _say(f"stopping: {reason}")
        with contextlib.suppress(Exception):
            holder.stop()
    return 0


def _answer_stream(conn: socket.socket, handler: StreamHandler, session: SparkSession, args: Any) -> None:
    """One streaming request: the caller's interrupts are read beside the handler, which sends its
    messages through the channel; its result (or exception) is the last frame."""
    channel = Channel(conn)
    threading.Thread(target=channel.listen, daemon=True, name="warm-listen").start()
    try:
        result: tuple[bool, Any] = (True, handler(session, channel, *args))
    except Exception as e:  # every failure is the caller's answer
        result = (False, e)
    channel.finish(result)


#: The locks the stopping server keeps until it exits.
_HELD: list[IO[bytes]] = []


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(temporary, path)


def _say(message: str) -> None:
    sys.stdout.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {message}\n")
    sys.stdout.flush()


def serve_main(
    argv: list[str],
    handlers: Mapping[str, Handler],
    warm_up: Callable[[SparkSession], object] | None = None,
    streams: Mapping[str, StreamHandler] | None = None,
) -> int:
    """``python -m ENTRY serve DIR IDLE``: what :meth:`WarmEngine._start` runs."""
    if len(argv) != 3 or argv[0] != "serve":
        sys.stderr.write("usage: python -m ENTRY serve DIR IDLE_SECONDS\n")
        return 2
    return serve(Path(argv[1]), float(argv[2]), handlers, warm_up, streams)
