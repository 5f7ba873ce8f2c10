"""A command's side of the warm engine: requests over its socket, and a Spark Connect session on it.

:func:`call` asks for one answer; :func:`stream` runs a long request (a whole ``run``) whose messages
arrive while it works and which Ctrl-C interrupts; :class:`WarmSessionHolder` is a Connect client
session for the trusted work of ``ingest`` and ``test``. Finding and starting the server is
:mod:`.lifecycle`'s.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from odfproj.engine.session import (
    SparkSessionHolder,
    SparkSettings,
)
from odfproj.engine.warm.protocol import (
    ABORT,
    CONNECT_TOKEN_ENV,
    INTERRUPT,
    LOG_FILE,
    STOP,
    ServerInfo,
    last_line,
    receive_bytes,
    send,
)
from odfproj.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def connect(conn: socket.socket, info: ServerInfo) -> None:
    """Connect to the server's socket; one line saying how to do without it when it does not answer."""
    try:
        conn.connect(info.socket)
    except OSError as e:
        raise EngineError(
            f"the warm engine does not answer ({e.strerror or e}); --cold runs without it"
        ) from None


def call(info: ServerInfo, op: str, *args: Any, timeout: float | None = None) -> Any:
    """Ask the server to run ``op(*args)``; its result, or the exception it raised, raised here.

    An exception that cannot cross (a class this side cannot rebuild) arrives as a one-line
    ``EngineError`` (see :func:`~odfproj.engine.warm.server.send_answer`).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        connect(conn, info)
        send(conn, (op, args))
        ok, value = _loaded(receive_bytes(conn))
    if ok:
        return value
    raise value


#: How long a caller waits for a request's last answer after asking it to stop at once (a second Ctrl-C).
ABORT_WAIT_S = 30.0


#: How often a streaming caller looks at its interrupt while no message arrives.
_POLL_S = 0.1


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
        connect(conn, info)
        send(conn, (op, args))
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
            data = receive_bytes(conn)
        except (OSError, EOFError) as e:
            frames.put(e)
            return
        frame = _loaded(data)
        frames.put(frame)
        if frame[0] is not None:
            return


def _loaded(data: bytes) -> Any:
    """A frame's value; one this side cannot rebuild (a server of another version sent a class this
    one lacks) is a last answer, a one-line ``EngineError``."""
    try:
        return pickle.loads(data)  # only this user can reach the socket
    except Exception as e:
        text = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        return (False, EngineError(f"the warm engine's answer could not be read: {text}"))


def _take(
    frame: tuple[bool | None, Any] | BaseException, on_message: Callable[[Any], object], info: ServerInfo
) -> tuple[bool, Any]:
    """``(True, result)`` for the last frame (its exception raised), ``(False, None)`` after a message."""
    if isinstance(frame, BaseException):
        log = Path(info.socket).parent / LOG_FILE
        raise EngineError(
            f"the warm engine went away during the command ({last_line(log)}; log: {log}); every commit "
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
        send(conn, (INTERRUPT, level))


class Leases(Protocol):
    """What finds (or starts) a server and keeps it up while a block uses it:
    :class:`~odfproj.engine.warm.lifecycle.WarmEngine`, which calls this module for its pings."""

    def lease(self) -> AbstractContextManager[ServerInfo]: ...


#: The master a warm holder shows before its server is known: a Connect target on this machine.
CONNECT_PLACEHOLDER = "sc://localhost"


class WarmSessionHolder(SparkSessionHolder):
    """A ``SparkSessionHolder`` whose session is a Connect client of the warm server.

    ``settings`` are the target's (its SQL settings are set on the session, as on any Connect target);
    the server is found or started, and leased, on the first :meth:`get`, and released by :meth:`stop`.
    Until then ``settings.master`` names the server without its port.
    """

    def __init__(self, settings: SparkSettings, engine: Leases) -> None:
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
