"""Temporary folders for downloads and prepared files that a killed process cannot leave behind for good.

An ingest downloads into ``<tmp>/odfproj-ingest-<random>/`` and removes it when done; a process
killed by SIGKILL (or a power cut) leaves it, partial download included. So each new folder is
claimed with ``flock`` on the folder itself for as long as its owner lives, and every new claim
first removes the folders of the same prefix that nobody holds: their owner is dead, since the
kernel drops a dead process's locks. A live process's folder is always locked, so it is never
touched, without pid files that a reused pid could fool.

A new folder is created, then locked; a sweeper may lock and remove it in between. The creator
therefore checks, once locked, that the path still names the folder it locked, and starts over if
not.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from odfproj.storage.locks import try_lock

__all__ = ["INGEST_PREFIX", "remove_abandoned", "scratch_folder"]

#: Prefix of the temporary folder of one polling ingest.
INGEST_PREFIX = "odfproj-ingest-"

_ATTEMPTS = 100


@contextmanager
def scratch_folder(prefix: str = INGEST_PREFIX, parent: Path | None = None) -> Iterator[Path]:
    """A new folder ``<parent>/<prefix><random>`` held for the ``with`` block, then removed.

    ``parent`` defaults to the system's temporary folder. Abandoned folders of the same prefix
    there are removed first.
    """
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    remove_abandoned(where, prefix)
    path, fd = _claim_new(where, prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)  # the lock goes with the descriptor, after the folder is gone


def remove_abandoned(parent: Path, prefix: str) -> list[Path]:
    """Remove the folders ``<parent>/<prefix>*`` that no live process holds; return them."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if try_lock(fd) and _same_folder(entry.path, fd):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
        finally:
            os.close(fd)
    return removed


def _claim_new(parent: Path, prefix: str) -> tuple[Path, int]:
    for _ in range(_ATTEMPTS):
        path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue  # a sweeper took it before we could lock it
        if try_lock(fd) and _same_folder(path, fd):
            return Path(path), fd
        os.close(fd)
        with suppress(OSError):
            os.rmdir(path)
    raise OSError(f"cannot claim a temporary folder in {parent}")  # pragma: no cover - 100 lost races


def _same_folder(path: str, fd: int) -> bool:
    """Whether ``path`` still names the folder open as ``fd`` (not removed, not replaced)."""
    try:
        on_disk = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)
