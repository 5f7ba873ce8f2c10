"""Fewer runs of Python's cyclic garbage collector while a command builds a large project's objects.

Loading 10,000 manifests and chains from the caches builds a few hundred thousand objects (snapshots,
events, views, paths) that live until the command ends and form no reference cycles. With the default
thresholds (700, 10, 10) the collector ran about a thousand young collections, ninety middle and seven
full ones over them, and found nothing: 1 to 1.4 s of a 10,000-manifest ``plan``'s 3.7 s
(``gc.callbacks``, bench/README.md). The middle and full ones cost that: each walks everything the
command has built so far.

So the body keeps the young generation at its default size and collects the older ones rarely:
``BULK_THRESHOLDS``. A young collection walks only the objects allocated since the last one (700),
which are still in the CPU's cache; it is the cheap one. mypy's thresholds (a young generation of
200,000, used here before) collect as seldom but walk 200,000 objects at a time, most of them already
out of the cache: on a warm 10,000-manifest plan, five or six such collections took 0.10 to 0.18 s, and
918 young collections of the default size take 0.03 to 0.04 s, with no middle or full collection in
either (``gc.callbacks``, the same runs). Garbage that forms cycles is still collected: at once when it
is young, at the next middle collection when it was still alive at its first.

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

#: The young generation's size (CPython's default: small enough to stay in the CPU's cache), and how many
#: collections of each generation trigger one of the next: a middle collection every thousand young
#: ones (700,000 new objects) instead of every ten, a full one every thirty middle ones.
BULK_THRESHOLDS = (700, 1000, 30)


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
