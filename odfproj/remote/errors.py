"""Errors of syncing with remote stores; each is one line naming the remote.

The stores' own errors (:class:`RemoteError`, :class:`ReadOnlyRemoteError`) live with the stores in
:mod:`odfproj.storage.errors`.
"""

from __future__ import annotations

from odfproj.storage.errors import RemoteError


class DivergedError(RemoteError):
    """The two sides' chains each have blocks the other lacks: syncing would lose one side's history."""


class RemoteHeadMovedError(RemoteError):
    """Someone else moved the destination's head between our read and our compare-and-swap."""
