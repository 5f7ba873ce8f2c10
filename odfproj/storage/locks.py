"""Advisory inter-process locks on lock files, with the holder's pid written inside.

``fcntl.flock`` is used because the kernel releases it when the holder dies, even by SIGKILL: a
crashed writer can never leave a dataset locked forever, so there is no stale-lock breaking logic
to get wrong. The holder writes ``{"pid", "purpose", "started"}`` into the file so a blocked user
learns *who* holds it. Lock files are never deleted: unlinking a lock file lets two processes lock
two different inodes of the same name.

flock locks belong to an open file description, so a second ``FileLock`` on the same file conflicts
even inside one process: code must not nest a lock it already holds.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from odfproj.errors import StorageError
from odfproj.odf.timestamps import format_rfc3339

#: How often a waiting acquirer retries; short enough to feel immediate, long enough not to spin.
_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class LockHolder:
    """What a lock file says about its holder (fields are ``None`` when unreadable)."""

    pid: int | None = None
    purpose: str | None = None
    started: str | None = None


def read_holder(path: Path) -> LockHolder:
    """Best-effort read of the holder info; a lock file being rewritten may be empty or partial."""
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return LockHolder()
    if not isinstance(data, dict):
        return LockHolder()
    pid = data.get("pid")
    purpose = data.get("purpose")
    started = data.get("started")
    return LockHolder(
        pid=pid if isinstance(pid, int) else None,
        purpose=purpose if isinstance(purpose, str) else None,
        started=started if isinstance(started, str) else None,
    )


def try_lock(fd: int) -> bool:
    """Take an exclusive flock on ``fd`` without waiting; whether it was free."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def file_lock(
    path: Path,
    *,
    purpose: str,
    timeout: float | None = None,
    busy: Callable[[LockHolder], StorageError],
) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the ``with`` block.

    ``timeout=None`` (or 0) fails at once; otherwise wait up to ``timeout`` seconds. On failure the
    exception built by ``busy(holder)`` is raised, so each lock words its own message.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + (timeout or 0.0)
        while not try_lock(fd):
            if time.monotonic() >= deadline:
                raise busy(read_holder(path))
            time.sleep(_POLL_SECONDS)
        started = format_rfc3339(datetime.now(UTC).replace(microsecond=0))
        info = {"pid": os.getpid(), "purpose": purpose, "started": started}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield
        finally:
            # Clear the holder info before the lock drops, so nobody is told a dead pid holds it.
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
