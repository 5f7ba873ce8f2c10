"""A warm local engine: one Spark JVM kept running between commands, reached over Spark Connect.

Starting a JVM costs most of the time of a small command (``sql`` over three rows, a plan with one
changed query). With the warm engine, the first command that needs Spark starts a *server process*
(:func:`serve`, a detached Python process holding one classic local SparkSession) and every later
command reuses it, until it has been idle for a while. The server offers two things, both bound to
this machine only:

- a **Spark Connect** endpoint on ``127.0.0.1`` (an ephemeral port, a random bearer token), for the
  trusted work of ``ingest`` and ``test``;
- a **Unix socket** (in a folder only this user may enter) on which it answers requests it runs itself
  on its classic session, exactly as a cold command would in its own JVM: the *checks* (the query
  analysis of ``plan`` and the sandbox check every Connect query passes first), each in a child
  session with the analysis sandbox's settings (``engine.settings.analysis_settings``), so nothing a
  manifest names runs; ``sql`` whole; and ``run`` whole, as a *streaming* request (:func:`stream`): the
  server sends messages (the run's events) while it works, and the caller sends interrupts back (a
  first Ctrl-C, a second, or its going away). Results are the same by construction.

Which request the socket answers is the caller's choice (:func:`serve` takes the handlers); the
messages are pickled, which is sound because only this user can reach the socket, and both ends are
the same installation (the folder is per Python environment and PySpark version, see
:func:`engine_dir`).

Life cycle, all in :class:`WarmEngine`:

- ``start.lock`` (an exclusive ``flock``) is held while a command looks for the server and, if none is
  alive, starts one and waits until it is ready; so two commands never start two servers.
- ``use.lock`` is held *shared* by every command using the server, for as long as it does; the server
  stops itself only when it can take it *exclusively* (no command is using it) and nothing touched
  ``used`` for the idle timeout. Locks die with their process, so a killed command never keeps the
  server up, and Ctrl-C needs no clean-up.
- ``server.json`` says where it is (pid, port, token, socket), written atomically once it is ready. A
  file whose process is gone, or that does not answer, is stale: it is removed (and the process group
  ended, once its command line proves it is ours) before a new server starts.
- The JVM is a child of the server process, which PySpark's gateway ends when its parent dies.

``CI`` set turns it off unless asked for; ``ODFPROJ_WARM_ENGINE`` or ``--warm``/``--cold`` decide.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pickle
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any

from odfproj.engine.session import (
    SparkSessionHolder,
    SparkSettings,
    is_connect,
)
from odfproj.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: ``on``/``off``: use the warm engine or not (default: on, except where ``CI`` is set).
SWITCH_ENV = "ODFPROJ_WARM_ENGINE"
#: Seconds the server stays up with no command using it (default :data:`DEFAULT_IDLE_S`).
IDLE_ENV = "ODFPROJ_WARM_IDLE"
#: Where the server's files are (default: under the user's cache folder, see :func:`engine_dir`).
DIR_ENV = "ODFPROJ_ENGINE_DIR"
#: How the server process receives its Connect token (never on its command line, which ``ps`` shows).
_TOKEN_ENV = "ODFPROJ_WARM_TOKEN"
#: The variable PySpark's Connect client and server read the bearer token from.
CONNECT_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"

DEFAULT_IDLE_S = 900.0
#: How long a command waits for a server to start (a JVM start on a loaded machine is slow).
START_TIMEOUT_S = 300.0
#: How long a command waits for a live server's answer before calling it stale.
PING_TIMEOUT_S = 10.0
#: How often the server looks at the clock, the locks and its JVM.
TICK_S = 1.0

STATE_FILE = "server.json"
START_LOCK = "start.lock"
USE_LOCK = "use.lock"
USED_STAMP = "used"
LOG_FILE = "server.log"
SOCKET_FILE = "rpc.sock"

_ON = frozenset({"1", "on", "true", "yes"})
_OFF = frozenset({"0", "off", "false", "no"})

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


# --- whether to use it ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WarmChoice:
    """Whether commands use the warm engine, and what decided it (shown by ``odfproj engine status``)."""

    enabled: bool
    reason: str


def warm_choice(flag: bool | None = None, environ: Mapping[str, str] | None = None) -> WarmChoice:
    """``--warm``/``--cold`` first, then ``ODFPROJ_WARM_ENGINE``, then off where ``CI`` is set, else on."""
    env = os.environ if environ is None else environ
    if flag is not None:
        return WarmChoice(flag, "--warm" if flag else "--cold")
    value = env.get(SWITCH_ENV, "").strip().lower()
    if value in _ON:
        return WarmChoice(True, f"{SWITCH_ENV}={value}")
    if value in _OFF:
        return WarmChoice(False, f"{SWITCH_ENV}={value}")
    if value:
        raise EngineError(f"{SWITCH_ENV}={env[SWITCH_ENV]!r}: expected on or off")
    if env.get("CI", "").strip():
        return WarmChoice(False, "CI is set (ask with --warm or ODFPROJ_WARM_ENGINE=on)")
    return WarmChoice(True, "the default")


def idle_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds of disuse after which the server stops: ``ODFPROJ_WARM_IDLE``, else 15 minutes."""
    env = os.environ if environ is None else environ
    text = env.get(IDLE_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise EngineError(f"{IDLE_ENV}={text!r}: expected a positive number of seconds")
    return value


def engine_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The server's folder: ``ODFPROJ_ENGINE_DIR``, else one per Python environment, PySpark and odfproj
    version under the user's cache folder, so that a server is only ever reused by the installation that
    made it (an upgrade starts a new one; the old one stops when idle)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    env = os.environ if environ is None else environ
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV]).expanduser()
    try:
        pyspark = version("pyspark")
    except PackageNotFoundError:  # pragma: no cover - pyspark is a dependency
        pyspark = "none"
    from odfproj import __version__

    key = hashlib.sha256(f"{sys.prefix}\0{pyspark}\0{__version__}".encode()).hexdigest()[:12]
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "odfproj" / "engine" / key


