"""Fewer runs of Python's cyclic garbage collector while a command builds a large project's objects.

Loading 10,000 manifests and chains from the caches builds a few hundred thousand objects (snapshots,
events, views, paths) that live until the command ends and form no reference cycles. With the default
thresholds (700 allocations) the collector runs about a thousand young collections, ninety middle and
seven full ones over them, and finds nothing: 1 to 1.4 s of a 10,000-manifest ``plan``'s 3.7 s
(``gc.callbacks``, bench/README.md). A larger young generation, as mypy sets for its build, leaves
them alone; garbage that does form cycles is still collected, only less often.

The thresholds are the process's, and threads share them (a warm engine's server plans several runs at
once): the first body to start raises them and the last to end puts the previous ones back, so one
thread's end never lowers them under another's work, nor leaves them raised. Not ``gc.freeze``: ``watch``
plans again and again in one process, and frozen objects would never be examined again.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BULK_THRESHOLDS", "fewer_collections"]

#: The young generation's size and how many collections of each generation trigger the next (mypy's).
BULK_THRESHOLDS = (200_000, 30, 30)


_lock = threading.Lock()
_inside = 0  # bodies running now, in any thread
_saved: tuple[int, ...] = ()  # the thresholds before the first of them


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with the collector's thresholds raised to ``BULK_THRESHOLDS`` (never lowered; a
    young threshold of 0, automatic collection turned off, stays off)."""
    global _inside, _saved
    with _lock:
        if _inside == 0:
            _saved = gc.get_threshold()
            if _saved[0] != 0:
                gc.set_threshold(*(max(old, new) for old, new in zip(_saved, BULK_THRESHOLDS, strict=True)))
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                gc.set_threshold(*_saved)
