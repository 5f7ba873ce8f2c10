"""Fixtures shared by the ingest tests: a project folder with a data/ folder, and a workspace in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.storage.workspace import Workspace


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / ".odf")
