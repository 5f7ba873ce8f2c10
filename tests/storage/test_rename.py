"""``Workspace.rename``: a dataset keeps its id, key, chain, data and caches under its new name.

A crash is simulated by failing the step after the one under test (the rename is three steps: new
name record, folder rename, old record removal); after each, every dataset must verify clean.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.storage import workspace as workspace_module
from odfproj.storage.errors import DatasetExistsError, DatasetNotFoundError
from odfproj.storage.verify import verify_in_workspace
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import Writer, set_schema, set_transform, snapshot

OLD, NEW = "com.example.old", "com.example.new"


class Crash(BaseException):
    """Stands for the process dying at that point (nothing after it runs, no cleanup catches it)."""


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws")
    dataset = workspace.create(OLD, model.DatasetKind.Root)
    dataset.append([set_schema()])
    Writer(dataset, tmp_path / "scratch").add_data(3, checkpoint=b"state")
    reader = workspace.create("com.example.reader", model.DatasetKind.Derivative)
    reader.append([set_transform(dataset.dataset_id)])
    return workspace


def _clean(workspace: Workspace) -> None:
    for name in workspace.list_datasets():
        assert verify_in_workspace(workspace, workspace.open(name)) == [], name


def test_a_renamed_dataset_keeps_its_id_key_chain_data_and_caches(workspace: Workspace) -> None:
    before = workspace.open(OLD)
    dataset_id, head = before.dataset_id, before.head()
    files = snapshot(before.path)
    assert any(p.startswith("info/") for p in files)  # the projection cache goes along
    renamed = workspace.rename(OLD, NEW, expected_id=dataset_id)
    assert (renamed.name, renamed.dataset_id, renamed.head()) == (NEW, dataset_id, head)
    assert snapshot(renamed.path) == files
    assert not workspace.exists(OLD) and workspace.list_datasets() == [NEW, "com.example.reader"]
    assert workspace.recorded_id(NEW) == dataset_id and workspace.recorded_id(OLD) is None
    assert workspace.key_path(dataset_id).is_file()
    assert workspace.find_by_id(dataset_id).name == NEW  # readers follow by id
    _clean(workspace)


def test_a_taken_or_missing_name_or_another_id_renames_nothing(workspace: Workspace) -> None:
    with pytest.raises(DatasetExistsError, match="already exists"):
        workspace.rename(OLD, "com.example.reader")
    with pytest.raises(DatasetNotFoundError):
        workspace.rename("com.example.nope", NEW)
    other = workspace.open("com.example.reader").dataset_id
    with pytest.raises(DatasetExistsError, match="it was replaced; nothing was renamed"):
        workspace.rename(OLD, NEW, expected_id=other)
    assert workspace.list_datasets() == [OLD, "com.example.reader"]
    assert workspace.recorded_id(NEW) is None
    _clean(workspace)


def test_a_leftover_folder_under_the_new_name_is_not_a_dataset_and_is_replaced(workspace: Workspace) -> None:
    (workspace.datasets_dir / NEW / "blocks").mkdir(parents=True)  # a crashed create's folder: no head
    workspace.rename(OLD, NEW)
    assert workspace.open(NEW).projection().last_offset == 2
    _clean(workspace)


def test_a_crash_before_the_folder_moves_leaves_the_old_dataset_valid(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_rename = os.rename
    folder = workspace.datasets_dir / OLD

    def crash(source: object, target: object) -> None:
        if Path(str(source)) == folder:
            raise Crash  # as if killed right after the new name record was written
        real_rename(source, target)

    monkeypatch.setattr(workspace_module.os, "rename", crash)
    with pytest.raises(Crash):
        workspace.rename(OLD, NEW)
    monkeypatch.setattr(workspace_module.os, "rename", real_rename)
    assert workspace.list_datasets() == [OLD, "com.example.reader"]
    _clean(workspace)
    # The stale record under the free name is harmless: renaming again (or creating NEW) overwrites it.
    workspace.rename(OLD, NEW)
    _clean(workspace)


def test_a_crash_before_the_old_record_goes_leaves_the_new_dataset_valid(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_record = workspace.name_record(OLD)
    real_unlink = Path.unlink

    def crash(self: Path, missing_ok: bool = False) -> None:
        if self == old_record:
            raise Crash  # killed after the folder moved
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", crash)
    with pytest.raises(Crash):
        workspace.rename(OLD, NEW)
    monkeypatch.setattr(Path, "unlink", real_unlink)
    assert workspace.list_datasets() == [NEW, "com.example.reader"]
    _clean(workspace)
    # A dataset created later under the old name gets its own record over the stale one.
    fresh = workspace.create(OLD, model.DatasetKind.Root)
    assert workspace.recorded_id(OLD) == fresh.dataset_id
    _clean(workspace)
