"""`validate` and `plan` execute nothing a manifest names: safe on an untrusted pull request.

Each hostile manifest would leave a trace if anything ran it: a canary file created by a Pipe or
Container command or by a template escaping the sandbox, or a request logged by a real HTTP server.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import pytest

HOSTILE_SOURCE = """\
kind: DatasetSnapshot
version: 1
content:
  name: org.evil.source
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: http://127.0.0.1:{port}/payload.csv
      prepare:
        - kind: Pipe
          command: [{python!r}, "-c", "open({canary!r}, 'w').write('pwned')"]
      read:
        kind: Csv
        schema: ["a STRING"]
      merge:
        kind: Append
"""

HOSTILE_CONTAINER = """\
kind: DatasetSnapshot
version: 1
content:
  name: org.evil.container
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Container
        image: docker.io/library/busybox
        command: ["sh", "-c", "touch {canary}"]
      read:
        kind: Csv
        schema: ["a STRING"]
      merge:
        kind: Append
"""

HOSTILE_TEMPLATE = """\
kind: DatasetSnapshot
version: 1
content:
  name: org.evil.template
  kind: Root
  metadata:
    - kind: SetInfo
      description: "{{{{ cycler.__init__.__globals__.os.system('touch {canary}') }}}}"
"""


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"a\n1\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server():
    _Recorder.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def hostile_project(tmp_path, server) -> tuple[Path, list[Path]]:
    root = tmp_path / "pr"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: untrusted\n")
    canaries = [tmp_path / f"canary-{i}" for i in range(3)]
    (root / "datasets" / "source.yaml").write_text(
        HOSTILE_SOURCE.format(port=server.server_port, python=sys.executable, canary=str(canaries[0]))
    )
    (root / "datasets" / "container.yaml").write_text(HOSTILE_CONTAINER.format(canary=canaries[1]))
    (root / "datasets" / "template.yaml").write_text(HOSTILE_TEMPLATE.format(canary=canaries[2]))
    return root, canaries


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfproj", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "command", [["validate"], ["plan"], ["plan", "--format", "json"], ["plan", "--format", "markdown"]]
)
def test_nothing_a_manifest_names_runs(hostile_project, command) -> None:
    root, canaries = hostile_project
    proc = _cli(command, root)
    assert "Traceback" not in proc.stderr
    for canary in canaries:
        assert not canary.exists(), f"{command} executed something: {canary.name} was created"
    assert _Recorder.requests == [], f"{command} fetched {_Recorder.requests}"
    assert not (root / ".odf").exists(), f"{command} wrote a workspace"


def test_sandbox_escape_is_reported_as_a_template_error(hostile_project) -> None:
    root, _ = hostile_project
    proc = _cli(["plan"], root)
    assert proc.returncode == 1
    assert "datasets/template.yaml:" in proc.stderr
    assert (
        "unsafe" in proc.stderr.lower()
        or "not allowed" in proc.stderr.lower()
        or "access" in proc.stderr.lower()
    )


def test_plan_of_the_safe_datasets_lists_data_work_without_doing_it(hostile_project) -> None:
    root, canaries = hostile_project
    (root / "datasets" / "template.yaml").unlink()
    proc = _cli(["plan"], root)
    assert proc.returncode == 0, proc.stderr
    assert "ingest " in proc.stdout and "(Url http" in proc.stdout and "(Container " in proc.stdout
    assert not any(c.exists() for c in canaries) and _Recorder.requests == []
