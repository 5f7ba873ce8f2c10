"""The warm engine's life cycle, as commands see it: find, start, lease and stop the server.

See the package's docstring for the locks and the record. The server decides to stop through
:func:`claim_when_idle`, since whether it may is a question of these same locks.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from odfproj.engine.warm.choice import DEFAULT_IDLE_S
from odfproj.engine.warm.client import call
from odfproj.engine.warm.protocol import (
    CONNECT_CLIENT_MARKS,
    LOG_FILE,
    SOCKET_FILE,
    START_LOCK,
    STATE_FILE,
    TOKEN_ENV,
    USE_LOCK,
    USED_STAMP,
    ServerInfo,
    last_line,
)
from odfproj.errors import EngineError

if TYPE_CHECKING:
    pass


#: How long a command waits for a server to start (a JVM start on a loaded machine is slow).
START_TIMEOUT_S = 300.0


#: How long a command waits for a live server's answer before calling it stale.
PING_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerStatus:
    """A live server as ``odfproj engine status`` shows it."""

    info: ServerInfo
    directory: Path
    in_use: bool
    idle_for: float


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
        handle = try_hold(self._path(USE_LOCK))
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
        env = {k: v for k, v in os.environ.items() if k not in CONNECT_CLIENT_MARKS}
        env[TOKEN_ENV] = token
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
                    f"the warm engine did not start (exit {code}): {last_line(log)} (log: {log}; "
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


def try_hold(path: Path) -> IO[bytes] | None:
    handle = open(path, "a+b")  # noqa: SIM115 - kept open while the lock is held
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


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


def claim_when_idle(directory: Path, info: ServerInfo, idle: float) -> tuple[IO[bytes], IO[bytes]] | None:
    """In the server: when nothing used it for ``idle`` seconds and no command holds it now, both
    locks taken, else ``None``.

    ``start.lock`` is taken too (without waiting), so no command is between finding the record and
    leasing it; the server keeps both handles open until its process exits, with the record already
    removed, so no command can find and lease a server that is stopping.
    """
    try:
        used = max(info.started, (directory / USED_STAMP).stat().st_mtime)
    except OSError:
        used = info.started
    if time.time() - used < idle:
        return None
    starting = try_hold(directory / START_LOCK)
    if starting is None:
        return None
    using = try_hold(directory / USE_LOCK)
    if using is None:
        starting.close()
        return None
    return starting, using
