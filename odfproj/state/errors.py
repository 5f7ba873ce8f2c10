"""Errors of the state index.

The index is a cache derived from the chain, so almost every problem with it is handled by rebuilding
it; only problems with the *data* (a key column that is missing, an unknown op, a block hash the chain
does not hold) reach the user, as :class:`StateIndexError`.
"""

from __future__ import annotations

from odfproj.errors import OdfprojError


class StateIndexError(OdfprojError):
    """The state index cannot be built or queried from this data."""


class CorruptIndexError(StateIndexError):
    """A stored index is unreadable, incomplete or inconsistent; callers rebuild it, never trust it."""


class DataReadError(OdfprojError):
    """A dataset's records cannot be read as asked (a block not in its chain, no data schema yet)."""
