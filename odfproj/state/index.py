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
vectorised: O(m log m) for its m records plus one O(n) merge of the key store's sorted columns. The key
store is partitioned by hash on disk once it outgrows one partition (:mod:`odfproj.state.key_partitions`),
so the Python memory of an update follows one block and one partition, not the number of keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
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
from odfproj.state.key_partitions import PartitionedKeyStore, PendingChanges
from odfproj.state.key_store import ABSENT
from odfproj.state.keys import hash_keys, keys_equal
from odfproj.state.stored_files import StoredFile
from odfproj.state.validity_log import DEFAULT_BASE_INTERVAL, EMPTY, LogEntry, ValidityLog, to_bitmap

_ROW = "__state_index_row"
_EMPTY = EMPTY

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


def bitmap_to_numpy(bitmap: BitMap64 | FrozenBitMap64) -> np.ndarray:
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64).astype(np.int64)


class StateIndex:
    """Opal's metadata for one dataset; mutable, updated only by :func:`update`.

    ``head`` is the hash of the last block applied: the stamp that ties the index to a chain position.
    """

    def __init__(
        self,
        key_columns: Sequence[str],
        base_interval: int = DEFAULT_BASE_INTERVAL,
        *,
        work_parent: Path | None = None,
    ) -> None:
        self.key_store = PartitionedKeyStore(key_columns, work_parent=work_parent)
        self.log = ValidityLog(base_interval)
        self.current = BitMap64()
        self.next_offset = 0
        #: Where the index was last loaded from or saved to, and the immutable files already there
        #: (sealed log segments, base bitmaps) by logical name: what a save need not rewrite.
        self.stored_directory: Path | None = None
        self.stored_files: dict[str, StoredFile] = {}
        #: Every name in that folder its manifest accounts for: anything else there is a leftover.
        self.stored_names: frozenset[str] = frozenset()

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
        self.apply_all([batch])

    def apply_all(self, batches: Iterable[ChangeBatch]) -> None:
        """Fold the next blocks, in chain order, in two passes over bounded memory.

        Pass 1 reads one block at a time: checks it, reduces it to one change per key and computes
        the rows it makes valid. Pass 2 applies all those changes to the key store partition by
        partition (:mod:`odfproj.state.key_partitions`), which gives the rows each block superseded.
        Only then are the log entries appended: a block refused in pass 1 leaves the index as it was.
        """
        pending = PendingChanges(self.key_store.spill_rows, self.key_store.work_dir)
        try:
            # Only what the log entries need: a block's records are dropped as soon as pass 1 is done with them.
            staged: list[LogEntry] = []
            next_offset = self.next_offset
            last_time = self.log.entries[-1].system_time_us if self.log.entries else None
            for batch in batches:
                expected = self.block_count + len(staged)
                if batch.sequence_number != expected:
                    raise StateIndexError(
                        f"block {batch.sequence_number} given to the state index, expected block {expected}"
                    )
                time = to_microseconds(batch.system_time)
                if last_time is not None and time < last_time:
                    raise StateIndexError(
                        f"block {batch.sequence_number} has a system time earlier than its parent"
                    )
                last_time = time
                valid_from = _EMPTY
                if batch.records is not None and batch.records.num_rows:
                    valid_from, next_offset = self._stage_records(batch, next_offset, pending)
                elif batch.offsets is not None:
                    raise StateIndexError(
                        f"block {batch.sequence_number} has an offset interval but no records"
                    )
                staged.append(LogEntry(batch.sequence_number, batch.block_hash, time, valid_from, _EMPTY))
            if not staged:
                return
            pending.seal()
            until = {entry.sequence_number: BitMap64() for entry in staged}
            self.key_store.apply_pending(pending, until)
        finally:
            pending.close()
        for entry in staged:
            entry = replace(entry, valid_until=FrozenBitMap64(until[entry.sequence_number]))
            self.current.difference_update(entry.valid_until)
            self.current.update(entry.valid_from)
            self.log.append(entry, self.current)
        self.next_offset = next_offset

    def _stage_records(
        self, batch: ChangeBatch, next_offset: int, pending: PendingChanges
    ) -> tuple[FrozenBitMap64, int]:
        """Pass 1 for one block: its changes into ``pending``; the rows it makes valid, the next offset."""
        records = batch.records
        assert records is not None
        offsets = _int_column(records, OFFSET, np.int64)
        ops = _int_column(records, OP, np.int32)
        if not np.all(np.diff(offsets) > 0):
            order = np.argsort(offsets, kind="stable")
            records, offsets, ops = records.take(order), offsets[order], ops[order]
        _check_offsets(batch, offsets, next_offset)
        if ops.min() < Op.APPEND or ops.max() > Op.CORRECT_TO:
            bad = int(ops[(ops < Op.APPEND) | (ops > Op.CORRECT_TO)][0])
            raise StateIndexError(f"block {batch.sequence_number} has a record with unknown op {bad}")
        keys = self.key_store.normalise(records)
        # The last record of each distinct key decides the key's state after the block.
        row_hashes = hash_keys(keys)
        last = self._last_row_per_key(keys, row_hashes)
        adds = (ops[last] == Op.APPEND) | (ops[last] == Op.CORRECT_TO)
        new_rows = np.where(adds, offsets[last], ABSENT)
        pending.add(batch.sequence_number, row_hashes[last], keys.take(last), new_rows)  # in hash order
        return to_bitmap(offsets[last][adds]), int(offsets[-1]) + 1

    def _last_row_per_key(self, keys: pa.Table, hashes: np.ndarray) -> np.ndarray:
        """Row numbers of the last record of each distinct key in the block, in hash order.

        Hash order is the order the pending changes are kept in, so they need no second sort.

        Grouped by hash with numpy; only if two different keys of the block share a hash (which the
        check below proves or rules out) is the exact, slower Arrow ``group_by`` used.
        """
        order = np.argsort(hashes, kind="stable")
        sorted_hashes = hashes[order]
        starts = np.concatenate(([True], sorted_hashes[1:] != sorted_hashes[:-1]))
        ends = np.concatenate((starts[1:], [True]))
        representative = order[ends][np.cumsum(starts) - 1]
        others = order != representative
        if others.any() and not keys_equal(keys.take(order[others]), keys.take(representative[others])).all():
            numbered = keys.append_column(_ROW, pa.array(np.arange(len(hashes), dtype=np.int64)))
            grouped = numbered.group_by(list(self.key_columns), use_threads=False).aggregate([(_ROW, "max")])
            rows = grouped.column(f"{_ROW}_max").to_numpy()
            return rows[np.argsort(hashes[rows], kind="stable")]
        return order[ends]


def _check_offsets(batch: ChangeBatch, offsets: np.ndarray, next_offset: int) -> None:
    expected = (next_offset, next_offset + len(offsets) - 1)
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
    index.apply_all(new_batches)
    return index


def build(
    key_columns: Sequence[str],
    batches: Iterable[ChangeBatch],
    *,
    base_interval: int = DEFAULT_BASE_INTERVAL,
) -> StateIndex:
    """A new index over ``batches`` (the whole chain from the seed)."""
    return update(StateIndex(key_columns, base_interval), batches)
