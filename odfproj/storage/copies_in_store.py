"""Local files whose very bytes still lie in the workspace's store: moved there, not sent up again.

On a cluster whose executors cannot see the driver's disk, Spark writes a batch's data files into the
store (``engine.exchange``) and the driver takes them down to describe them: both hashes, the offsets,
the count. Sending the same bytes back up at the commit would make every new byte cross the driver
twice. So the exchange remembers where each file it took still lies, and the commit asks the store to
copy it to its content-addressed place there (``ObjectAreas.send_data_ahead``): one request, and
the driver reads the new data once.

A file is known by what identifies its bytes on this machine (device, inode, size, modification time):
a rename keeps it (``engine.slices`` names its files after taking them), a copy or any write does not,
so a remembered copy is used only for the very bytes that were taken. What is remembered lives in this
process only; a copy in the store that is never moved is removed with the exchange's prefix.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from odfproj.storage.object_store import ObjectStore

__all__ = ["CopyInStore", "copy_in_store", "forget", "remember"]


@dataclass(frozen=True)
class CopyInStore:
    """Where the bytes of a local file also lie: ``key`` in ``store``."""

    store: ObjectStore
    key: str


_Identity = tuple[int, int, int, int]
_KNOWN: dict[_Identity, CopyInStore] = {}
_LOCK = threading.Lock()


def _identity(path: Path) -> _Identity | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def remember(path: Path, copy: CopyInStore) -> None:
    """``path`` holds the bytes ``copy`` names (it was just taken from there)."""
    found = _identity(path)
    if found is not None:
        with _LOCK:
            _KNOWN[found] = copy


def copy_in_store(path: Path) -> CopyInStore | None:
    """The copy of ``path``'s bytes in a store, if this process took them from there and the file is as it
    was; else ``None``."""
    found = _identity(path)
    if found is None:
        return None
    with _LOCK:
        return _KNOWN.get(found)


def forget(path: Path) -> None:
    """Drop what is remembered of ``path`` (its copy was moved or removed)."""
    found = _identity(path)
    if found is not None:
        with _LOCK:
            _KNOWN.pop(found, None)