def warm_eligible(settings: SparkSettings) -> bool:
    """Whether a target can run on the warm engine (see :func:`warm_refusal`)."""
    return warm_refusal(settings) is None


def warm_refusal(settings: SparkSettings) -> str | None:
    """Why a target cannot run on the warm engine, or ``None``: it needs a local master, and no setting
    the server's JVM could not honour (a ``spark_conf`` key outside ``spark.sql.*``, such as driver
    memory, asks for a JVM of its own, so such a target runs cold)."""
    master = settings.master.strip()
    if is_connect(master) or not master.startswith("local"):
        return f"the target's master {master} is not local"
    jvm = sorted(key for key in settings.conf if not key.startswith("spark.sql."))
    if jvm:
        return f"the target's spark_conf sets {', '.join(jvm)}, which needs a JVM of its own"
    return None


def session_refusal(session: SparkSession, settings: SparkSettings) -> str | None:
    """In the server: why its session cannot take the target's SQL settings, or ``None``.

    A run's child session gets every ``spark.sql.*`` setting of the target; a *static* one (fixed when
    the JVM started) can only be honoured if the server already has that value.
    """
    fixed = sorted(
        key
        for key, value in settings.conf.items()
        if key.startswith("spark.sql.")
        and not session.conf.isModifiable(key)
        and session.conf.get(key, None) != str(value)
    )
    if fixed:
        return (
            f"the target's spark_conf sets {', '.join(fixed)}, which the warm engine's session cannot "
            "change (static settings)"
        )
    return None


# --- the server's record ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerInfo:
    """What ``server.json`` says of a running server."""

    pid: int
    port: int
    token: str
    socket: str
    started: float
    idle_timeout: float

    @property
    def url(self) -> str:
        """The Connect URL (``localhost``: PySpark then sends the token over a local channel, no TLS)."""
        return f"sc://localhost:{self.port}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> ServerInfo:
        data = json.loads(text)
        return ServerInfo(
            pid=int(data["pid"]),
            port=int(data["port"]),
            token=str(data["token"]),
            socket=str(data["socket"]),
            started=float(data["started"]),
            idle_timeout=float(data["idle_timeout"]),
        )


@dataclass(frozen=True)
class ServerStatus:
    """A live server as ``odfproj engine status`` shows it."""

    info: ServerInfo
    directory: Path
    in_use: bool
    idle_for: float


# --- the client's side ------------------------------------------------------------------------------------


