"""Errors of remote stores and of syncing with them; each is one line naming the remote."""

from __future__ import annotations

from odfproj.errors import StorageError


class RemoteError(StorageError):
    """A remote store cannot be reached, refuses us, or holds something unexpected."""


class ReadOnlyRemoteError(RemoteError):
    """A write was asked of a store that can only be read (an ``http(s)://`` repository)."""


class DivergedError(RemoteError):
    """The two sides' chains each have blocks the other lacks: syncing would lose one side's history."""


class RemoteHeadMovedError(RemoteError):
    """Someone else moved the destination's head between our read and our compare-and-swap."""
