"""Derived records of a remote workspace's datasets kept in the store, so a fresh runner need not rebuild them.

A dataset's derived records (``info/<kind>/``: the state index, a grouped derivative's group state, a
join's index, the compacted copy) are rebuilt from the dataset's whole history when missing, which on
a fresh CI runner would mean fetching every data file of that history. So a remote workspace keeps
them beside the dataset in the store, at ``datasets/<name>/info/<kind>/``, and a runner's cache
brings down a kind the first time a command asks for it (``Dataset.derived_dir``).

Every kind has one shape, which is all this module relies on: a ``manifest.json``, the only file
replaced in place, and content files under names never reused (a CRC or a transaction id in each
name), which the manifest names. So a copy moves the content files first and the manifest last, in
both directions: a reader that finds the manifest finds its files. Each kind's reader trusts a
record only when it proves its integrity (sizes, CRCs) and its stamp is a block of the current chain,
and otherwise rebuilds or catches up: a record the store holds at an older head, or none, costs time,
never a wrong answer. A record is exactly as trustworthy as the store that also holds the chain.

``info/.synced-<kind>`` holds the digest of the manifest last brought down or sent up. A manifest
that differs from it was written here since, and is newer than the store's: it is sent up at the next
commit and never overwritten by the store's copy.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from odfproj.storage.fsutil import replace_atomic
from odfproj.storage.object_copy import write_stream
from odfproj.storage.object_store import ObjectStore

__all__ = ["bring_down", "send_up", "send_up_all"]

MANIFEST = "manifest.json"


def bring_down(store: ObjectStore, directory: Path) -> bool:
    """Make ``directory`` the store's copy of the record, unless it holds a newer one; True if it moved.

    One small read when nothing changed (the store's manifest); otherwise a listing and the files
    this folder lacks, the manifest last.
    """
    remote = store.get(MANIFEST)
    if remote is None:
        return False
    local = _read(directory / MANIFEST)
    synced = _synced(directory)
    if local is not None and _digest(local) != synced:
        return False  # written here since the last sync: newer than the store's, sent up at commit
    if local == remote:
        _mark(directory, remote)
        return False
    for key in store.list():
        if key == MANIFEST or _hidden(key):
            continue
        target = directory / key
        if not target.exists():
            _download(store, key, target)
    directory.mkdir(parents=True, exist_ok=True)
    replace_atomic(directory / MANIFEST, remote, durable=False)
    _mark(directory, remote)
    return True


def send_up(directory: Path, store: ObjectStore, lag: Callable[[str], int] | None = None) -> bool:
    """Put the record of ``directory`` into the store if it changed since the last sync; True if it did.

    The content files the store lacks first, then the manifest, then the store's files this folder no
    longer has (retired versions) are removed.

    ``lag(head)``: how many bytes of data a reader catching up from a record at ``head`` would read
    (the data files after it; a head off the chain: as good as infinite). When the store holds a
    record and sending this one would cost more than that, it is not sent: a fresh runner catches the
    store's record up for less than this upload. So what goes up over many updates is bounded by
    twice the data they add (a state index's key store is rewritten by most updates, and is often far
    bigger than one update's data), and what a fresh runner reads to catch up is bounded by the record.
    """
    manifest = _read(directory / MANIFEST)
    if manifest is None or _digest(manifest) == _synced(directory):
        return False
    present = set(store.list())
    files = {path.relative_to(directory).as_posix(): path for path in _files(directory)}
    missing = {key: path for key, path in files.items() if key not in present}
    if lag is not None and MANIFEST in present:
        theirs = _head(store.get(MANIFEST))
        if theirs is not None and sum(p.stat().st_size for p in missing.values()) > lag(theirs):
            return False
    mine = {MANIFEST, *files}
    for key, path in missing.items():
        store.put_file(key, path)
    store.put(MANIFEST, manifest)
    for key in sorted(present - mine):
        store.delete(key)
    _mark(directory, manifest)
    return True


def send_up_all(info_dir: Path, store: ObjectStore, lag: Callable[[str], int] | None = None) -> int:
    """:func:`send_up` for every record kind under a dataset's ``info/``, each into ``store``'s folder of
    the same name; how many were sent."""
    if not info_dir.is_dir():
        return 0
    sent = 0
    for directory in sorted(info_dir.iterdir()):
        if directory.is_dir() and not _hidden(directory.name) and (directory / MANIFEST).is_file():
            sent += send_up(directory, store.child(directory.name), lag)
    return sent


def _head(manifest: bytes | None) -> str | None:
    """The head block a record's manifest says it reflects (every kind records it as ``head``)."""
    if manifest is None:
        return None
    try:
        head = json.loads(manifest).get("head")
    except (ValueError, AttributeError):
        return None
    return head if isinstance(head, str) else None


def _files(directory: Path) -> Iterator[Path]:
    """Every content file of a record, skipping what is private to this machine: locks, work folders
    and temporary files (dot names, ``.tmp-``)."""
    for root, folders, files in os.walk(directory):
        folders[:] = [f for f in folders if not _hidden(f)]
        for name in files:
            if name != MANIFEST and not _hidden(name):
                yield Path(root) / name


def _hidden(key: str) -> bool:
    return any(part.startswith(".") or ".tmp-" in part for part in key.split("/"))


def _download(store: ObjectStore, key: str, target: Path) -> None:
    chunks = store.open_chunks(key)
    if chunks is None:
        return  # removed meanwhile: the record's reader finds the file missing and rebuilds
    write_stream(chunks, target, durable=False)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _marker(directory: Path) -> Path:
    return directory.parent / f".synced-{directory.name}"


def _synced(directory: Path) -> str | None:
    found = _read(_marker(directory))
    return found.decode("ascii", "replace").strip() if found is not None else None


def _mark(directory: Path, manifest: bytes) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    replace_atomic(_marker(directory), _digest(manifest).encode(), durable=False)
