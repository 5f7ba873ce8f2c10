"""What the commands and the server share: the server's record and files, and the socket's frames.

A frame is a length-prefixed pickle. Pickle is sound here because only this user can reach the socket
(its folder is ``0700``) and both ends are the same installation (:func:`~.choice.engine_dir` is per
Python environment and PySpark version). A request is ``(op, args)``; an answer is ``(ok, value)``, and
on a streaming request ``(None, message)`` frames come first; the caller interrupts one with
``(INTERRUPT, level)``.
"""

from __future__ import annotations

import json
import pickle
import socket
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


#: How the server process receives its Connect token (never on its command line, which ``ps`` shows).
TOKEN_ENV = "ODFPROJ_WARM_TOKEN"


#: The variable PySpark's Connect client and server read the bearer token from.
CONNECT_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


#: Marks PySpark leaves in a process that opened a Connect session; a server started from such a
#: process must start a classic context, so they are not passed on.
CONNECT_CLIENT_MARKS = (
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_REMOTE",
    "SPARK_LOCAL_REMOTE",
    CONNECT_TOKEN_ENV,
)


STATE_FILE = "server.json"


START_LOCK = "start.lock"


USE_LOCK = "use.lock"


USED_STAMP = "used"


LOG_FILE = "server.log"


SOCKET_FILE = "rpc.sock"


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


#: What a caller sends on a streaming request's connection to interrupt it: ``(INTERRUPT, level)``.
INTERRUPT = "interrupt"


#: Level 1: finish what is in progress and start nothing more (a first Ctrl-C).
STOP = 1


#: Level 2: stop at once (a second Ctrl-C, or the caller went away).
ABORT = 2


_HEADER = struct.Struct("!Q")


def send(conn: socket.socket, value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    conn.sendall(_HEADER.pack(len(data)) + data)


def receive(conn: socket.socket) -> Any:
    return pickle.loads(receive_bytes(conn))  # only this user can reach the socket


def receive_bytes(conn: socket.socket) -> bytes:
    """One frame's pickled bytes."""
    return _exactly(conn, _HEADER.unpack(_exactly(conn, _HEADER.size))[0])


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = conn.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            raise EOFError("the warm engine closed the connection")
        chunks += chunk
    return bytes(chunks)


def last_line(log: Path) -> str:
    try:
        return last_line_of(log.read_text(errors="replace"))
    except OSError:
        return "no output"


def last_line_of(text: str) -> str:
    """The last line of ``text`` that names an error, else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower():
            return line
    return lines[-1] if lines else "no output"
