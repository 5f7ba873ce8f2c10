"""Preview environments of a remote workspace: ``envs/<name>/`` in the store, mirrored into the cache.

A remote workspace is worked on through a local cache (``remote.workspace``); an environment of it is
too. The store holds exactly what an environment on disk holds (``storage.env_record``): ``env.json``,
each dataset's ``refs/head``, and only the objects the environment wrote. Production's objects are
never copied into an environment's prefix: in the cache, an environment's datasets read them from
the cache's production folders, as on disk.

- :func:`checkout_environment` mirrors the prefix down: ``env.json`` and every head always, objects
  the cache lacks (each checked against the hash that names it), and removes what the store no longer
  has (a refresh on another runner reset a dataset).
- :func:`commit_environment` mirrors the cache's environment up: new objects first, then the heads,
  then ``env.json`` last, and removes the objects of datasets a refresh reset. It writes only under
  ``envs/<name>/``; production's prefix is never written by a command run in an environment.

Writers hold the environment's own remote lock (``envs/<name>/.lock``), never production's, so a
preview does not wait for a production run; publish holds both.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from odfproj.odf.flatbuffers_codec import block_hash
from odfproj.odf.multiformats import Multihash
from odfproj.storage.env_record import RECORD_FILE, EnvironmentRecord, PreviewEnvironmentError
from odfproj.storage.errors import RemoteError
from odfproj.storage.fsutil import remove_tree, replace_atomic
from odfproj.storage.object_store import ObjectStore
from odfproj.storage.physical_hash import PHYSICAL_HASH_CODEC, physical_hasher
from odfproj.workspace_paths import ENVS_DIR, check_environment_name

if TYPE_CHECKING:
    from odfproj.storage.workspace import Workspace

__all__ = [
    "checkout_environment",
    "commit_environment",
    "destroy_remote_environment",
    "environment_store",
    "environment_synced",
    "remote_environments",
]

#: The sub-folders of a dataset whose files are content-addressed objects.
_OBJECT_FOLDERS = ("blocks", "data", "checkpoints")


def environment_store(store: ObjectStore, name: str) -> ObjectStore:
    """The prefix of environment ``name`` in a remote workspace's store."""
    return store.child(f"{ENVS_DIR}/{check_environment_name(name)}")


def remote_environments(store: ObjectStore) -> list[EnvironmentRecord]:
    """Every environment the store holds (those with an ``env.json``), by name."""
    records = []
    for key in sorted(store.child(ENVS_DIR).list()):
        if key.count("/") == 1 and key.endswith(f"/{RECORD_FILE}"):
            data = store.child(ENVS_DIR).get(key)
            if data is not None:
                records.append(EnvironmentRecord.from_bytes(data))
    return records


def checkout_environment(store: ObjectStore, cache: Path, name: str) -> bool:
    """Bring the cache's ``envs/<name>/`` up to the store's; False (and nothing changed) if the store has none."""
    remote = environment_store(store, name)
    record = remote.get(RECORD_FILE)
    if record is None:
        return False
    local = Path(cache) / ENVS_DIR / name
    keys = set(remote.list())
    heads = {k for k in keys if _is_head(k)}
    datasets = {k.split("/")[1] for k in heads}
    if (local / "datasets").is_dir():
        for folder in (local / "datasets").iterdir():
            if folder.name not in datasets:
                remove_tree(folder)  # gone from the environment since (destroyed or never there)
    for key in sorted(keys):
        if _is_object(key):
            target = local / key
            if not target.exists():
                _download_checked(remote, key, target)
    for dataset in datasets:  # objects the store no longer has: a refresh elsewhere reset the dataset
        for stale in _local_objects(local / "datasets" / dataset):
            if str(stale.relative_to(local)) not in keys:
                stale.unlink()
    for key in heads:
        data = remote.get(key)
        if data is not None:
            _write(local / key, data)
    _write(local / RECORD_FILE, record)  # last: the environment is complete once its record is there
    return True


