"""``odfproj docs serve``: the site's folder over HTTP on 127.0.0.1 only (the standard library's server).

The site needs no server (it opens from ``file://``); serving is for a browser on another tab of
the same machine and for links that others on the machine can open. It binds the loopback address
only, so nothing of the project is offered to the network.
"""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["HOST", "site_server"]

HOST = "127.0.0.1"


class _QuietHandler(SimpleHTTPRequestHandler):
    """Serves the folder without the default's line per request on stderr, so the terminal stays readable."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def site_server(folder: Path, port: int = 8080) -> ThreadingHTTPServer:
    """A server (not yet serving) for ``folder`` on 127.0.0.1:``port``; port 0 picks a free one."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    return server
