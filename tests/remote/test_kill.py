"""SIGKILL at random points of a push and of a remote workspace commit: the remote stays valid.

Each kill runs the real sync in a child process (forked from a forkserver that imported odfproj once), waits until it has started syncing, lets it run for
a random part of the time an uninterrupted sync took, and kills it with SIGKILL. Then the remote's
head must be the old or the new one, everything it reaches must be present and match its hash, and
a rerun must complete. JVM-free, no interpreter start per kill.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.process
import os
import random
import shutil
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from odfproj.odf.multiformats import Multihash
from odfproj.remote.repository import push
from odfproj.remote.sync import SyncState, plan_sync, read_head, sync_dataset
from odfproj.remote.workspace import DATASETS
from odfproj.storage.object_store import FolderStore, ObjectStore, open_store
from odfproj.storage.workspace import Workspace
from tests.remote.conftest import add_slices, make_workspace
from tests.remote.helpers.sync_child import push_and_report

#: 20 kills in all; fewer on S3, where each request to the test server costs more than a file write.
FOLDER_KILLS = 14
S3_KILLS = 6


_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["tests.remote.helpers.sync_child", "boto3", "botocore.client"])


def _child(workspace: Path, url: str) -> tuple[multiprocessing.process.BaseProcess, Connection]:
    """A child pushing ``workspace`` to ``url``; started, it waits for nothing."""
    ours, theirs = _CONTEXT.Pipe()
    child = _CONTEXT.Process(target=push_and_report, args=(str(workspace), url, _aws_env(), theirs))
    child.start()
    theirs.close()
    return child, ours


def _aws_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("AWS_")}


def _full_run_seconds(workspace: Path, url: str) -> float:
    child, channel = _child(workspace, url)
    assert channel.recv() == "started"
    seconds = channel.recv()
    child.join(timeout=120)
    assert child.exitcode == 0
    return float(seconds)


def _kill_during(workspace: Path, url: str, delay: float) -> None:
    child, channel = _child(workspace, url)
    assert channel.recv() == "started"
    time.sleep(delay)
    child.kill()  # SIGKILL
    child.join(timeout=60)
    channel.close()


def _assert_valid(store: ObjectStore, heads: set[Multihash | None], scratch: Path) -> Multihash:
    """The remote dataset's head is one of ``heads`` and everything it reaches is there and intact."""
    found = read_head(store, "the remote")
    assert found is not None and found[0] in heads
    shutil.rmtree(scratch, ignore_errors=True)
    # A full copy out of the remote checks every block's and object's hash on the way.
    assert sync_dataset("trips", store, FolderStore(scratch)).new_head == found[0]
    return found[0]


def _kill_series(
    kills: int,
    tmp_path: Path,
    url_of: Callable[[str], str],
    reset: Callable[[str], ObjectStore],
    source: Workspace,
    old: Multihash,
    new: Multihash,
) -> list[Multihash]:
    seconds = _full_run_seconds(source.root, url_of("measure"))
    rng = random.Random(int.from_bytes(os.urandom(4)))
    seen: list[Multihash] = []
    for i in range(kills):
        url = url_of(f"k{i}")
        store = reset(url)
        _kill_during(source.root, url, rng.uniform(0, seconds * 1.2))
        target = store.child("trips")
        seen.append(_assert_valid(target, {old, new}, tmp_path / "check"))
        # The rerun completes from wherever the kill left it.
        push(source, [], store)
        assert _assert_valid(target, {new}, tmp_path / "check") == new
    print(
        f"kills left the old head {sum(h == old for h in seen)} times, the new {sum(h == new for h in seen)}"
    )
    return seen


@pytest.fixture
def histories(tmp_path: Path) -> tuple[Workspace, Path]:
    """A workspace whose older state is in a template repository; 8 more slices are to be pushed."""
    source = make_workspace(tmp_path / "ws", slices=2)
    template = tmp_path / "template"
    push(source, [], FolderStore(template))
    add_slices(source.open("trips"), tmp_path / "more", 8)
    return source, template


def test_sigkill_during_a_push_to_a_folder_leaves_the_repository_valid(tmp_path: Path, histories) -> None:
    source, template = histories
    old = read_head(FolderStore(template / "trips"), "template")[0]
    new = source.open("trips").head()

    def reset(url: str) -> ObjectStore:
        shutil.copytree(template, url)
        return FolderStore(Path(url))

    seen = _kill_series(FOLDER_KILLS, tmp_path, lambda name: str(tmp_path / name), reset, source, old, new)
    assert len(seen) == FOLDER_KILLS


def test_sigkill_during_a_remote_workspace_commit_on_s3_leaves_it_valid(
    tmp_path: Path, histories, bucket: str
) -> None:
    source, template = histories
    old = read_head(FolderStore(template / "trips"), "template")[0]
    new = source.open("trips").head()
    root = bucket.rsplit("/", 1)[0]

    def url_of(name: str) -> str:
        return f"{root}/{name}/{DATASETS}"  # a remote workspace's datasets/ is a repository

    def reset(url: str) -> ObjectStore:
        store = open_store(url)
        assert (
            sync_dataset("trips", FolderStore(template / "trips"), store.child("trips")).state
            is SyncState.CREATED
        )
        return store

    seen = _kill_series(S3_KILLS, tmp_path, url_of, reset, source, old, new)
    assert len(seen) == S3_KILLS
    assert (
        plan_sync(
            "trips", FolderStore(source.open("trips").path), open_store(url_of("k0")).child("trips")
        ).state
        is SyncState.UP_TO_DATE
    )
