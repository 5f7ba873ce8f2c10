"""Ctrl-C for commands that write: the first asks them to stop cleanly, the second stops them at once.

Python's default turns SIGINT into a ``KeyboardInterrupt`` wherever the main thread happens to be,
which can be half-way through a Spark call or between a commit and its bookkeeping. Commands that
write install :func:`graceful_interrupt` instead: the first Ctrl-C only sets an event the lower
layers poll between units of work (datasets, plan steps) and calls ``on_first`` to tell the user;
the second raises ``KeyboardInterrupt`` as usual. Every commit is atomic, so stopping at once
still leaves each dataset valid; :func:`odfproj.cli.main.main` then ends the process (exit 130)
without waiting for worker threads.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odfproj.engine.session import SparkSessionHolder

#: What the first Ctrl-C prints when the command has nothing more specific to say.
SECOND_PRESS = "press Ctrl-C again to stop at once"


@contextmanager
def graceful_interrupt(on_first: Callable[[], None] | None = None) -> Iterator[threading.Event]:
    """Within the block, the first SIGINT sets the yielded event and the second raises KeyboardInterrupt.

    ``on_first`` runs inside the signal handler (on the main thread, between two bytecodes), so it
    must be quick and must not wait for locks the main thread may hold. Outside the main thread
    (tests, embedding) signals cannot be handled: the event is yielded and never set by a signal.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        if on_first is not None:
            on_first()

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def say(message: str) -> None:
    """One line on stderr from a signal handler; never raises (stderr may be mid-write or closed)."""
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, RuntimeError):
        pass


@contextmanager
def stopped_after(holder: SparkSessionHolder) -> Iterator[None]:
    """Stop the Spark session after the block, except when it ends by KeyboardInterrupt.

    Stopping a session waits for its running jobs; after a second Ctrl-C the process ends at once
    instead, and the JVM with it (PySpark's gateway exits when its stdin pipe closes).
    """
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException:
        holder.stop()
        raise
    holder.stop()
