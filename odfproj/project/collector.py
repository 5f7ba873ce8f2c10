"""Fewer runs of Python's cyclic garbage collector while a command builds a large project's objects.

Loading 10,000 manifests and chains from the caches builds a few hundred thousand objects (snapshots,
events, views, paths) that live until the command ends and form no reference cycles. With the default
thresholds (700 allocations) the collector runs about a thousand young collections, ninety middle and
seven full ones over them, and finds nothing: 1 to 1.4 s of a 10,000-manifest ``plan``'s 3.7 s
(``gc.callbacks``, bench/README.md). A larger young generation, as mypy sets for its build, leaves
them alone; garbage that does form cycles is still collected, only less often.

The thresholds are the process's, so the previous ones are put back when the work ends (nested uses
are harmless). Not ``gc.freeze``: ``watch`` plans again and again in one process, and frozen objects
would never be examined again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BULK_THRESHOLDS", "fewer_collections"]

#: The young generation's size and how many collections of each generation trigger the next (mypy's).
BULK_THRESHOLDS = (200_000, 30, 30)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with the collector's thresholds raised to ``BULK_THRESHOLDS`` (never lowered; a
    young threshold of 0, automatic collection turned off, stays off)."""
    previous = gc.get_threshold()
    if previous[0] != 0:
        gc.set_threshold(*(max(old, new) for old, new in zip(previous, BULK_THRESHOLDS, strict=True)))
    try:
        yield
    finally:
        gc.set_threshold(*previous)
