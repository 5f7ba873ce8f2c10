"""Work folders, and the one cleanup of what a killed writer leaves in a state's folder.

A writer of a state kept beside a chain (the state index, a group state, a join index) writes its
files under new names and replaces the manifest last, so a writer killed at any moment leaves the
old state readable, plus leftovers nobody reads: temporary files (``*.tmp-<txid>``), content files or
versions the manifest never came to name, and the state index's *work folders* (``.work-*``: a key
store's new partitions and spilled changes until a save moves them in). :func:`remove_leftovers` is
the one function every such writer calls to remove them, while it holds the lock that serialises the
writers of that folder.

A work folder is made by an *update* of the index, which readers run too (a reader that finds the
index behind catches it up), without the index lock: the lock is taken only to save. So the index
lock alone does not tell a dead writer's work folder from a live one. Each work folder therefore
holds its own lock: its owner keeps an ``flock`` on ``.work-*/.owner`` for as long as the folder
lives, and the kernel drops that lock when the owner dies, even by SIGKILL. A cleaner removes a work
folder only after taking that lock itself, so a live writer's folder is never touched, whatever
other lock either of them holds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Collection
from pathlib import Path

from odfproj.storage.locks import try_lock

__all__ = ["WORK_PREFIX", "WorkFolder", "remove_leftovers"]

#: How a work folder's name starts.
WORK_PREFIX = ".work-"
#: The file inside a work folder whose lock its owner holds.
_OWNER = ".owner"
_ATTEMPTS = 8


class WorkFolder:
    """A new folder owned by this process until :meth:`remove` (or the process's death)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def create(cls, parent: Path | None, prefix: str = WORK_PREFIX) -> WorkFolder:
        """A fresh ``<prefix>*`` folder in ``parent`` (the system's temporary folder if ``None``), locked.

        A cleaner may find the folder between its creation and its lock, and take it (it has no
        owner yet): then this owner sees its lock file gone or replaced, and makes another folder.
        """
        for _ in range(_ATTEMPTS):
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
            fd = _claim(path)
            if fd is not None:
                return cls(path, fd)
        raise OSError(f"could not claim a work folder in {parent or tempfile.gettempdir()}")

    def remove(self) -> None:
        """Delete the folder and what it holds, then let go of it (idempotent)."""
        if self._fd is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._fd)
        self._fd = None


def _claim(folder: Path) -> int | None:
    """A descriptor holding the lock of ``folder``'s owner file, or ``None`` if someone else holds it.

    The lock counts only if the file locked is still the folder's owner file afterwards: a cleaner
    unlinks it (with the folder) while holding its lock, so a descriptor opened just before that
    would otherwise hold the lock of a file nobody can find any more.
    """
    owner = folder / _OWNER
    try:
        fd = os.open(owner, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # the folder is gone (a cleaner removed it), or is not a folder
        return None
    try:
        if try_lock(fd) and os.path.samestat(os.fstat(fd), os.stat(owner)):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def remove_leftovers(directory: Path, keep: Collection[str]) -> list[Path]:
    """Remove every entry of ``directory`` not named in ``keep``, except live work folders.

    The caller holds the lock that serialises the writers of ``directory`` (the files outside work
    folders are written only under it), so what is not in ``keep`` (what the manifest names, the
    lock file) is garbage: a temporary file, an unreferenced content file or version, a dead
    writer's work folder. A work folder is removed only once its owner's lock is taken (see the
    module docstring). Best effort: an entry that cannot be removed is left for the next writer.
    Returns the removed entries.
    """
    removed: list[Path] = []
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return removed
    for path in entries:
        if path.name in keep:
            continue
        is_folder = path.is_dir() and not path.is_symlink()
        if is_folder and path.name.startswith(WORK_PREFIX):
            fd = _claim(path)
            if fd is None:
                continue  # its owner is alive
            try:
                shutil.rmtree(path, ignore_errors=True)
            finally:
                os.close(fd)
        elif is_folder:
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        if not path.exists() and not path.is_symlink():
            removed.append(path)
    return removed
