"""Fixtures for the state index tests: a stored root dataset with a changelog schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.storage.dataset import Dataset
from odfproj.storage.workspace import Workspace
from tests.state.changelogs import SCHEMA
from tests.storage.helpers.chains import set_schema


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    dataset = Workspace(tmp_path / "ws").create("cities", model.DatasetKind.Root)
    dataset.append([set_schema(SCHEMA)])
    return dataset


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "scratch"
    path.mkdir()
    return path
