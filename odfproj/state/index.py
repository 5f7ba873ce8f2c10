"""The state index: key store + validity log + the materialised current bitmap, fed block by block.

The index is built from :class:`ChangeBatch` values (one per metadata block, in chain order), so it is
independent of where the records come from: the storage chain (:mod:`odfproj.state.dataset_index`), a
merge that is about to commit, or a test.

Semantics of one block's records, replayed in offset order (the reference projection: the latest
valid row per key):

* ``+A`` and ``+C`` make the row the key's current row (superseding the key's previous row, if any:
  upsert streams are handled too);
* ``-R`` and ``-C`` leave the key without a current row (a retraction of a key that has none is a
  no-op);
* the rows carrying ``-R`` / ``-C`` are never valid themselves: they describe the change.

Each block is reduced to the last record per distinct key (one ``group_by``), so applying a block is
vectorised: O(m log m) for its m records plus one O(n) merge of the key store's sorted columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64, FrozenBitMap64

from odfproj.odf.data_schema import OFFSET, OP, Op
from odfproj.odf.multiformats import Multihash
from odfproj.odf.timestamps import to_utc
from odfproj.state.errors import StateIndexError
from odfproj.state.key_store import ABSENT, KeyChanges, KeyStore
from odfproj.state.keys import hash_keys, keys_equal
from odfproj.state.stored_files import StoredFile
from odfproj.state.validity_log import DEFAULT_BASE_INTERVAL, LogEntry, ValidityLog

_ROW = "__state_index_row"
_EMPTY = FrozenBitMap64()

#: A point in history: the state after a given block, or as known at a system time.
AsAt = Multihash | datetime


@dataclass(frozen=True)
class ChangeBatch:
    """One metadata block as the index sees it.

    ``records`` holds ``offset``, ``op`` and the primary key columns of the block's data slice (any
    other columns are ignored); ``None`` for blocks without data. ``offsets`` is the slice's closed
    offset interval, checked against the records.
    """

    sequence_number: int
    block_hash: Multihash
    system_time: datetime
    offsets: tuple[int, int] | None = None
    records: pa.Table | None = None


def to_microseconds(t: datetime) -> int:
    """A UTC datetime as integer microseconds since the epoch (exact, unlike ``timestamp()``)."""
    delta = to_utc(t) - datetime(1970, 1, 1, tzinfo=to_utc(t).tzinfo)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def to_bitmap(offsets: np.ndarray) -> FrozenBitMap64:
    """A frozen bitmap of int64 offsets, through the buffer protocol (no Python int per offset)."""
    if offsets.size == 0:
        return _EMPTY
    return FrozenBitMap64(memoryview(np.ascontiguousarray(offsets, dtype=np.uint64)).cast("B").cast("Q"))


def bitmap_to_numpy(bitmap: BitMap64 | FrozenBitMap64) -> np.ndarray:
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64).astype(np.int64)


class StateIndex:
    """Opal's metadata for one dataset; mutable, updated only by :func:`update`.

    ``head`` is the hash of the last block applied: the stamp that ties the index to a chain position.
    """

    def __init__(self, key_columns: Sequence[str], base_interval: int = DEFAULT_BASE_INTERVAL) -> None:
        self.key_store = KeyStore(key_columns)
        self.log = ValidityLog(base_interval)
        self.current = BitMap64()
        self.next_offset = 0
        #: Where the index was last loaded from or saved to, and the immutable files already there
        #: (sealed log segments, base bitmaps) by logical name: what a save need not rewrite.
        self.stored_directory: Path | None = None
        self.stored_files: dict[str, StoredFile] = {}

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.key_store.key_columns

    @property
    def block_count(self) -> int:
        return len(self.log)

    @property
    def head(self) -> Multihash | None:
        return self.log.entries[-1].block_hash if self.log.entries else None

    # --- reads ------------------------------------------------------------------------------------

    def current_offsets(self) -> FrozenBitMap64:
        """Offsets of the valid rows at the head (a frozen copy: the index keeps changing)."""
        return FrozenBitMap64(self.current)

    def offsets_after_block(self, sequence_number: int) -> BitMap64:
        """Offsets of the valid rows right after block ``sequence_number`` (-1: none)."""
        return self.log.state_after(sequence_number, self.current)

    def offsets_as_at(self, as_at: AsAt) -> BitMap64:
        """Valid offsets after the given block, or after the last block written at or before a time."""
        if isinstance(as_at, Multihash):
            k = self.log.index_of(as_at)
        elif isinstance(as_at, datetime):
            k = self.log.last_index_at(to_microseconds(as_at))
        else:
            raise StateIndexError(f"as_at must be a block hash or a datetime, not {type(as_at).__name__}")
        return self.offsets_after_block(k)

    def current_rows(self, table: pa.Table) -> np.ndarray:
        """Offset of the current row for each key in ``table`` (``-1`` if none): a Snapshot merge's lookup."""
        return self.key_store.current_rows(table)

    # --- writes -----------------------------------------------------------------------------------

    def apply(self, batch: ChangeBatch) -> None:
        """Fold the next block into the key store, the log and the current bitmap."""
        if batch.sequence_number != self.block_count:
            raise StateIndexError(
                f"block {batch.sequence_number} given to the state index, expected block {self.block_count}"
            )
        valid_from, valid_until = _EMPTY, _EMPTY
        if batch.records is not None and batch.records.num_rows:
            valid_from, valid_until = self._apply_records(batch)
        elif batch.offsets is not None:
            raise StateIndexError(f"block {batch.sequence_number} has an offset interval but no records")
        self.current.difference_update(valid_until)
        self.current.update(valid_from)
        entry = LogEntry(
            sequence_number=batch.sequence_number,
            block_hash=batch.block_hash,
            system_time_us=to_microseconds(batch.system_time),
            valid_from=valid_from,
            valid_until=valid_until,
        )
        self.log.append(entry, self.current)

    def _apply_records(self, batch: ChangeBatch) -> tuple[FrozenBitMap64, FrozenBitMap64]:
        records = batch.records
        assert records is not None
        offsets = _int_column(records, OFFSET, np.int64)
        ops = _int_column(records, OP, np.int32)
        if not np.all(np.diff(offsets) > 0):
            order = np.argsort(offsets, kind="stable")
            records, offsets, ops = records.take(order), offsets[order], ops[order]
        self._check_offsets(batch, offsets)
        if ops.min() < Op.APPEND or ops.max() > Op.CORRECT_TO:
            bad = int(ops[(ops < Op.APPEND) | (ops > Op.CORRECT_TO)][0])
            raise StateIndexError(f"block {batch.sequence_number} has a record with unknown op {bad}")
        keys = self.key_store.normalise(records)
        # The last record of each distinct key decides the key's state after the block.
        row_hashes = hash_keys(keys)
        last = self._last_row_per_key(keys, row_hashes)
        touched = keys.take(last)
        hashes = row_hashes[last]
        positions = self.key_store.lookup(hashes, touched)
        previous = self.key_store.rows_at(positions)
        adds = (ops[last] == Op.APPEND) | (ops[last] == Op.CORRECT_TO)
        new_rows = np.where(adds, offsets[last], ABSENT)
        self.key_store.apply(KeyChanges(hashes, touched, positions, new_rows))
        self.next_offset = int(offsets[-1]) + 1
        return to_bitmap(offsets[last][adds]), to_bitmap(previous[previous != ABSENT])

    def _last_row_per_key(self, keys: pa.Table, hashes: np.ndarray) -> np.ndarray:
        """Row numbers (ascending) of the last record of each distinct key in the block.

        Grouped by hash with numpy; only if two different keys of the block share a hash (which the
        check below proves or rules out) is the exact, slower Arrow ``group_by`` used.
        """
        order = np.lexsort((np.arange(len(hashes)), hashes))
        sorted_hashes = hashes[order]
        starts = np.concatenate(([True], sorted_hashes[1:] != sorted_hashes[:-1]))
        ends = np.concatenate((starts[1:], [True]))
        representative = order[ends][np.cumsum(starts) - 1]
        others = order != representative
        if others.any() and not keys_equal(keys.take(order[others]), keys.take(representative[others])).all():
            numbered = keys.append_column(_ROW, pa.array(np.arange(len(hashes), dtype=np.int64)))
            grouped = numbered.group_by(list(self.key_columns), use_threads=False).aggregate([(_ROW, "max")])
            return np.sort(grouped.column(f"{_ROW}_max").to_numpy())
        return np.sort(order[ends])

    def _check_offsets(self, batch: ChangeBatch, offsets: np.ndarray) -> None:
        expected = (self.next_offset, self.next_offset + len(offsets) - 1)
        actual = (int(offsets[0]), int(offsets[-1]))
        if actual != expected or (batch.offsets is not None and tuple(batch.offsets) != expected):
            raise StateIndexError(
                f"block {batch.sequence_number}: records hold offsets {actual[0]}..{actual[1]}, "
                f"expected the dense interval {expected[0]}..{expected[1]}"
                + (f" (the block says {batch.offsets[0]}..{batch.offsets[1]})" if batch.offsets else "")
            )


def _int_column(table: pa.Table, name: str, dtype: type) -> np.ndarray:
    if name not in table.column_names:
        raise StateIndexError(f"the data has no {name!r} column")
    column = table.column(name)
    if column.null_count:
        raise StateIndexError(f"the {name!r} column holds nulls")
    return pc.cast(column, pa.from_numpy_dtype(dtype)).to_numpy().astype(dtype, copy=False)


def update(index: StateIndex, new_batches: Iterable[ChangeBatch]) -> StateIndex:
    """Append the blocks after ``index.head`` to the index, in chain order; returns the same index.

    Costs O(m log m + n) per block (m records in the block, n keys in the store), independent of how
    many blocks came before.
    """
    for batch in new_batches:
        index.apply(batch)
    return index


def build(
    key_columns: Sequence[str],
    batches: Iterable[ChangeBatch],
    *,
    base_interval: int = DEFAULT_BASE_INTERVAL,
) -> StateIndex:
    """A new index over ``batches`` (the whole chain from the seed)."""
    return update(StateIndex(key_columns, base_interval), batches)
