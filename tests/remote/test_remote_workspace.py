"""A workspace in an object store: metadata checkout, data on demand, CAS commit, the remote lock."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from odfproj.remote.errors import RemoteHeadMovedError
from odfproj.remote.sync import SyncState, execute_sync, plan_sync
from odfproj.remote.workspace import (
    LOCK_KEY,
    acquire_lock,
    break_lock,
    checkout,
    commit,
    remote_lock,
)
from odfproj.storage.errors import RemoteError, WorkspaceLockedError
from odfproj.storage.object_store import FolderStore, ObjectStore, open_store
from odfproj.storage.slices import data_slices
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main as _cli
from tests.remote.conftest import add_slices, make_workspace


@pytest.fixture(params=["s3", "file"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "s3":
        return open_store(request.getfixturevalue("bucket").replace("/repo", "/ws"))
    return open_store(f"file://{tmp_path / 'remote-ws'}")


def test_checkout_commit_and_data_on_demand(tmp_path: Path, remote: ObjectStore) -> None:
    first = make_workspace(tmp_path / "runner1")
    commit(remote, first)
    # A fresh CI-like cache gets the metadata only; the heads and blocks match, data is fetched on demand.
    cache = Workspace(tmp_path / "runner2")
    [outcome] = checkout(remote, cache)
    assert outcome.state is SyncState.CREATED and outcome.objects == 0
    trips = cache.open("trips")
    assert trips.head() == first.open("trips").head()
    assert not any((trips.path / "data").iterdir())
    # Asking where one slice is fetches that slice, checked, and nothing else; a folder store's objects
    # are opened where they are.
    slices = data_slices(trips)
    assert not any((trips.path / "data").iterdir())  # listing the slices locates none of them
    [second] = [s for s in slices if s.sequence_number == 3]
    assert second.path.read_bytes() == (first.open("trips").path / "data" / second.path.name).read_bytes()
    held = sorted(p.name for p in (trips.path / "data").iterdir())
    assert held == ([] if isinstance(remote, FolderStore) else [second.path.name])
    assert verify_dataset(trips, integrity=True) == []  # fetches (or opens) what it checks
    # The second runner commits; the first checks out and sees it.
    add_slices(trips, tmp_path / "s2", 1)
    [pushed] = commit(remote, cache)
    assert pushed.state is SyncState.UPDATED
    checkout(remote, first)
    first = Workspace(first.root)  # a handle reads the origin once: one opened after the checkout
    assert first.open("trips").head() == trips.head()
    assert verify_dataset(first.open("trips"), integrity=True) == []  # fetches the new slice


def test_a_reader_on_another_host_opens_every_slice_in_the_store(tmp_path: Path, remote: ObjectStore) -> None:
    """``SliceFile.stored_uri``: a slice the store holds is named there and fetched by nobody; one this
    machine wrote and has not committed yet is sent to its place first (checked), so executors that
    cannot see this disk read it in the store, and the commit then finds it sent."""
    first = make_workspace(tmp_path / "runner1", slices=1)
    commit(remote, first)
    cache = Workspace(tmp_path / "runner2")
    checkout(remote, cache)
    trips = cache.open("trips")
    add_slices(trips, tmp_path / "new", 1)  # committed in the cache only
    old, new = sorted(data_slices(trips), key=lambda s: s.sequence_number)
    key = f"datasets/trips/data/{new.data.physical_hash.to_multibase()}"
    assert not remote.exists(key)
    assert old.stored_uri() == remote.spark_uri(
        f"datasets/trips/data/{old.data.physical_hash.to_multibase()}"
    )
    assert not any((trips.path / "data").glob(old.data.physical_hash.to_multibase()))  # nothing fetched
    assert new.stored_uri() == remote.spark_uri(key)
    assert remote.get(key) == (trips.path / "data" / new.data.physical_hash.to_multibase()).read_bytes()
    [pushed] = commit(remote, cache)
    assert pushed.state is SyncState.UPDATED
    local = make_workspace(tmp_path / "local", slices=1)
    assert data_slices(local.open("trips"))[0].stored_uri() is None  # a local workspace has no store


def test_a_damaged_object_in_the_store_is_refused_when_fetched(tmp_path: Path, bucket: str) -> None:
    """An object is checked against its hash before the cache gives it its name: a flipped byte in the
    store is one line naming the store and the object, and the cache keeps no copy of it."""
    import boto3

    remote = open_store(bucket.replace("/repo", "/ws"))
    commit(remote, make_workspace(tmp_path / "a"))
    name, _prefix = bucket.removeprefix("s3://").split("/", 1)
    client = boto3.client("s3")
    listing = client.list_objects_v2(Bucket=name, Prefix="ws/datasets/trips/data/")
    key = sorted(o["Key"] for o in listing["Contents"])[0]
    data = bytearray(client.get_object(Bucket=name, Key=key)["Body"].read())
    data[len(data) // 2] ^= 0x01
    client.put_object(Bucket=name, Key=key, Body=bytes(data))
    victim = Path(key)
    cache = Workspace(tmp_path / "ci")
    checkout(remote, cache)
    with pytest.raises(RemoteError, match=f"{victim.name} does not match its hash"):
        [s.path for s in data_slices(cache.open("trips"))]  # locating them fetches them
    assert not (cache.open("trips").path / "data" / victim.name).exists()
    assert [p.name for p in (cache.open("trips").path / "data").iterdir() if p.name.startswith(".")] == []


def test_a_head_moved_by_another_writer_is_refused_by_compare_and_swap(
    tmp_path: Path, remote: ObjectStore
) -> None:
    a = make_workspace(tmp_path / "a")
    commit(remote, a)
    b = Workspace(tmp_path / "b")
    checkout(remote, b)
    add_slices(a.open("trips"), tmp_path / "sa", 1)
    add_slices(b.open("trips"), tmp_path / "sb", 1)
    target = remote.child("datasets").child("trips")
    plan_a = plan_sync("trips", FolderStore(a.open("trips").path), target)
    plan_b = plan_sync("trips", FolderStore(b.open("trips").path), target)  # both read the same head
    execute_sync(plan_a, FolderStore(a.open("trips").path), target)
    with pytest.raises(RemoteHeadMovedError, match="moved while syncing"):
        execute_sync(plan_b, FolderStore(b.open("trips").path), target)
    assert plan_sync("trips", FolderStore(a.open("trips").path), target).state is SyncState.UP_TO_DATE


def test_the_second_writer_fails_at_once_naming_the_holder(remote: ObjectStore) -> None:
    with remote_lock(remote, purpose="odfproj apply") as held:
        with pytest.raises(WorkspaceLockedError) as refused:
            acquire_lock(remote, purpose="odfproj apply")
        message = str(refused.value)
        assert held.holder in message and held.host in message and held.lock_id in message
        assert f"odfproj unlock {held.lock_id}" in message
        record = json.loads(remote.get(LOCK_KEY) or b"{}")
        assert set(record) >= {"holder", "host", "started", "expires", "lock_id"}
    assert remote.get(LOCK_KEY) is None  # released
    acquire_lock(remote, purpose="next")


def test_an_expired_lock_is_taken_over_and_unlock_breaks_only_the_named_lock(remote: ObjectStore) -> None:
    stale = acquire_lock(remote, purpose="crashed run", ttl=timedelta(seconds=-1))
    fresh = acquire_lock(remote, purpose="odfproj apply")
    with pytest.raises(RemoteError, match="not by lock"):
        break_lock(remote, stale.lock_id)
    assert break_lock(remote, fresh.lock_id).lock_id == fresh.lock_id
    with pytest.raises(RemoteError, match="not locked"):
        break_lock(remote, fresh.lock_id)


def test_cli_unlock(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'ws'}"
    held = acquire_lock(open_store(url), purpose="dead CI job")
    code, out = _cli("unlock", "nope", "--workspace", url)
    assert code == 1 and out.count("\n") == 1 and held.lock_id in out
    code, out = _cli("unlock", held.lock_id, "--workspace", url)
    assert code == 0 and f"unlocked {url}" in out
    assert not (tmp_path / "ws" / LOCK_KEY).exists()


def test_a_flipped_byte_in_a_remote_block_is_caught(tmp_path: Path) -> None:
    remote = open_store(f"file://{tmp_path / 'ws'}")
    commit(remote, make_workspace(tmp_path / "a"))
    victim = sorted((tmp_path / "ws" / "datasets" / "trips" / "blocks").iterdir())[-1]
    data = bytearray(victim.read_bytes())
    data[10] ^= 0x40
    victim.write_bytes(bytes(data))
    with pytest.raises(RemoteError, match="does not match its hash"):
        checkout(remote, Workspace(tmp_path / "ci"))
