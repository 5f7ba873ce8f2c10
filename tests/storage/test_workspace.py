"""Workspace: creating, finding, opening and deleting datasets; keys; the workspace lock (in-process)."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime

import pytest

from odfproj.errors import InvalidValueError
from odfproj.odf import model
from odfproj.odf.identity import DatasetKeyPair
from odfproj.storage.errors import DatasetExistsError, DatasetNotFoundError, WorkspaceLockedError
from odfproj.storage.workspace import Workspace


def test_create_writes_a_seeded_dataset_and_its_key(workspace: Workspace) -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    dataset = workspace.create("com.example.Trades", model.DatasetKind.Derivative, system_time=when)
    assert dataset.name == "com.example.Trades"
    assert dataset.path == workspace.root / "datasets" / "com.example.Trades"
    [(head, seed)] = list(dataset.iter_blocks())
    assert head == dataset.head()
    assert seed.sequence_number == 0 and seed.prev_block_hash is None and seed.system_time == when
    assert seed.event == model.Seed(dataset_id=dataset.dataset_id, dataset_kind=model.DatasetKind.Derivative)
    assert dataset.kind == model.DatasetKind.Derivative

    key_file = workspace.keys_dir / f"{dataset.dataset_id.as_did_str().removeprefix('did:odf:')}.pem"
    assert key_file == workspace.key_path(dataset.dataset_id)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert DatasetKeyPair.from_pem(key_file.read_bytes()).dataset_id == dataset.dataset_id


def test_each_dataset_gets_its_own_identity(workspace: Workspace) -> None:
    a = workspace.create("a", model.DatasetKind.Root)
    b = workspace.create("b", model.DatasetKind.Root)
    assert a.dataset_id != b.dataset_id
    assert len(list(workspace.keys_dir.iterdir())) == 2


def test_names_are_case_insensitive_but_keep_their_spelling(workspace: Workspace) -> None:
    workspace.create("MyData", model.DatasetKind.Root)
    assert workspace.list_datasets() == ["MyData"]
    assert workspace.exists("mydata") and workspace.exists("MYDATA")
    assert workspace.open("mYdAtA").name == "MyData"
    with pytest.raises(DatasetExistsError, match="dataset 'MyData' already exists in workspace"):
        workspace.create("mydata", model.DatasetKind.Root)


def test_invalid_names_are_rejected(workspace: Workspace) -> None:
    with pytest.raises(InvalidValueError, match="invalid dataset name"):
        workspace.create("no spaces", model.DatasetKind.Root)
    with pytest.raises(InvalidValueError):
        workspace.create(".hidden", model.DatasetKind.Root)


def test_open_unknown_dataset(workspace: Workspace) -> None:
    assert workspace.list_datasets() == []  # the workspace folder does not even exist yet
    with pytest.raises(DatasetNotFoundError) as caught:
        workspace.open("nope")
    assert str(caught.value) == f"dataset 'nope' not found in workspace {workspace.root}"


def test_half_created_datasets_are_ignored_and_replaced(workspace: Workspace) -> None:
    workspace.create("real", model.DatasetKind.Root)
    half = workspace.datasets_dir / "half"
    (half / "blocks").mkdir(parents=True)
    (half / "blocks" / "junk").write_bytes(b"x")
    crashed = workspace.datasets_dir / ".creating-0123456789abcdef"
    (crashed / "refs").mkdir(parents=True)
    (crashed / "refs" / "head").write_text("f1620")
    assert workspace.list_datasets() == ["real"]
    assert not workspace.exists("half")
    with pytest.raises(DatasetNotFoundError):
        workspace.open("half")
    dataset = workspace.create("half", model.DatasetKind.Root)
    assert not (dataset.path / "blocks" / "junk").exists()
    assert not crashed.exists()
    assert workspace.list_datasets() == ["half", "real"]


def test_delete_removes_the_dataset_but_keeps_its_key(workspace: Workspace) -> None:
    dataset = workspace.create("gone", model.DatasetKind.Root)
    key = workspace.key_path(dataset.dataset_id)
    workspace.delete("GONE")
    assert not workspace.exists("gone")
    assert not dataset.path.exists()
    assert key.exists()
    assert [p.name for p in workspace.datasets_dir.iterdir() if not p.name.startswith(".")] == []
    with pytest.raises(DatasetNotFoundError):
        workspace.delete("gone")


def test_workspace_lock_is_exclusive_and_names_its_holder(workspace: Workspace) -> None:
    with workspace.lock():
        with pytest.raises(WorkspaceLockedError) as caught, workspace.lock():
            pass
        message = str(caught.value)
        assert message.startswith(
            f"workspace {workspace.root} is locked by pid {os.getpid()} (odfproj apply started at "
        )
        assert caught.value.pid == os.getpid()
        with pytest.raises(WorkspaceLockedError), workspace.lock(timeout=0.1):
            pass
    with workspace.lock(purpose="odfproj run"):
        pass  # released on exit


def test_create_with_definition_events_is_one_step(tmp_path) -> None:
    from odfproj.odf import model
    from odfproj.storage.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    info = model.SetInfo(description="d", keywords=("k",))
    ds = ws.create("org.example.a", model.DatasetKind.Root, events=[info])
    blocks = list(ds.iter_blocks())
    assert [type(b.event).__name__ for _, b in blocks] == ["SetInfo", "Seed"]
    assert ds.projection().sequence_number == 1


def test_create_with_invalid_events_writes_nothing(tmp_path) -> None:
    import pytest

    from odfproj.odf import model
    from odfproj.storage.errors import ChainInvariantError
    from odfproj.storage.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    transform = model.SetTransform(inputs=(), transform=model.TransformSql(engine="spark", query="SELECT 1"))
    with pytest.raises(ChainInvariantError, match=r"org\.example\.a"):
        ws.create("org.example.a", model.DatasetKind.Root, events=[transform])
    assert ws.list_datasets() == []
    assert not ws.keys_dir.exists() or not any(ws.keys_dir.iterdir())


def test_info_records_round_trip(tmp_path) -> None:
    import pytest

    from odfproj.errors import InvalidValueError
    from odfproj.odf import model
    from odfproj.storage.workspace import Workspace

    ds = Workspace(tmp_path / "ws").create("org.example.a", model.DatasetKind.Root)
    assert ds.read_info("applied.json") is None
    ds.write_info("applied.json", b"{}")
    assert ds.read_info("applied.json") == b"{}"
    with pytest.raises(InvalidValueError):
        ds.write_info("../escape", b"")


def test_find_by_id_follows_creates_and_deletes(workspace: Workspace) -> None:
    first = workspace.create("prices", model.DatasetKind.Root).dataset_id
    assert workspace.find_by_id(first).name == "prices"
    workspace.delete("prices")
    second = workspace.create("prices", model.DatasetKind.Root).dataset_id  # same name, new id
    assert workspace.find_by_id(first) is None  # the remembered name now holds another id
    assert workspace.find_by_id(second).name == "prices"
    other = Workspace(workspace.root).create("volumes", model.DatasetKind.Root)  # made by another handle
    assert workspace.find_by_id(other.dataset_id).name == "volumes"


def test_ids_a_caller_remembers_spare_the_scan_and_a_wrong_one_costs_only_a_scan(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run hands the ids its plan read to the workspace, so its first input lookup scans nothing."""
    prices = workspace.create("prices", model.DatasetKind.Root).dataset_id
    volumes = workspace.create("volumes", model.DatasetKind.Root).dataset_id
    reader = Workspace(workspace.root)
    reader.remember_ids({prices: "prices", volumes: "prices"})  # the second is wrong
    scans = []
    real_scan = reader._scan_ids
    monkeypatch.setattr(reader, "_scan_ids", lambda: scans.append(1) or real_scan())
    assert reader.find_by_id(prices).name == "prices"
    assert scans == []  # found from what was remembered
    assert reader.find_by_id(volumes).name == "volumes"  # the wrong hint checked, then a scan
    assert scans == [1]
