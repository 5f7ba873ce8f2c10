"""A workspace kept in an object store (``s3://bucket/prefix`` or ``file://...``), worked on through a cache.

The remote holds the same layout as a workspace on disk (``datasets/<name>/refs/head``, ``blocks/``,
``data/``, ``checkpoints/``); private keys and the workspace's own records stay local. A command
works on a local cache: :func:`checkout` pulls the metadata, and the data files and checkpoints a
command reads are fetched as it reads them, each checked against its hash (``storage.origin``); :func:`commit` uploads data and blocks first and then moves
each dataset's ``refs/head`` by compare-and-swap, so two writers can never interleave and an
interrupted commit leaves every head old or new.

Writers also take the remote lock, an object ``.lock`` created with ``If-None-Match: *`` that records
who holds it (holder, host, pid, start time, expiry): a second writer fails at once naming the
holder. A crashed writer's lock stays until it expires or ``odfproj unlock LOCK_ID`` breaks it;
``plan`` never takes it and needs only read access.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from odfproj.remote.repository import pull, push, repository_datasets
from odfproj.remote.sync import SyncOutcome, objects_of, read_head, walk
from odfproj.storage.chain import append_block
from odfproj.storage.derived_sync import send_up_all
from odfproj.storage.errors import ChainInvariantError, RemoteError, WorkspaceLockedError
from odfproj.storage.object_copy import check_object
from odfproj.storage.object_store import ObjectStore
from odfproj.storage.origin import DATASETS, write_origin
from odfproj.storage.workspace import Workspace

LOCK_KEY = ".lock"
#: How long a lock is honoured without being renewed: longer than any apply, short enough that a
#: crashed runner does not block the team for long (``odfproj unlock`` breaks it sooner).
DEFAULT_LOCK_TTL = timedelta(hours=2)


@dataclass(frozen=True)
class RemoteLock:
    """The content of a remote workspace's ``.lock`` object."""

    lock_id: str
    holder: str
    host: str
    pid: int
    purpose: str
    started: str  # ISO 8601, UTC
    expires: str

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=2).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> RemoteLock:
        try:
            return cls(**json.loads(data))
        except (ValueError, TypeError) as e:
            raise RemoteError(f"the remote workspace lock is unreadable: {e}") from None

    def expired(self, now: datetime) -> bool:
        return datetime.fromisoformat(self.expires) <= now

    def describe(self) -> str:
        return (
            f"{self.holder}@{self.host} (pid {self.pid}, {self.purpose}) since {self.started}, "
            f"expires {self.expires}; lock id {self.lock_id}"
        )


def acquire_lock(store: ObjectStore, *, purpose: str, ttl: timedelta = DEFAULT_LOCK_TTL) -> RemoteLock:
    """Create the lock object; fail at once naming the holder if someone else holds a live one.

    An expired lock is replaced by compare-and-swap against the exact version read, so two writers
    racing to take over an expired lock cannot both win.
    """
    now = datetime.now(UTC).replace(microsecond=0)
    lock = RemoteLock(
        lock_id=uuid.uuid4().hex[:12],
        holder=_user(),
        host=socket.gethostname(),
        pid=os.getpid(),
        purpose=purpose,
        started=now.isoformat(),
        expires=(now + ttl).isoformat(),
    )
    if store.put_if(LOCK_KEY, lock.to_bytes(), version=None):
        return lock
    found = store.get_versioned(LOCK_KEY)
    if found is not None:
        held = RemoteLock.from_bytes(found[0])
        if not held.expired(now):
            raise WorkspaceLockedError(
                f"workspace {store} is locked by {held.describe()}; if that run is dead: odfproj unlock {held.lock_id}"
            )
        if store.put_if(LOCK_KEY, lock.to_bytes(), version=found[1]):
            return lock
    raise WorkspaceLockedError(f"workspace {store}: another writer took the lock just now; try again")


def release_lock(store: ObjectStore, lock: RemoteLock) -> None:
    """Remove the lock if it is still ours (someone may have broken and retaken it meanwhile)."""
    found = store.get(LOCK_KEY)
    if found is not None and RemoteLock.from_bytes(found).lock_id == lock.lock_id:
        store.delete(LOCK_KEY)


def break_lock(store: ObjectStore, lock_id: str) -> RemoteLock:
    """Remove the lock with this id (``odfproj unlock``); the id guards against breaking a newer lock."""
    found = store.get(LOCK_KEY)
    if found is None:
        raise RemoteError(f"workspace {store} is not locked")
    held = RemoteLock.from_bytes(found)
    if held.lock_id != lock_id:
        raise RemoteError(f"workspace {store} is locked by {held.describe()}, not by lock {lock_id}")
    store.delete(LOCK_KEY)
    return held


@contextmanager
def remote_lock(
    store: ObjectStore, *, purpose: str, ttl: timedelta = DEFAULT_LOCK_TTL
) -> Iterator[RemoteLock]:
    lock = acquire_lock(store, purpose=purpose, ttl=ttl)
    try:
        yield lock
    finally:
        release_lock(store, lock)


def checkout(store: ObjectStore, cache: Workspace) -> list[SyncOutcome]:
    """Bring the cache up to the remote: every dataset's blocks and head, no data file or checkpoint.

    The cache records the store as its origin (``storage.origin``), so a data file or checkpoint is
    fetched, checked, the first time a command asks where it is: a command reads exactly the objects it
    opens (a no-op run none, an update the slices and records its steps read).
    """
    write_origin(cache.root, store.url)
    return pull(cache, [], store.child(DATASETS), objects=False)


def commit(store: ObjectStore, cache: Workspace, names: Sequence[str] = ()) -> list[SyncOutcome]:
    """Upload the cache's new objects and blocks, then move each remote head by compare-and-swap, then
    send up the derived records written since the last sync (``storage.derived_sync``).

    A record whose upload would cost more than the data a reader catches the store's copy up with is
    left for a later commit (``derived_sync.send_up``). The records go after the heads: one that lags the store's head is caught up from the new blocks by
    its reader, while one that led it would not be a block of the chain and would be rebuilt.
    """
    outcomes = push(cache, names, store.child(DATASETS))
    for dataset in cache.read_handles():
        if not names or dataset.name in names:
            info = store.child(DATASETS).child(dataset.name).child("info")
            send_up_all(dataset.layout.info_dir, info, dataset.data_bytes_since)
    return outcomes


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def verify_remote(store: ObjectStore, names: Sequence[str] = (), *, integrity: bool = False) -> list[str]:
    """Problems of the datasets as stored remotely, one line each: every block against its hash and its
    chain's rules, and with ``integrity`` every data file and checkpoint against its hash and size.

    Reads the remote itself, not the cache: a byte flipped in a block the cache already holds is found.
    """
    repository = store.child(DATASETS)
    problems: list[str] = []
    for name in names or repository_datasets(repository):
        dataset = repository.child(name)
        try:
            found = read_head(dataset, "the remote")
            if found is None:
                problems.append(f"{dataset}: no dataset {name!r} there")
                continue
            blocks = list(walk(dataset, found[0]))
            projection = None
            for chain_block in reversed(blocks):
                projection = append_block(projection, chain_block.hash, chain_block.block)
        except (RemoteError, ChainInvariantError) as e:
            problems.append(str(e))
            continue
        if integrity:
            for chain_block in blocks:
                for folder, physical, size in objects_of(chain_block.block):
                    try:
                        check_object(dataset, folder, physical, size)
                    except RemoteError as e:
                        problems.append(str(e))
    return problems
