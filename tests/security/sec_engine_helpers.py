"""Witnesses for the Spark-side hostile-PR tests: a listener that must stay silent, a java that records.

Kept out of a conftest.py on purpose: other test files of ``tests/security`` have their own fixtures.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path


class SilentListener:
    """A TCP listener on 127.0.0.1 that records every connection; a test asserts it got none.

    It answers anything with an HTTP 404 and closes, so a client that does connect fails fast rather
    than hanging the test.
    """

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self.port: int = self._socket.getsockname()[1]
        self.received: list[bytes] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="sec-engine-listener")
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self._closed.set()
        self._socket.close()
        self._thread.join(timeout=5)


def real_java() -> str:
    """The java binary Spark would use: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    assert found, "no java to wrap"
    return os.path.realpath(found)


def java_witness(folder: Path, *, passthrough: bool) -> tuple[dict[str, str], Path]:
    """An environment whose ``java`` ($JAVA_HOME/bin/java, first on PATH) appends its arguments to a log.

    With ``passthrough`` it then runs the real java (to see the options a JVM got); without, it fails
    at once (to prove no JVM was started). Returns the environment and the log file.
    """
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    log = folder / "java-calls.log"
    tail = f'exec "{real_java()}" "$@"' if passthrough else "exit 127"
    java = bin_dir / "java"
    java.write_text(f'#!/bin/sh\necho "java $*" >> "{log}"\n{tail}\n')
    java.chmod(0o755)
    env = dict(os.environ)
    env.update(JAVA_HOME=str(folder), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    env.pop("SPARK_HOME", None)
    return env, log


def odfproj(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfproj", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


#: Runs each ``odfproj`` command line of argv[1] (JSON) in turn in this one interpreter; prints the results.
_EACH = """
import json, sys
sys.path.insert(0, {repo!r})
from tests.cli_inprocess import run_main_split
print(json.dumps([run_main_split(*args) for args in json.loads(sys.argv[1])]))
"""


def odfproj_each(
    commands: list[list[str]], cwd: Path, env: dict[str, str]
) -> list[subprocess.CompletedProcess[str]]:
    """Several ``odfproj`` commands, one after the other, in ONE new interpreter (real entry point each).

    For checks whose point is the process as a whole (no JVM started by any of them) without paying an
    interpreter start per command.
    """
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _EACH.format(repo=str(repo)), json.dumps(commands)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(proc.stdout.splitlines()[-1])
    return [subprocess.CompletedProcess(["odfproj", *c], *r) for c, r in zip(commands, results, strict=True)]
