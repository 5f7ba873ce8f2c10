"""The key store: every primary key that currently has a valid row, and that row's offset.

Opal keeps this in RocksDB; here it is three sorted, aligned columns - ``hashes`` (uint64), ``rows``
(int64 offsets) and the normalised key values (an Arrow table) - so a million keys cost ~16 bytes each
plus the key values, with no Python object per key. Lookups are a vectorised ``searchsorted`` on the
hashes followed by an exact comparison of key values; equal hashes of different keys (collisions) sit
next to each other and are resolved by scanning that short run, so a collision costs time, never a
wrong answer.

A key with no valid row (retracted) is removed, so the store only ever holds the current state. This is
one partition: :mod:`odfproj.state.key_partitions` cuts a large store by hash range and keeps it on disk. An
update is one merge of the sorted arrays: O(n + m log m) for n stored keys and m changed keys, which is
flat in the length of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from odfproj.state.errors import StateIndexError
from odfproj.state.keys import keys_equal

ABSENT = -1


@dataclass(frozen=True)
class KeyChanges:
    """What one block does to the key store, already reduced to one final outcome per touched key.

    ``positions``: each touched key's position in the store before the block, or ``ABSENT``.
    ``new_rows``: the key's new current row, or ``ABSENT`` when the block leaves it without one.
    """

    hashes: np.ndarray
    keys: pa.Table
    positions: np.ndarray
    new_rows: np.ndarray


class KeyStore:
    """Primary key -> offset of the key's last valid row; mutable, owned by one :class:`StateIndex`."""

    def __init__(
        self,
        key_columns: Sequence[str],
        schema: pa.Schema | None = None,
        hashes: np.ndarray | None = None,
        rows: np.ndarray | None = None,
        keys: pa.Table | None = None,
    ) -> None:
        self.key_columns = tuple(key_columns)
        if not self.key_columns:
            raise StateIndexError("a state index needs at least one primary key column")
        #: Normalised key schema; ``None`` until the first keys are seen (types come from the data).
        self.schema = schema
        self.hashes = hashes if hashes is not None else np.zeros(0, np.uint64)
        self.rows = rows if rows is not None else np.zeros(0, np.int64)
        self.keys = keys
        if len(self.hashes) != len(self.rows) or (keys is not None and keys.num_rows != len(self.rows)):
            raise StateIndexError("key store columns differ in length")

    def __len__(self) -> int:
        return len(self.hashes)

    def lookup(self, hashes: np.ndarray, keys: pa.Table) -> np.ndarray:
        """Position in the store of each given key (normalised, with its hash), or ``ABSENT``."""
        n = len(self.hashes)
        result = np.full(len(hashes), ABSENT, np.int64)
        if n == 0 or len(hashes) == 0:
            return result
        position = np.searchsorted(self.hashes, hashes, side="left")
        hit = np.nonzero((position < n) & (self.hashes[np.minimum(position, n - 1)] == hashes))[0]
        if hit.size == 0:
            return result
        assert self.keys is not None
        candidate = position[hit]
        equal = keys_equal(self.keys.take(candidate), keys.take(hit))
        result[hit[equal]] = candidate[equal]
        for i in hit[~equal]:  # same hash, other key: scan the run of equal hashes
            result[i] = self._scan_run(int(position[i]) + 1, hashes[i], keys.slice(int(i), 1))
        return result

    def _scan_run(self, start: int, h: np.uint64, key: pa.Table) -> int:
        assert self.keys is not None
        j = start
        while j < len(self.hashes) and self.hashes[j] == h:
            if keys_equal(self.keys.slice(j, 1), key)[0]:
                return j
            j += 1
        return ABSENT

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """Current row of each position (``ABSENT`` stays ``ABSENT``)."""
        out = np.full(len(positions), ABSENT, np.int64)
        found = positions != ABSENT
        out[found] = self.rows[positions[found]]
        return out

    def apply(self, changes: KeyChanges) -> None:
        """Set, move or drop each touched key's current row in one merge of the sorted columns."""
        assert self.keys is not None and self.schema is not None
        found = changes.positions != ABSENT
        keep_row = changes.new_rows != ABSENT
        # Keys already stored: overwrite the row in place, or drop the key.
        update = found & keep_row
        self.rows = self.rows.copy()
        self.rows[changes.positions[update]] = changes.new_rows[update]
        keep = np.ones(len(self.hashes), bool)
        keep[changes.positions[found & ~keep_row]] = False
        kept = np.nonzero(keep)[0]
        hashes = self.hashes[kept]
        rows = self.rows[kept]
        # New keys: insert at their sorted positions among the kept ones.
        new = np.nonzero(~found & keep_row)[0]
        order = new[np.argsort(changes.hashes[new], kind="stable")]
        new_hashes = changes.hashes[order]
        at = np.searchsorted(hashes, new_hashes, side="left")
        n_old = len(self.hashes)
        permutation = np.insert(kept, at, n_old + np.arange(len(order)))
        self.hashes = np.insert(hashes, at, new_hashes)
        self.rows = np.insert(rows, at, changes.new_rows[order])
        if len(order) or len(kept) != n_old:
            new_keys = changes.keys.take(order)
            self.keys = pa.concat_tables([self.keys, new_keys]).take(permutation).combine_chunks()
