"""Generated code must match its generator: a stale model would silently drift from the spec."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_DIR


def test_model_is_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO_DIR / "tools" / "gen_model.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
