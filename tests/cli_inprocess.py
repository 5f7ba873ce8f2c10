"""Run the whole CLI (its error boundary included) in-process on the shared Spark session.

Only the commands' Spark session holders are replaced, by one over the test session; everything else is
the real console entry point, so exit codes and one-line errors are what a user sees.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from odfproj.cli import options as options_cmd
from odfproj.cli import run as run_cmd
from odfproj.cli.main import main
from odfproj.project.config import WORKSPACE_ENV
from tests.spark_helpers import RecordingHolder


def cli_in(spark, monkeypatch: pytest.MonkeyPatch, cwd: Callable[[], Path]) -> Callable[..., tuple[int, str]]:
    """``invoke(*args) -> (exit code, stdout + stderr)`` of ``odfproj ARGS`` run in the folder ``cwd()``."""
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    for module in (run_cmd, options_cmd):  # ingest, sql and test get theirs from options.session_holder
        monkeypatch.setattr(module, "SparkSessionHolder", lambda *a, **k: RecordingHolder(spark))

    def invoke(*args: str) -> tuple[int, str]:
        monkeypatch.chdir(cwd())
        return run_main(*args)

    return invoke


def run_main(*args: str) -> tuple[int, str]:
    """``odfproj ARGS`` through the real entry point in this process: (exit code, stdout + stderr)."""
    output = io.StringIO()
    return _exit_code(args, output, output), output.getvalue()


def run_main_split(*args: str) -> tuple[int, str, str]:
    """``odfproj ARGS`` like ``run_main``, its streams kept apart: (exit code, stdout, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    return _exit_code(args, stdout, stderr), stdout.getvalue(), stderr.getvalue()


def _exit_code(args: tuple[str, ...], stdout: io.StringIO, stderr: io.StringIO) -> int:
    """Run ``main`` with ``args``, its output into ``stdout`` and ``stderr``; the process's exit code."""
    argv = sys.argv
    sys.argv = ["odfproj", *args]
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                main()
            except SystemExit as e:
                return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            return 0
    finally:
        sys.argv = argv
