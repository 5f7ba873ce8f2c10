"""Durable file-system primitives: every on-disk change is built from these few steps.

POSIX gives atomicity only to ``rename``; durability needs ``fsync`` of the file *and* of the
directory whose entry changed, or a power loss may forget the rename. Keeping these steps in one
module makes the commit protocol readable and the crash-safety argument checkable.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

_COPY_CHUNK = 1 << 20


def new_txid() -> str:
    """A random id for temporary names; unique enough that two writers never collide."""
    return secrets.token_hex(8)


def fsync_file(path: Path) -> None:
    """Flush a file's content to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries, making the renames and creations in it durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Create ``path`` (which must not exist) with ``data`` and fsync it.

    ``O_EXCL`` because every caller writes a fresh, uniquely named file: finding one already there
    means a logic error or a collision we must not silently overwrite.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_durable(source: Path, target: Path, observe: Callable[[bytes], object] | None = None) -> None:
    """Copy ``source`` to a new file ``target`` and fsync it (the source may be on another device).

    ``observe`` sees every piece written, in order (e.g. a hash of exactly the bytes the copy holds,
    computed in the same pass).
    """
    with open(source, "rb") as src, open(target, "xb") as dst:
        if observe is None:
            shutil.copyfileobj(src, dst, _COPY_CHUNK)
        else:
            while piece := src.read(_COPY_CHUNK):
                observe(piece)
                dst.write(piece)
        dst.flush()
        os.fsync(dst.fileno())


def replace_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new content, never a mix.

    ``durable=False`` skips the fsyncs, for caches whose loss only costs recomputation.
    """
    tmp = path.with_name(f"{path.name}.tmp-{new_txid()}")
    try:
        if durable:
            write_durable(tmp, data)
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def remove_tree(path: Path) -> None:
    """Delete a directory tree if it exists; missing entries (another cleaner won) are fine."""
    shutil.rmtree(path, ignore_errors=True)
