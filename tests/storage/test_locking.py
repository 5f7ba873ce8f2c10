"""Locks across real processes: a second writer is refused with the holder's pid, or waits."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import DatasetLockedError, WorkspaceLockedError
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import Writer, snapshot

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def holder(workspace: Workspace, target: str) -> Iterator[subprocess.Popen[str]]:
    """A child process holding a lock until the block ends (or the test kills it)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.helpers.hold_lock", str(workspace.root), target],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(timeout=20)


def test_a_second_writer_is_refused_and_the_chain_is_untouched(
    workspace: Workspace, root: Dataset, writer: Writer
) -> None:
    writer.add_data(2)
    head = root.head()
    before = snapshot(root.path)
    with holder(workspace, "root") as proc:
        with pytest.raises(DatasetLockedError) as caught:
            writer.add_data(1)
        assert str(caught.value) == f"dataset root is locked by pid {proc.pid}"
        assert caught.value.pid == proc.pid
        started = time.monotonic()
        with pytest.raises(DatasetLockedError):
            root.append([model.SetInfo(description="patient")], timeout=0.3)
        assert time.monotonic() - started >= 0.3
        assert root.head() == head
        assert {k: v for k, v in snapshot(root.path).items() if k != ".lock"} == {
            k: v for k, v in before.items() if k != ".lock"
        }
    writer.add_data(1)  # released
    assert verify_dataset(root) == []


def test_a_waiting_writer_commits_once_the_lock_is_released(workspace: Workspace, root: Dataset) -> None:
    with holder(workspace, "root") as proc:
        assert proc.stdin is not None
        threading.Timer(0.3, proc.stdin.close).start()
        new_head = root.append([model.SetInfo(description="waited")], timeout=20)
    assert root.head() == new_head
    assert verify_dataset(root) == []


def test_a_killed_holder_releases_the_lock(workspace: Workspace, root: Dataset) -> None:
    with holder(workspace, "root") as proc:
        proc.kill()
        proc.wait()
        root.append([model.SetInfo(description="after the crash")])
    assert verify_dataset(root) == []


def test_the_workspace_lock_names_the_apply_holding_it(workspace: Workspace) -> None:
    workspace.root.mkdir(parents=True)
    with holder(workspace, "--workspace") as proc:
        with pytest.raises(WorkspaceLockedError) as caught, workspace.lock():
            pass
        message = str(caught.value)
        assert message.startswith(
            f"workspace {workspace.root} is locked by pid {proc.pid} (odfproj apply started at "
        )
        assert message.endswith("Z)")
    with workspace.lock():
        pass
