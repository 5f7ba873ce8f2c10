"""``odfproj docs serve``: a real server process on 127.0.0.1, stopped by Ctrl-C (SIGINT) cleanly."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from odfproj.cli.main import app
from odfproj.errors import OdfprojError
from odfproj.project.config import WORKSPACE_ENV
from tests.docsite.projects import DAILY, write_shop


def test_serve_builds_serves_on_loopback_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    shop = write_shop(tmp_path / "shop")
    env = {k: v for k, v in os.environ.items() if k != WORKSPACE_ENV}
    process = subprocess.Popen(
        [sys.executable, "-m", "odfproj", "docs", "serve", "--port", "0", "--project", str(shop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:(\d+)/)", line)
        assert found, line + process.stderr.read() if process.stderr else line
        with urllib.request.urlopen(found.group(1), timeout=10) as response:
            assert response.status == 200
            assert f'id="ds-{DAILY}"' in response.read().decode()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "Stopped." in out and "Traceback" not in err


def test_serve_without_build_and_without_a_site_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    shop = write_shop(tmp_path / "shop")
    result = CliRunner().invoke(app, ["docs", "serve", "--no-build", "--project", str(shop)])
    assert result.exit_code == 1
    assert isinstance(result.exception, OdfprojError) and "odfproj docs build" in str(result.exception)