class WarmEngine:
    """Finds, starts, leases and stops the server of ``directory``.

    ``entry`` is the module the server process runs (``python -m ENTRY serve DIR IDLE``): the layer that
    knows every check the server must answer assembles its handlers there.
    """

    def __init__(self, directory: Path, *, entry: str, idle: float = DEFAULT_IDLE_S) -> None:
        self.directory = Path(directory)
        self.entry = entry
        self.idle = idle

    def _path(self, name: str) -> Path:
        return self.directory / name

    def _prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)  # the token and the socket are this user's only

    # -- looking --

    @contextlib.contextmanager
    def _recorded(self) -> Iterator[ServerInfo | None]:
        """The live server, or ``None`` (a stale record is cleaned up on the way), with ``start.lock``
        held for the block: no command starts or finds a server meanwhile."""
        if not self._path(STATE_FILE).exists():
            yield None
            return
        self._prepare()
        with _locked(self._path(START_LOCK), exclusive=True, timeout=START_TIMEOUT_S):
            yield self._live()

    def status(self) -> ServerStatus | None:
        """The live server, or ``None``."""
        with self._recorded() as info:
            pass
        if info is None:
            return None
        return ServerStatus(info, self.directory, self._in_use(), time.time() - self._last_used(info))

    def _in_use(self) -> bool:
        handle = _try_hold(self._path(USE_LOCK))
        if handle is None:
            return True
        handle.close()
        return False

    def _last_used(self, info: ServerInfo) -> float:
        with contextlib.suppress(OSError):
            return max(info.started, self._path(USED_STAMP).stat().st_mtime)
        return info.started

    def _read(self) -> ServerInfo | None:
        try:
            return ServerInfo.from_json(self._path(STATE_FILE).read_text())
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):  # half a file from a crash: stale
            return ServerInfo(0, 0, "", "", 0.0, 0.0)

    def _live(self) -> ServerInfo | None:
        """The recorded server if it answers; otherwise its files (and its process group) are removed.

        Called with ``start.lock`` held.
        """
        info = self._read()
        if info is None:
            return None
        if info.pid and _alive(info.pid):
            try:
                if call(info, "ping", timeout=PING_TIMEOUT_S) == "pong":
                    return info
            except (OSError, EngineError, EOFError, pickle.UnpicklingError):
                pass
            if _is_our_server(info.pid, self.entry):
                _end_group(info.pid)
        self._forget()
        return None

    def _forget(self) -> None:
        for name in (STATE_FILE, SOCKET_FILE):
            with contextlib.suppress(FileNotFoundError):
                self._path(name).unlink()

    # -- using --

    @contextlib.contextmanager
    def lease(self) -> Iterator[ServerInfo]:
        """The live server (started if there is none), kept up until the block ends."""
        self._prepare()
        with _locked(self._path(START_LOCK), exclusive=True, timeout=START_TIMEOUT_S):
            info = self._live() or self._start()
            use = _hold(self._path(USE_LOCK), exclusive=False)
        try:
            _touch(self._path(USED_STAMP))
            yield info
        finally:
            _touch(self._path(USED_STAMP))
            use.close()

    def _start(self) -> ServerInfo:
        """Start a server process and wait until its record appears; on any failure, end it."""
        self._forget()
        token = secrets.token_hex(24)
        env = {k: v for k, v in os.environ.items() if k not in _CONNECT_CLIENT_MARKS}
        env[_TOKEN_ENV] = token
        log = self._path(LOG_FILE)
        with log.open("ab") as out:
            out.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} starting\n".encode())
            out.flush()
            process = subprocess.Popen(
                [sys.executable, "-m", self.entry, "serve", str(self.directory), str(self.idle)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.directory,
                start_new_session=True,
            )
        try:
            info = self._wait_ready(process, log)
        except BaseException:  # a Ctrl-C too: a server nobody waits for is not left behind
            _end_group(process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
            self._forget()
            raise
        # Reaped when it ends, should this process (a test run, `watch`) still be there by then.
        threading.Thread(target=process.wait, daemon=True, name="warm-engine-reaper").start()
        return info

    def _wait_ready(self, process: subprocess.Popen[bytes], log: Path) -> ServerInfo:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            info = self._read()
            if info is not None and info.pid == process.pid:
                return info
            code = process.poll()
            if code is not None:
                raise EngineError(
                    f"the warm engine did not start (exit {code}): {_last_line(log)} (log: {log}; "
                    "--cold runs without it)"
                )
            time.sleep(0.1)
        raise EngineError(f"the warm engine did not start within {START_TIMEOUT_S:.0f} s (log: {log})")

    # -- stopping --

    def stop(self) -> ServerInfo | None:
        """Stop the server now (a command using it fails); ``None`` if none was running."""
        with self._recorded() as info:
            if info is None:
                return None
            with contextlib.suppress(OSError, EngineError, EOFError):
                call(info, "stop", timeout=PING_TIMEOUT_S)
            deadline = time.monotonic() + 30.0
            while _alive(info.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(info.pid) and _is_our_server(info.pid, self.entry):
                _end_group(info.pid)
            self._forget()
            return info


#: Marks PySpark leaves in a process that opened a Connect session; a server started from such a
#: process must start a classic context, so they are not passed on.
_CONNECT_CLIENT_MARKS = (
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_REMOTE",
    "SPARK_LOCAL_REMOTE",
    CONNECT_TOKEN_ENV,
)


@contextlib.contextmanager
def _locked(path: Path, *, exclusive: bool, timeout: float) -> Iterator[None]:
    handle = _hold(path, exclusive=exclusive, timeout=timeout)
    try:
        yield
    finally:
        handle.close()


def _hold(path: Path, *, exclusive: bool, timeout: float = START_TIMEOUT_S) -> IO[bytes]:
    """``path`` opened and ``flock``-ed; closing the handle (or the process ending) releases it."""
    handle = open(path, "a+b")  # noqa: SIM115 - the caller owns the handle: closing it releases the lock
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, mode)
            return handle
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                raise EngineError(f"the warm engine's lock {path} stayed busy for {timeout:.0f} s") from None
            time.sleep(0.05)


def _touch(path: Path) -> None:
    path.touch()
    os.utime(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process took the number
        return False
    return True


def _is_our_server(pid: int, entry: str) -> bool:
    """Whether ``pid`` runs ``python -m ENTRY serve``: a recycled pid is never signalled."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        text = [a.decode(errors="replace") for a in args]
    except OSError:
        try:
            text = subprocess.run(
                ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False
            ).stdout.split()
        except OSError:
            return False
    return entry in text and "serve" in text


def _end_group(pid: int) -> None:
    """SIGTERM to the server's process group (the server leads it), SIGKILL after a grace period."""
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.1)


def _last_line(log: Path) -> str:
    try:
        return _last_line_of(log.read_text(errors="replace"))
    except OSError:
        return "no output"


def _last_line_of(text: str) -> str:
    """The last line of ``text`` that names an error, else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower():
            return line
    return lines[-1] if lines else "no output"


# --- the socket's messages ---------------------------------------------------------------------------------

_HEADER = struct.Struct("!Q")


def _send(conn: socket.socket, value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    conn.sendall(_HEADER.pack(len(data)) + data)


def _receive(conn: socket.socket) -> Any:
    header = _exactly(conn, _HEADER.size)
    return pickle.loads(_exactly(conn, _HEADER.unpack(header)[0]))  # only this user can reach the socket


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = conn.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            raise EOFError("the warm engine closed the connection")
        chunks += chunk
    return bytes(chunks)


def _connect(conn: socket.socket, info: ServerInfo) -> None:
    """Connect to the server's socket; one line saying how to do without it when it does not answer."""
    try:
        conn.connect(info.socket)
    except OSError as e:
        raise EngineError(
            f"the warm engine does not answer ({e.strerror or e}); --cold runs without it"
        ) from None


def call(info: ServerInfo, op: str, *args: Any, timeout: float | None = None) -> Any:
    """Ask the server to run ``op(*args)``; its result, or the exception it raised, raised here.

    An exception that cannot cross (a class this side cannot rebuild) arrives as an ``EngineError``
    with its message.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        _connect(conn, info)
        _send(conn, (op, args))
        ok, value = _receive(conn)
    if ok:
        return value
    raise value


#: How long a caller waits for a request's last answer after asking it to stop at once (a second Ctrl-C).
ABORT_WAIT_S = 30.0
#: How often a streaming caller looks at its interrupt while no message arrives.
_POLL_S = 0.1
#: What a caller sends on a streaming request's connection to interrupt it: ``(INTERRUPT, level)``.
INTERRUPT = "interrupt"
#: Level 1: finish what is in progress and start nothing more (a first Ctrl-C).
STOP = 1
#: Level 2: stop at once (a second Ctrl-C, or the caller went away).
ABORT = 2


def stream(
    info: ServerInfo,
    op: str,
    *args: Any,
    on_message: Callable[[Any], object],
    cancel: threading.Event | None = None,
) -> Any:
    """Ask the server to run the streaming request ``op(*args)``: each message it sends while it runs is
    given to ``on_message`` (on this thread), and its result is returned, or its exception raised.

    ``cancel`` set (a first Ctrl-C) asks the request to :data:`STOP`; a ``KeyboardInterrupt`` here (a
    second one) asks it to :data:`ABORT`, shows the messages it still sends for up to
    :data:`ABORT_WAIT_S` seconds, and goes on up. A server that goes away meanwhile is a one-line
    ``EngineError``. Messages are read by a thread of their own, so that signals stay prompt here.
    """
    import queue

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _connect(conn, info)
        _send(conn, (op, args))
        frames: queue.Queue[tuple[bool | None, Any] | BaseException] = queue.Queue()
        threading.Thread(target=_read_frames, args=(conn, frames), daemon=True, name="warm-stream").start()
        sent = 0
        try:
            while True:
                if cancel is not None and cancel.is_set() and sent < STOP:
                    sent = STOP
                    _interrupt(conn, STOP)
                try:
                    frame = frames.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                done, value = _take(frame, on_message, info)
                if done:
                    return value
        except KeyboardInterrupt:
            _interrupt(conn, ABORT)
            deadline = time.monotonic() + ABORT_WAIT_S
            with contextlib.suppress(Exception):  # the last answer, or an error: the interrupt goes on
                while time.monotonic() < deadline:
                    if _take(frames.get(timeout=max(0.0, deadline - time.monotonic())), on_message, info)[0]:
                        break
            raise
    finally:
        conn.close()


def _read_frames(conn: socket.socket, frames: Any) -> None:
    """The streaming caller's reader: every frame until the last (``ok`` not ``None``), or the error."""
    while True:
        try:
            data = _exactly(conn, _HEADER.unpack(_exactly(conn, _HEADER.size))[0])
        except (OSError, EOFError) as e:
            frames.put(e)
            return
        try:
            frame = pickle.loads(data)  # only this user can reach the socket
        except Exception as e:  # an exception class this side cannot rebuild: its text, as a last answer
            frame = (False, EngineError(f"the warm engine's answer could not be read: {e}"))
        frames.put(frame)
        if frame[0] is not None:
            return


def _take(
    frame: tuple[bool | None, Any] | BaseException, on_message: Callable[[Any], object], info: ServerInfo
) -> tuple[bool, Any]:
    """``(True, result)`` for the last frame (its exception raised), ``(False, None)`` after a message."""
    if isinstance(frame, BaseException):
        log = Path(info.socket).parent / LOG_FILE
        raise EngineError(
            f"the warm engine went away during the command ({_last_line(log)}; log: {log}); every commit "
            "is atomic, so each dataset kept what it had committed: run it again (--cold runs without it)"
        )
    ok, value = frame
    if ok is None:
        on_message(value)
        return False, None
    if ok:
        return True, value
    raise value


def _interrupt(conn: socket.socket, level: int) -> None:
    with contextlib.suppress(OSError):
        _send(conn, (INTERRUPT, level))


# --- the server's side -------------------------------------------------------------------------------------

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
                _send(self._conn, (None, message))

    def finish(self, result: tuple[bool, Any]) -> None:
        with self._lock:
            self._done = True
            try:
                _send(self._conn, result)
            except (OSError, pickle.PicklingError, TypeError, AttributeError):
                with contextlib.suppress(OSError):
                    _send(self._conn, (False, EngineError(str(result[1]))))

    def listen(self) -> None:
        """Read the caller's interrupts until its connection closes (then: abort, unless finished)."""
        while True:
            try:
                kind, level = _receive(self._conn)
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


def server_settings() -> SparkSettings:
    """The server's one SparkContext: local, odfproj's base settings and :data:`SERVER_CONF`."""
    return SparkSettings(master="local[*]", app_name="odfproj-warm", conf=SERVER_CONF)


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
    env = {k: v for k, v in os.environ.items() if k not in _CONNECT_CLIENT_MARKS}
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
        outcome = "done" if done.returncode == 0 else f"failed: {_last_line_of(done.stderr)}"
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
    token = os.environ.pop(_TOKEN_ENV, "") or secrets.token_hex(24)
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
            _say(f"warm-up of the checks failed: {type(e).__name__}: {_last_line_of(str(e))}")
    info = ServerInfo(os.getpid(), port, token, str(sock_path), time.time(), idle)
    _write_atomically(directory / STATE_FILE, info.to_json())
    _say(f"ready: Connect on 127.0.0.1:{port}, checks on {sock_path}, idle timeout {idle:.0f} s")
    requests = {"ping": lambda _session: "pong", **handlers}
    streaming = dict(streams or {})

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                op, args = _receive(conn)
                if op == "stop":
                    stopping.set()
                    _send(conn, (True, None))
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
            try:
                _send(conn, result)
            except (OSError, pickle.PicklingError, TypeError, AttributeError):
                with contextlib.suppress(OSError):
                    _send(conn, (False, EngineError(str(result[1]))))

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
            if _idle_and_unused(directory, info, idle):
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


def _idle_and_unused(directory: Path, info: ServerInfo, idle: float) -> bool:
    """Whether nothing used the server for ``idle`` seconds and no command holds it now.

    ``start.lock`` is taken too (without waiting), so no command is between finding the record and
    leasing it; both locks stay held until this process exits, with the record already removed.
    """
    try:
        used = max(info.started, (directory / USED_STAMP).stat().st_mtime)
    except OSError:
        used = info.started
    if time.time() - used < idle:
        return False
    starting = _try_hold(directory / START_LOCK)
    if starting is None:
        return False
    using = _try_hold(directory / USE_LOCK)
    if using is None:
        starting.close()
        return False
    _HELD.extend((starting, using))
    return True


#: Locks the stopping server keeps until it exits.
_HELD: list[IO[bytes]] = []


def _try_hold(path: Path) -> IO[bytes] | None:
    handle = open(path, "a+b")  # noqa: SIM115 - kept open while the lock is held
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


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


# --- a session on it --------------------------------------------------------------------------------------


#: The master a warm holder shows before its server is known: a Connect target on this machine.
CONNECT_PLACEHOLDER = "sc://localhost"


class WarmSessionHolder(SparkSessionHolder):
    """A ``SparkSessionHolder`` whose session is a Connect client of the warm server.

    ``settings`` are the target's (its SQL settings are set on the session, as on any Connect target);
    the server is found or started, and leased, on the first :meth:`get`, and released by :meth:`stop`.
    Until then ``settings.master`` names the server without its port.
    """

    def __init__(self, settings: SparkSettings, engine: WarmEngine) -> None:
        super().__init__(
            SparkSettings(CONNECT_PLACEHOLDER, settings.app_name, settings.conf, settings.verbose)
        )
        self.target = settings
        """The target's own settings (its master is a local one), for requests the server runs itself."""
        self.engine = engine
        self._lease: contextlib.ExitStack | None = None
        self._info: ServerInfo | None = None

    def server(self) -> ServerInfo:
        """The leased server (found or started on first need)."""
        with self._lock:
            return self._server()

    def _server(self) -> ServerInfo:
        if self._info is None:
            stack = contextlib.ExitStack()
            self._info = stack.enter_context(self.engine.lease())
            self._lease = stack
        return self._info

    def get(self) -> SparkSession:
        from odfproj.engine.session import create_spark_session

        with self._lock:
            if self._session is None:
                info = self._server()
                os.environ[CONNECT_TOKEN_ENV] = info.token
                settings = SparkSettings(
                    info.url, self.settings.app_name, self.settings.conf, self.settings.verbose
                )
                self._session = create_spark_session(settings)
            return self._session

    def stop(self) -> None:
        super().stop()
        with self._lock:
            if self._lease is not None:
                self._lease.close()
            self._lease = None
            self._info = None