def commit_environment(store: ObjectStore, cache: Path, name: str) -> None:
    """Make the store's ``envs/<name>/`` the cache's: objects, then heads, then ``env.json``."""
    local = Path(cache) / ENVS_DIR / name
    record = (local / RECORD_FILE).read_bytes() if (local / RECORD_FILE).is_file() else None
    if record is None:
        return
    remote = environment_store(store, name)
    if remote.read_only:
        raise RemoteError(f"{remote} is read-only: cannot save environment {name!r}")
    present = set(remote.list())
    mine: set[str] = set()
    for folder in sorted((local / "datasets").glob("*")):
        for path in _local_objects(folder):
            key = str(path.relative_to(local))
            mine.add(key)
            if key not in present:
                remote.put_file(key, path)
    for folder in sorted((local / "datasets").glob("*")):
        head = folder / "refs" / "head"
        if head.is_file():
            key = str(head.relative_to(local))
            mine.add(key)
            remote.put(key, head.read_bytes())
    for key in present:
        if (_is_object(key) or _is_head(key)) and key not in mine:
            remote.delete(key)  # the objects of a dataset a refresh reset, or of one no longer here
    remote.put(RECORD_FILE, record)


@contextmanager
def environment_synced(
    store: ObjectStore,
    cache: Workspace,
    name: str,
    *,
    writer: str | None,
    production_writer: bool = False,
    missing: Callable[[], Exception] | None = None,
) -> Iterator[None]:
    """Environment ``name`` of the remote workspace ``store``, checked out into ``cache`` with production.

    The one way a command works on a remote environment. ``writer`` is the lock's purpose: a writer
    holds the environment's own lock and commits the environment's prefix when it is done, failed or
    not (what it committed locally, each dataset atomically, is valid and goes up, as for production);
    a reader (``None``) takes no lock and writes nothing. ``production_writer`` (publish, the one
    command that changes production) also locks production and commits it before the environment.
    ``missing``: the error to raise when the store
    has no such environment; without it an absent environment is one the command is about to make.
    """
    from odfproj.remote.workspace import checkout, commit, remote_lock

    with ExitStack() as locks:
        if writer is not None and production_writer:
            locks.enter_context(remote_lock(store, purpose=writer))
        if writer is not None:
            locks.enter_context(remote_lock(environment_store(store, name), purpose=writer))
        checkout(store, cache)  # production: read; written back by publish alone
        if not checkout_environment(store, cache.root, name) and missing is not None:
            raise missing()
        try:
            yield
        finally:
            if writer is not None:
                if production_writer:
                    commit(store, cache)  # objects first, then each head by compare-and-swap
                commit_environment(store, cache.root, name)


def destroy_remote_environment(store: ObjectStore, name: str) -> None:
    """Remove ``envs/<name>/`` from the store: its record first (no longer an environment), then the rest."""
    remote = environment_store(store, name)
    if not remote.exists(RECORD_FILE):
        raise PreviewEnvironmentError(f"environment {name!r} does not exist in {store}")
    remote.delete(RECORD_FILE)
    for key in remote.list():
        if key != ".lock":
            remote.delete(key)


def _is_head(key: str) -> bool:
    parts = key.split("/")
    return len(parts) == 4 and parts[0] == "datasets" and parts[2:] == ["refs", "head"]


def _is_object(key: str) -> bool:
    parts = key.split("/")
    return len(parts) == 4 and parts[0] == "datasets" and parts[2] in _OBJECT_FOLDERS


def _local_objects(folder: Path) -> list[Path]:
    return [p for sub in _OBJECT_FOLDERS for p in sorted((folder / sub).glob("*")) if p.is_file()]


def _download_checked(remote: ObjectStore, key: str, target: Path) -> None:
    """Stream one object into place, checked against the hash in its name before it gets that name."""
    expected = Multihash.from_multibase(key.rsplit("/", 1)[1])
    chunks = remote.open_chunks(key)
    if chunks is None:
        raise RemoteError(f"{remote}: {key} is missing")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".download-", delete=False) as out:
        staged = Path(out.name)
        hasher = physical_hasher()
        for piece in chunks:
            hasher.update(piece)
            out.write(piece)
    try:
        if key.split("/")[2] == "blocks":
            actual = block_hash(staged.read_bytes())
        else:
            actual = Multihash(PHYSICAL_HASH_CODEC, hasher.digest())
        if actual != expected:
            raise RemoteError(f"{remote}: {key} does not match its hash (corrupted or tampered)")
        staged.replace(target)
    finally:
        staged.unlink(missing_ok=True)


def _write(path: Path, data: bytes) -> None:
    """A head or the record, as the store has it: a cache, so replaced without an fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomic(path, data, durable=False)
