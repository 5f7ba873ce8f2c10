"""``odfproj destroy``: orphans and selected datasets leave with their keys and name records, after asking."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from odfproj.cli.main import app
from odfproj.odf import model
from odfproj.project.config import WORKSPACE_ENV, load_project
from odfproj.run.destroy import DestroyError, destroy, destroy_plan
from odfproj.storage.errors import WorkspaceLockedError
from odfproj.storage.workspace import Workspace
from tests.docsite.projects import DAILY, ORDERS, REGIONS, add_orders_data, write_shop
from tests.storage.helpers.chains import set_schema, set_transform

GONE = "com.example.gone"


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Orders (with data), an orphan root, and a chain of the derivative reading orders."""
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    root = write_shop(tmp_path / "shop")
    add_orders_data(root, tmp_path / "scratch")
    workspace = Workspace(root / ".odf")
    workspace.create(GONE, model.DatasetKind.Root).append([set_schema()])
    orders_id = workspace.open(ORDERS).dataset_id
    workspace.create(DAILY, model.DatasetKind.Derivative).append([set_transform(orders_id)])
    return root


def leftovers(workspace: Workspace, name: str, dataset_id: model.DatasetId) -> list[Path]:
    paths = [workspace.datasets_dir / name, workspace.name_record(name), workspace.key_path(dataset_id)]
    return [p for p in paths if p.exists()]


def invoke(*args: str):
    return CliRunner().invoke(app, ["destroy", *args])


def test_orphans_go_with_their_key_and_name_record(shop: Path) -> None:
    workspace = Workspace(shop / ".odf")
    gone_id = workspace.open(GONE).dataset_id
    assert len(leftovers(workspace, GONE, gone_id)) == 3
    result = invoke("--orphans", "--yes", "--project", str(shop))
    assert result.exit_code == 0, result.output
    assert f"- {GONE} (orphan: no manifest defines it)" in result.output
    assert "Destroyed 1 dataset(s)." in result.output
    assert leftovers(workspace, GONE, gone_id) == []
    assert workspace.list_datasets() == [ORDERS, DAILY]
    orders_id = workspace.open(ORDERS).dataset_id
    assert len(leftovers(workspace, ORDERS, orders_id)) == 3


def test_a_selected_dataset_shows_its_readers_before_it_goes(shop: Path) -> None:
    workspace = Workspace(shop / ".odf")
    orders_id = workspace.open(ORDERS).dataset_id
    plan = destroy_plan(load_project(shop), [ORDERS])
    (doomed,) = plan.datasets
    assert (doomed.name, doomed.orphan, doomed.readers) == (ORDERS, False, (DAILY,))
    assert "the next run creates it anew, with a new id" in plan.describe()[0]
    assert plan.describe()[1].strip().startswith(f"read by {DAILY}")
    # Destroying the reader too (NAME+ selects downstream) leaves no reader to warn about.
    both = destroy_plan(load_project(shop), [f"{ORDERS}+"]).datasets
    assert [(d.name, d.readers) for d in both] == [(ORDERS, ()), (DAILY, ())]
    assert destroy(plan) == [ORDERS]
    assert leftovers(workspace, ORDERS, orders_id) == []


def test_without_a_terminal_and_without_yes_nothing_is_deleted(shop: Path) -> None:
    result = invoke(GONE, "--project", str(shop))
    assert result.exit_code == 1
    assert isinstance(result.exception, DestroyError)
    assert "rerun with --yes (stdin is not a terminal)" in str(result.exception)
    assert Workspace(shop / ".odf").exists(GONE)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name the datasets to destroy (selectors), or pass --orphans"),
        (("com.example.nope", "--yes"), "nothing to destroy"),
        ((REGIONS, "--yes"), f"{REGIONS} is not in the workspace"),
    ],
)
def test_nothing_to_destroy_is_an_error(shop: Path, args: tuple[str, ...], message: str) -> None:
    result = invoke(*args, "--project", str(shop))
    assert result.exit_code == 1 and message in str(result.exception)
    assert len(Workspace(shop / ".odf").list_datasets()) == 3


def test_destroy_waits_for_no_one_holding_the_workspace_lock(shop: Path) -> None:
    workspace = Workspace(shop / ".odf")
    plan = destroy_plan(load_project(shop), [GONE])
    with workspace.lock(purpose="odfproj apply"), pytest.raises(WorkspaceLockedError):
        destroy(plan)
    assert workspace.exists(GONE)


def test_on_a_terminal_it_asks_and_no_deletes_nothing(shop: Path) -> None:
    """A real terminal (a pty) for the prompt: answering n leaves the workspace as it was."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != WORKSPACE_ENV}
    process = subprocess.Popen(
        [sys.executable, "-m", "odfproj", "destroy", GONE, "--project", str(shop)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    output = b""
    try:
        while b"cannot be undone" not in output:
            output += os.read(leader, 4096)
        os.write(leader, b"n\n")
        process.wait(timeout=30)
        try:
            while chunk := os.read(leader, 4096):
                output += chunk
        except OSError:  # the pty closes with the process
            pass
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1
    assert b"Destroy cancelled; nothing was deleted." in output
    assert Workspace(shop / ".odf").exists(GONE)
