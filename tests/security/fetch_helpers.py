"""Misbehaving HTTP servers on 127.0.0.1 for the fetch-bounds tests: real sockets, in threads.

Each server counts the connections or requests it got, so a test can tell how often odfproj tried.
They are context managers: leaving the ``with`` closes every socket and joins the threads.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from odfproj.ingest.fetch import FetchResult, fetch
from odfproj.ingest.http import HttpSettings
from odfproj.odf import model


@dataclass
class Listener:
    """Where a server listens and what it has seen."""

    port: int
    connections: int = 0
    statuses: list[int] = field(default_factory=list)

    def url(self, path: str = "/data.csv") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextmanager
def raw_server(serve: Callable[[socket.socket, threading.Event], None]) -> Iterator[Listener]:
    """Accept connections and hand each to ``serve(conn, stop)`` in its own thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.05)
    listener = Listener(port=sock.getsockname()[1])
    stop = threading.Event()
    workers: list[threading.Thread] = []
    conns: list[socket.socket] = []

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            listener.connections += 1
            conns.append(conn)
            worker = threading.Thread(target=_quietly, args=(serve, conn, stop), daemon=True)
            workers.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept_loop, daemon=True)
    acceptor.start()
    try:
        yield listener
    finally:
        stop.set()
        acceptor.join()
        for conn in conns:
            conn.close()
        for worker in workers:
            worker.join(timeout=5)
        sock.close()


def _quietly(
    serve: Callable[[socket.socket, threading.Event], None], conn: socket.socket, stop: threading.Event
) -> None:
    with suppress(OSError):  # the client hung up: expected when it gives up
        serve(conn, stop)


def hanging(conn: socket.socket, stop: threading.Event) -> None:
    """Accept, read the request, never answer."""
    conn.recv(65536)
    stop.wait()


def trickling(interval: float, total: int = 10_000) -> Callable[[socket.socket, threading.Event], None]:
    """Answer 200 at once, then send the body one byte every ``interval`` seconds."""

    def serve(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n".encode())
        for _ in range(total):
            if stop.wait(interval):
                return
            conn.sendall(b"x")

    return serve


@contextmanager
def scripted_server(
    statuses: list[int], *, body: bytes = b"a\n1\n", retry_after: str | None = None
) -> Iterator[Listener]:
    """Answer each GET with the next status of ``statuses`` (the last one repeats); 200 carries ``body``."""
    listener = Listener(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index = min(len(listener.statuses), len(statuses) - 1)
            status = statuses[index]
            listener.statuses.append(status)
            if status != 200:
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", '"v1"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    listener.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        httpd.shutdown()
        httpd.server_close()


def refused_port() -> int:
    """A port nothing listens on: reserved, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], bool], limit: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``limit`` seconds pass (a bound, never asserted as a time)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


#: The system time every fetch of these tests runs at.
SYSTEM_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def fetch_url(
    url: str,
    tmp_path: Path,
    http: HttpSettings | None,
    environ: dict[str, str] | None = None,
    *,
    dataset: str = "bounded.ds",
) -> FetchResult:
    """One Url fetch of ``url`` into ``tmp_path``'s work folder, with these HTTP settings."""
    return fetch(
        model.FetchStepUrl(url=url),
        dataset=dataset,
        source="default",
        prev_state=None,
        project_root=tmp_path,
        work_dir=tmp_path / "work",
        system_time=SYSTEM_TIME,
        environ=environ or {},
        http=http,
    )


def no_leftovers(tmp_path: Path) -> bool:
    """Whether a fetch left nothing in its work folder."""
    work = tmp_path / "work"
    return not work.exists() or not any(work.iterdir())
