"""The storage layer's errors: each one a :class:`StorageError` with a one-line message for users.

Separate classes let callers react to the cases that need a different response (retry a locked
dataset, re-plan after the head moved) without parsing messages.
"""

from __future__ import annotations

from odfproj.errors import StorageError

__all__ = [
    "ChainInvariantError",
    "DatasetExistsError",
    "DatasetLockedError",
    "DatasetNotFoundError",
    "HeadMovedError",
    "IntegrityError",
    "LockedError",
    "ReadOnlyRemoteError",
    "RemoteError",
    "StorageError",
    "WorkspaceLockedError",
]


class DatasetNotFoundError(StorageError):
    """No dataset of that name exists in the workspace."""


class DatasetExistsError(StorageError):
    """A dataset of that name (compared case-insensitively) already exists."""


class LockedError(StorageError):
    """A lock is held by another process; carries the holder's pid when it could be read."""

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class DatasetLockedError(LockedError):
    """Another process is writing to the dataset."""


class WorkspaceLockedError(LockedError):
    """Another process (usually ``odfproj apply``) holds the workspace lock."""


class ChainInvariantError(StorageError):
    """A block would break an invariant of the metadata chain; nothing was written."""


class HeadMovedError(StorageError):
    """Compare-and-swap failed: the dataset's head is not the one the caller (a plan) expected."""


class IntegrityError(StorageError):
    """A stored object (block, data file, checkpoint, ref) does not match what refers to it."""


class RemoteError(StorageError):
    """An object store (a remote workspace, a repository) cannot be reached, refuses us, or holds
    something unexpected."""


class ReadOnlyRemoteError(RemoteError):
    """A write was asked of a store that can only be read (an ``http(s)://`` repository)."""
