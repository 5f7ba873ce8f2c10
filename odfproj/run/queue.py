"""The scheduler's ready queue: which data steps may start now, driven by the dependency graph.

Each step counts its unfinished upstream steps; finishing a step decrements its readers' counts, and a
reader whose count reaches zero becomes ready. So a completion costs as much as the finished step has
readers, not a rescan of every step (dbt's ``graph/queue.py`` works the same way). Ready steps come out
in plan order, so with one worker a run starts its steps exactly in the plan's order.

Used from one thread (the scheduler's); the workers never touch it.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence

__all__ = ["ReadyQueue"]


class ReadyQueue:
    """Steps named by dataset, in plan (topological) order, each with the steps it waits for."""

    def __init__(self, order: Sequence[str], upstream: Mapping[str, Collection[str]]) -> None:
        """``order`` must list every upstream step before its readers; upstream outside it is ignored."""
        self._position = {name: i for i, name in enumerate(order)}
        self._readers: dict[str, list[str]] = {name: [] for name in order}
        self._waiting: dict[str, int] = {}
        for name in order:
            waits_for = {u for u in upstream.get(name, ()) if u in self._position and u != name}
            self._waiting[name] = len(waits_for)
            for u in waits_for:
                self._readers[u].append(name)
        self._ready = [self._position[n] for n in order if self._waiting[n] == 0]
        heapq.heapify(self._ready)
        self._order = tuple(order)
        #: Steps not yet handed out and not dropped (by a failure upstream or a cancel).
        self._pending = set(order)

    def __bool__(self) -> bool:
        """True while some step is ready to start."""
        return bool(self._ready)

    @property
    def pending(self) -> tuple[str, ...]:
        """Steps neither started nor dropped, in plan order."""
        return tuple(n for n in self._order if n in self._pending)

    def pop(self) -> str:
        """The first ready step in plan order; it counts as started."""
        name = self._order[heapq.heappop(self._ready)]
        self._pending.discard(name)
        return name

    def succeeded(self, name: str) -> None:
        """``name`` finished well: its readers wait for one step fewer."""
        for reader in self._readers[name]:
            self._waiting[reader] -= 1
            if self._waiting[reader] == 0 and reader in self._pending:
                heapq.heappush(self._ready, self._position[reader])

    def failed(self, name: str) -> tuple[str, ...]:
        """``name`` failed: every step downstream of it is dropped; returns them in plan order."""
        dropped: set[str] = set()
        stack = list(self._readers[name])
        while stack:
            reader = stack.pop()
            if reader in self._pending and reader not in dropped:
                dropped.add(reader)
                stack.extend(self._readers[reader])
        self._pending -= dropped
        # A dropped step was never ready: its failed upstream had not finished.
        return tuple(n for n in self._order if n in dropped)

    def cancel(self) -> tuple[str, ...]:
        """Stop handing out steps: drops and returns every pending step, in plan order."""
        dropped = self.pending
        self._pending.clear()
        self._ready.clear()
        return dropped
