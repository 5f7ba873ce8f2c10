"""The console entry point: the CLI runs with the collector on and the objects of its start frozen."""

from __future__ import annotations

import gc
import sys

import pytest

from odfproj.cli import start


def test_the_entry_point_runs_the_command_with_the_collector_on(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["odfproj", "--version"])
    try:
        with pytest.raises(SystemExit) as exited:
            start.main()
        assert exited.value.code == 0
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # the test process's objects go back to the collector
    assert "Open Data Fabric 0.35.0" in capsys.readouterr().out
