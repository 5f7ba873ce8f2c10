"""A workspace made by an odfproj older than the ``.names/`` records is adopted once, from Seeds and keys.

Old workspaces are built by ``tests.storage.helpers.old_layout``; the datasets are made with the
storage API, no JVM.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.odf.identity import DatasetKeyPair
from odfproj.storage import workspace as workspace_module
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.old_layout import ADOPTED_2, make_old, problems, two_datasets


def test_an_old_workspace_is_reported_unrecorded_then_adopted_and_verifies(workspace: Workspace) -> None:
    first, second = two_datasets(workspace)
    make_old(workspace)
    before = problems(workspace)
    assert [len(found) for found in before.values()] == [1, 1]
    assert all("has no record of dataset" in found[0] for found in before.values())

    adoption = Workspace(workspace.root).adopt_unrecorded()

    assert adoption is not None
    assert adoption.adopted == ("prices", "Trades") and adoption.left == ()
    assert adoption.line() == ADOPTED_2
    assert problems(workspace) == {"prices": [], "Trades": []}
    # The records are the ones create writes: the id, no `received` line, the name in lower case.
    assert workspace.name_record("Trades").read_text() == f"{first.dataset_id.as_did_str()}\n"
    assert workspace.recorded_id("prices") == second.dataset_id
    assert not workspace.is_received("prices")
    assert not list(workspace.root.glob(".names.adopting-*"))


def test_adoption_happens_once_and_then_says_nothing(workspace: Workspace) -> None:
    two_datasets(workspace)
    make_old(workspace)
    assert workspace.adopt_unrecorded() is not None
    assert workspace.adopt_unrecorded() is None
    assert Workspace(workspace.root).adopt_unrecorded() is None


def test_an_empty_names_folder_is_no_record_either(workspace: Workspace) -> None:
    two_datasets(workspace)
    make_old(workspace)
    workspace.names_dir.mkdir()
    adoption = workspace.adopt_unrecorded()
    assert adoption is not None and adoption.line() == ADOPTED_2
    assert problems(workspace) == {"prices": [], "Trades": []}


def test_a_workspace_with_some_records_missing_is_not_adopted(workspace: Workspace) -> None:
    two_datasets(workspace)
    workspace.name_record("prices").unlink()

    assert workspace.adopt_unrecorded() is None

    assert not workspace.name_record("prices").exists()
    found = problems(workspace)
    assert found["Trades"] == []
    assert len(found["prices"]) == 1 and "has no record of dataset 'prices'" in found["prices"][0]


def test_a_dataset_whose_key_disagrees_with_its_seed_is_not_recorded(workspace: Workspace) -> None:
    first, second = two_datasets(workspace)
    make_old(workspace)
    # prices' key file (named by its Seed's id) now holds another dataset's key.
    workspace.key_path(second.dataset_id).write_bytes(DatasetKeyPair.generate().to_pem())

    adoption = workspace.adopt_unrecorded()

    assert adoption is not None
    assert adoption.adopted == ("Trades",)
    assert adoption.left == (("prices", "its private key is of another dataset"),)
    assert adoption.line() == (
        "adopted 1 dataset of a workspace made before name records (.names/ written); left unrecorded "
        "for `odfproj verify` to report: prices (its private key is of another dataset)"
    )
    assert workspace.recorded_id("Trades") == first.dataset_id
    assert workspace.recorded_id("prices") is None
    found = problems(workspace)
    assert found["Trades"] == []
    assert any("has no record of dataset 'prices'" in p for p in found["prices"]), found
    assert any("holds the key of" in p for p in found["prices"]), found


def test_a_dataset_without_a_key_is_not_recorded(workspace: Workspace) -> None:
    """An odfproj older than name records is older than pull too: a keyless dataset is not one it pulled."""
    _, second = two_datasets(workspace)
    make_old(workspace)
    workspace.key_path(second.dataset_id).unlink()

    adoption = workspace.adopt_unrecorded()

    assert adoption is not None
    assert adoption.adopted == ("Trades",) and adoption.left == (("prices", "no private key"),)
    assert workspace.recorded_id("prices") is None


def test_nothing_adoptable_writes_nothing_and_says_why(workspace: Workspace) -> None:
    first, second = two_datasets(workspace)
    make_old(workspace)
    for dataset in (first, second):
        workspace.key_path(dataset.dataset_id).unlink()

    adoption = workspace.adopt_unrecorded()

    assert adoption is not None and adoption.adopted == ()
    assert adoption.line() == (
        "a workspace made before name records: none of its 2 dataset(s) could be adopted, "
        "`odfproj verify` reports them: prices (no private key), Trades (no private key)"
    )
    assert not workspace.names_dir.exists()


def test_a_workspace_without_datasets_is_left_alone(workspace: Workspace) -> None:
    assert workspace.adopt_unrecorded() is None
    assert not workspace.root.exists()
    workspace.datasets_dir.mkdir(parents=True)
    assert workspace.adopt_unrecorded() is None
    assert not workspace.names_dir.exists()


def test_a_recorded_workspace_costs_one_directory_read(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_datasets(workspace)

    def no(*args: object, **kwargs: object) -> None:
        raise AssertionError("opening a recorded workspace must not look at its datasets")

    monkeypatch.setattr(Workspace, "_dataset_dirs", no)
    monkeypatch.setattr(Workspace, "open", no)
    assert workspace.adopt_unrecorded() is None


def test_adoption_is_all_or_nothing(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    two_datasets(workspace)
    make_old(workspace)
    real = workspace_module.write_durable
    calls: list[Path] = []

    def fail_second(path: Path, data: bytes, mode: int = 0o644) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(path, data, mode)

    monkeypatch.setattr(workspace_module, "write_durable", fail_second)
    assert workspace.adopt_unrecorded() is None  # the disk is full: nothing adopted, nothing said
    assert len(calls) == 2
    assert not workspace.names_dir.exists()
    assert not list(workspace.root.glob(".names.adopting-*"))
    monkeypatch.setattr(workspace_module, "write_durable", real)
    assert workspace.adopt_unrecorded() is not None
    assert problems(workspace) == {"prices": [], "Trades": []}


@pytest.mark.parametrize("how", ["create", "rename"])
def test_the_first_record_written_into_an_old_workspace_adopts_it_first(
    workspace: Workspace, how: str
) -> None:
    """Once any record exists a workspace is never adopted: the first record written adopts it first."""
    two_datasets(workspace)
    make_old(workspace)
    if how == "create":
        workspace.create("volumes", model.DatasetKind.Root)
    else:
        workspace.rename("prices", "quotes")
    assert {name: found for name, found in problems(workspace).items() if found} == {}
    assert len(workspace.list_datasets()) == (3 if how == "create" else 2)
