"""The validity log: per block, which rows became valid and which stopped being valid.

Opal logs SET_VALID_FROM / SET_VALID_UNTIL per change; in ODF a block is the natural log batch, so an
entry holds the *net* effect of one block as two bitmaps of offsets:

* ``valid_from``: rows of this block (``+A``/``+C``) still current at the end of the block;
* ``valid_until``: rows of earlier blocks this block superseded (``+A``/``+C`` of the same key) or
  took back (``-R``/``-C``), i.e. the row ids the key store held for the touched keys.

The two sets are disjoint (new offsets vs old offsets), so an entry can be applied in either
direction: forward ``S_k = (S_{k-1} - until_k) | from_k`` and backward
``S_{k-1} = (S_k - from_k) | until_k``. A base bitmap is kept every ``base_interval`` blocks; the state
as at any block is then replayed from the nearest base (or from the current state), before or after it:
at most ``base_interval / 2`` entries whatever the length of the history.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
from pyroaring import BitMap64, FrozenBitMap64

from odfproj.odf.multiformats import Multihash
from odfproj.state.errors import StateIndexError

DEFAULT_BASE_INTERVAL = 64
EMPTY = FrozenBitMap64()


def to_bitmap(offsets: np.ndarray) -> FrozenBitMap64:
    """A frozen bitmap of int64 offsets, through the buffer protocol (no Python int per offset)."""
    if offsets.size == 0:
        return EMPTY
    return FrozenBitMap64(memoryview(np.ascontiguousarray(offsets, dtype=np.uint64)).cast("B").cast("Q"))


@dataclass(frozen=True)
class LogEntry:
    """The validity changes of one metadata block (empty bitmaps for blocks without data)."""

    sequence_number: int
    block_hash: Multihash
    #: The block's system time, microseconds since the epoch (UTC).
    system_time_us: int
    valid_from: FrozenBitMap64
    valid_until: FrozenBitMap64


class SegmentedEntries(Sequence[LogEntry]):
    """The log's entries in segments of ``size``, each decoded from its stored form when first read.

    A stored index of 10,000 blocks has 157 segments; a read of the state now or as at one point
    needs at most one or two of them, so loading decodes none (see :mod:`odfproj.state.persistence`).
    """

    def __init__(
        self, size: int, stored: Sequence[Callable[[], list[LogEntry]]] = (), count: int = 0
    ) -> None:
        self._size = size
        self._segments: list[list[LogEntry] | Callable[[], list[LogEntry]]] = list(stored)
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> LogEntry: ...
    @overload
    def __getitem__(self, i: slice) -> list[LogEntry]: ...
    def __getitem__(self, i: int | slice) -> LogEntry | list[LogEntry]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(i)
        return self._segment(i // self._size)[i % self._size]

    def _segment(self, k: int) -> list[LogEntry]:
        segment = self._segments[k]
        if callable(segment):
            segment = self._segments[k] = segment()
        return segment

    def append(self, entry: LogEntry) -> None:
        if self._count % self._size == 0:
            self._segments.append([])
        self._segment(len(self._segments) - 1).append(entry)
        self._count += 1


class ValidityLog:
    """Every block's :class:`LogEntry` in chain order, plus the base bitmaps."""

    def __init__(self, base_interval: int = DEFAULT_BASE_INTERVAL) -> None:
        if base_interval < 1:
            raise StateIndexError("the base bitmap interval must be at least 1 block")
        self.base_interval = base_interval
        self.entries = SegmentedEntries(base_interval)
        #: State after block ``i`` for every ``i`` with ``(i + 1) % base_interval == 0``.
        self.bases: dict[int, FrozenBitMap64] = {}
        self._times: list[int] = []
        #: Each block's hash as multibase text (no hash object per entry to build on load), and the
        #: sequence number by hash, built from them when :meth:`index_of` is first asked.
        self._hashes: list[str] = []
        self._by_hash: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def is_base_block(self, sequence_number: int) -> bool:
        return (sequence_number + 1) % self.base_interval == 0

    def append(self, entry: LogEntry, state_after: BitMap64 | FrozenBitMap64) -> None:
        """Add the next block's entry; ``state_after`` is the valid set after it (kept if a base is due)."""
        if entry.sequence_number != len(self.entries):
            raise StateIndexError(
                f"block {entry.sequence_number} given to the state index, expected block {len(self.entries)}"
            )
        if self._times and entry.system_time_us < self._times[-1]:
            raise StateIndexError(f"block {entry.sequence_number} has a system time earlier than its parent")
        self.entries.append(entry)
        self._times.append(entry.system_time_us)
        self._hashes.append(entry.block_hash.to_multibase())
        if self.is_base_block(entry.sequence_number):
            self.bases[entry.sequence_number] = FrozenBitMap64(state_after)

    def restore(
        self,
        segments: Sequence[Callable[[], list[LogEntry]]],
        times: list[int],
        hashes: list[str],
        bases: dict[int, FrozenBitMap64],
    ) -> None:
        """Replace the content with stored segments (decoded when read), each block's system time and
        hash (multibase), and the bases; all checked by the loader."""
        self.entries = SegmentedEntries(self.base_interval, segments, len(times))
        self.bases = dict(bases)
        self._times = list(times)
        self._hashes = list(hashes)
        self._by_hash = {}  # built by index_of when first asked: a read of the state now never asks

    def index_of(self, block_hash: Multihash) -> int:
        if len(self._by_hash) != len(self._hashes):
            self._by_hash = {text: i for i, text in enumerate(self._hashes)}
        try:
            return self._by_hash[block_hash.to_multibase()]
        except KeyError:
            raise StateIndexError(
                f"block {block_hash.to_multibase()} is not in the dataset's chain"
            ) from None

    def last_index_at(self, system_time_us: int) -> int:
        """The last block whose system time is at or before the given time (-1 before the first)."""
        return bisect.bisect_right(self._times, system_time_us) - 1

    def state_after(self, k: int, current: BitMap64 | FrozenBitMap64) -> BitMap64:
        """Valid offsets after block ``k`` (``-1``: before any block), from the nearest checkpoint."""
        last = len(self.entries) - 1
        if not -1 <= k <= last:
            raise StateIndexError(f"block {k} is outside the index (0..{last})")
        before = k - (k + 1) % self.base_interval  # largest base index <= k, or -1
        after = k + (self.base_interval - 1 - k % self.base_interval) if k >= 0 else self.base_interval - 1
        if after > last:
            after = last  # the current state acts as the last checkpoint
        if k - before <= after - k:
            state = BitMap64(self.bases[before]) if before >= 0 else BitMap64()
            for j in range(before + 1, k + 1):
                entry = self.entries[j]
                state.difference_update(entry.valid_until)
                state.update(entry.valid_from)
            return state
        state = BitMap64(self.bases[after] if after != last else current)
        for j in range(after, k, -1):
            entry = self.entries[j]
            state.difference_update(entry.valid_from)
            state.update(entry.valid_until)
        return state
