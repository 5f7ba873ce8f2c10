"""Fixtures for the storage tests: real workspaces in temporary folders, no mocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.storage.dataset import Dataset
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import Writer, set_schema, set_transform


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "scratch"
    path.mkdir()
    return path


@pytest.fixture
def root(workspace: Workspace) -> Dataset:
    """A root dataset with a schema and nothing else."""
    dataset = workspace.create("root", model.DatasetKind.Root)
    dataset.append([set_schema()])
    return dataset


@pytest.fixture
def writer(root: Dataset, scratch: Path) -> Writer:
    return Writer(root, scratch)


@pytest.fixture
def derivative(workspace: Workspace, root: Dataset) -> Dataset:
    """A derivative of ``root`` with a SetTransform and a schema."""
    dataset = workspace.create("derived", model.DatasetKind.Derivative)
    dataset.append([set_transform(root.dataset_id), set_schema()])
    return dataset
