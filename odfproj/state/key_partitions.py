"""The key store of an index of any size: hash-range partitions on disk, one in memory at a time.

Opal keeps its key store in RocksDB, on disk, so a table of billions of keys costs its writers no
memory per key. Here the sorted ``(hash, row, key)`` columns of :class:`~odfproj.state.key_store.KeyStore`
are cut by the top ``bits`` of the hash into ``2**bits`` partitions, each a file of at most about
:data:`PARTITION_KEYS` keys (the count doubles the partitions when the keys outgrow them, and halves
them, merging neighbours, when they hold under a quarter of that). A run of blocks is applied in two
passes:

1. block by block (one block's key columns in memory), each block is reduced to one change per key
   (:class:`PendingChanges`); the changes are kept in memory up to :data:`SPILL_ROWS` rows, beyond
   that written to disk as runs sorted by hash;
2. partition by partition, the stored keys of that hash range and the pending changes of the same
   range are loaded, applied block after block (which yields each block's ``valid_until`` rows) and
   written back as the partition's new file.

So the Python memory follows one block and one partition, never the number of keys, and each key is
rewritten once per run of blocks, not once per block. A store of a single partition stays in memory
(small datasets and tests pay no file per update); a stored index loads no partition until an update
or a lookup needs it.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from odfproj.state.errors import CorruptIndexError, StateIndexError
from odfproj.state.key_store import ABSENT, KeyChanges, KeyStore
from odfproj.state.keys import hash_keys, key_schema, normalise_keys
from odfproj.state.leftovers import WorkFolder
from odfproj.state.stored_files import StoredFile, read_content, write_content
from odfproj.state.validity_log import to_bitmap
from odfproj.storage.fsutil import fsync_dir, new_txid, write_durable

#: Keys per partition the store aims at (a partition's arrays and one update's temporaries: tens of MB).
PARTITION_KEYS = 1 << 18
#: Pending changes held in memory before a sorted run is written to disk.
SPILL_ROWS = 1 << 18
#: Partitions merge in pairs when they hold on average fewer than ``PARTITION_KEYS / MERGE_FRACTION`` keys.
MERGE_FRACTION = 4

_HASH, _ROW, _SEQ = "__hash", "__row", "__block"
_FIELDS = [pa.field(_HASH, pa.uint64(), nullable=False), pa.field(_ROW, pa.int64(), nullable=False)]


@dataclass(frozen=True)
class StoredPart:
    """A partition kept in a file of ``directory`` (the index folder, or a work folder until saved)."""

    directory: Path
    file: StoredFile
    count: int
    #: The file's bytes, read (and proven) already: a partition the index loaded with it, so that a
    #: save by another process that removes the file cannot pull it from under this reader.
    data: bytes | None = field(default=None, repr=False)


Part = KeyStore | StoredPart


def hash_range(i: int, bits: int) -> tuple[int, int | None]:
    """The hashes of partition ``i`` of ``2**bits``: ``[lo, hi)`` (``hi`` None: up to the largest)."""
    lo = i << (64 - bits) if bits else 0
    hi = (i + 1) << (64 - bits) if bits and i + 1 < (1 << bits) else None
    return lo, hi


def _bounds(hashes: np.ndarray, lo: int, hi: int | None) -> tuple[int, int]:
    start = int(np.searchsorted(hashes, np.uint64(lo), side="left"))
    end = len(hashes) if hi is None else int(np.searchsorted(hashes, np.uint64(hi), side="left"))
    return start, end


def encode_keys(store: KeyStore) -> bytes:
    """A partition as Arrow IPC: hash, row, then the normalised key columns, sorted by hash."""
    columns = [pa.array(store.hashes, pa.uint64()), pa.array(store.rows, pa.int64())]
    fields = list(_FIELDS)
    if store.keys is not None and store.schema is not None:
        columns += store.keys.columns
        fields += list(store.schema)
    sink = pa.BufferOutputStream()
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def decode_keys(data: bytes, key_columns: tuple[str, ...], schema: pa.Schema | None) -> KeyStore:
    table = pa.ipc.open_file(pa.py_buffer(data)).read_all()
    hashes = table.column(_HASH).to_numpy().astype(np.uint64, copy=False)
    rows = table.column(_ROW).to_numpy().astype(np.int64, copy=False)
    if len(hashes) > 1 and not np.all(hashes[1:] >= hashes[:-1]):
        raise CorruptIndexError("the key store's hashes are not sorted")
    if schema is None:
        if len(hashes):
            raise CorruptIndexError("the key store holds rows but no key types")
        return KeyStore(key_columns)
    keys = table.select(list(key_columns)).cast(schema).combine_chunks()
    return KeyStore(key_columns, schema, hashes, rows, keys)


class PendingChanges:
    """Each block's changes (hash, new row or ``ABSENT``, normalised key), waiting for pass 2.

    Held in memory up to ``spill_rows`` rows, then written to ``work_dir()`` as one Arrow IPC run
    sorted by hash (blocks in order within a hash): a partition's changes are then found by binary
    search in each run, reading only that range of a memory-mapped file.
    """

    def __init__(self, spill_rows: int, work_dir: Callable[[], Path]) -> None:
        self.spill_rows = spill_rows
        self.work_dir = work_dir
        self.count = 0
        #: Changes that give a key a row: an upper bound on the keys a run of blocks adds.
        self.adds = 0
        self._buffered: list[pa.Table] = []
        self._buffered_rows = 0
        self._runs: list[Path] = []
        self._resident: pa.Table | None = None
        self._resident_hashes: np.ndarray | None = None

    def add(self, sequence_number: int, hashes: np.ndarray, keys: pa.Table, new_rows: np.ndarray) -> None:
        """One block's changes, ``hashes`` ascending (blocks come in chain order)."""
        n = len(hashes)
        if not n:
            return
        table = keys.append_column(pa.field(_HASH, pa.uint64()), pa.array(hashes, pa.uint64()))
        table = table.append_column(pa.field(_ROW, pa.int64()), pa.array(new_rows, pa.int64()))
        table = table.append_column(pa.field(_SEQ, pa.int64()), pa.array(np.full(n, sequence_number)))
        self._buffered.append(table)
        self._buffered_rows += n
        self.count += n
        self.adds += int(np.count_nonzero(new_rows != ABSENT))
        if self._buffered_rows > self.spill_rows:
            self._spill()

    def _sorted_buffer(self) -> pa.Table | None:
        if not self._buffered:
            return None
        if len(self._buffered) == 1:  # one block's changes: already in hash order
            table = self._buffered[0]
        else:
            table = pa.concat_tables(self._buffered).combine_chunks()
            order = np.argsort(_values(table.column(_HASH)), kind="stable")  # keeps block order per hash
            table = table.take(pa.array(order))
        self._buffered, self._buffered_rows = [], 0
        return table

    def _spill(self) -> None:
        table = self._sorted_buffer()
        assert table is not None
        path = self.work_dir() / f"pending-{len(self._runs):06d}-{new_txid()}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        self._runs.append(path)

    def seal(self) -> None:
        """End of pass 1: the rows still in memory become one sorted run, kept in memory."""
        self._resident = self._sorted_buffer()
        if self._resident is not None:
            self._resident_hashes = _values(self._resident.column(_HASH))

    def between(self, lo: int, hi: int | None) -> pa.Table | None:
        """The changes with a hash in ``[lo, hi)``, block by block (stable), or ``None`` if none."""
        parts = []
        for path in self._runs:
            with pa.memory_map(str(path)) as source:
                run = pa.ipc.open_file(source).read_all()
                start, end = _bounds(_values(run.column(_HASH)), lo, hi)  # a view: a few pages read
                if end > start:  # ``take`` copies: no page of the map outlives this block
                    parts.append(run.take(pa.array(np.arange(start, end))))
                del run
        if self._resident is not None and self._resident_hashes is not None:
            start, end = _bounds(self._resident_hashes, lo, hi)
            if end > start:
                parts.append(self._resident.slice(start, end - start))
        if not parts:
            return None
        table = pa.concat_tables(parts).combine_chunks()
        order = np.argsort(table.column(_SEQ).to_numpy(), kind="stable")
        return table.take(pa.array(order))

    def close(self) -> None:
        for path in self._runs:
            path.unlink(missing_ok=True)
        self._runs, self._resident, self._resident_hashes = [], None, None


def _values(column: pa.ChunkedArray) -> np.ndarray:
    """A column's values as numpy, without a copy when it is one chunk (``ChunkedArray.to_numpy`` copies)."""
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return array.to_numpy(zero_copy_only=False)


def _by_block(changes: pa.Table) -> Iterator[tuple[int, pa.Table]]:
    """The changes of each block in turn (``changes`` is sorted by block)."""
    blocks = changes.column(_SEQ).to_numpy()
    cuts = np.nonzero(blocks[1:] != blocks[:-1])[0] + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(blocks)]))
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        yield int(blocks[start]), changes.slice(start, end - start)


class PartitionedKeyStore:
    """Primary key -> offset of its current row, for any number of keys (see the module docstring)."""

    def __init__(
        self,
        key_columns: Sequence[str],
        schema: pa.Schema | None = None,
        bits: int = 0,
        parts: Sequence[Part] | None = None,
        *,
        partition_keys: int = PARTITION_KEYS,
        spill_rows: int = SPILL_ROWS,
        work_parent: Path | None = None,
    ) -> None:
        self.key_columns = tuple(key_columns)
        if not self.key_columns:
            raise StateIndexError("a state index needs at least one primary key column")
        self.schema = schema
        self.bits = bits
        self.parts: list[Part] = list(parts) if parts is not None else [self._empty()]
        if len(self.parts) != 1 << bits:
            raise StateIndexError(f"a key store of {bits} partition bits needs {1 << bits} partitions")
        self.partition_keys = partition_keys
        self.spill_rows = spill_rows
        #: Where new partition files and spilled changes go; made on first need, removed with the store.
        self.work_parent = work_parent
        self._work: WorkFolder | None = None
        self._finalizer: weakref.finalize | None = None

    def __len__(self) -> int:
        return sum(len(p) if isinstance(p, KeyStore) else p.count for p in self.parts)

    def _empty(self) -> KeyStore:
        keys = self.schema.empty_table() if self.schema is not None else None
        return KeyStore(self.key_columns, self.schema, keys=keys)

    def work_dir(self) -> Path:
        """The store's work folder (a locked ``.work-*`` of ``work_parent``), made on first need.

        Its lock tells a cleaner (:func:`~odfproj.state.leftovers.remove_leftovers`) that it is in
        use; it is removed with the store, or when a save has moved its partitions into the index.
        """
        if self._work is None or not self._work.path.is_dir():
            self.discard_work_dir()
            parent = self.work_parent
            if parent is not None:
                with contextlib.suppress(OSError):
                    parent.mkdir(parents=True, exist_ok=True)
            try:
                work = WorkFolder.create(parent)
            except OSError:  # read-only index folder: any temporary folder will do
                work = WorkFolder.create(None, prefix="odfproj-keys-")
            self._work = work
            self._finalizer = weakref.finalize(self, work.remove)
        return self._work.path

    def discard_work_dir(self) -> None:
        """Remove the work folder (after a save moved the partitions it held into the index folder)."""
        if self._finalizer is not None:
            self._finalizer()
        self._work, self._finalizer = None, None

    def normalise(self, table: pa.Table) -> pa.Table:
        """``table``'s key columns in normalised form, checked against the types already stored."""
        keys = normalise_keys(table, self.key_columns)
        if self.schema is None:
            self.schema = keys.schema
            self.parts = [self._with_schema(p) for p in self.parts]
        elif keys.schema != self.schema:
            raise StateIndexError(
                f"primary key types changed from ({self.schema.to_string()}) to ({keys.schema.to_string()})"
            )
        return keys

    def _with_schema(self, part: Part) -> Part:
        empty = not len(part) if isinstance(part, KeyStore) else not part.count
        return self._empty() if empty else part

    def load(self, i: int) -> KeyStore:
        """Partition ``i`` in memory, proven against its size, CRC, count and hash range."""
        return self._decoded(self.parts[i], *hash_range(i, self.bits))

    def _decoded(self, part: Part, lo: int, hi: int | None) -> KeyStore:
        if isinstance(part, KeyStore):
            return part
        data = part.data if part.data is not None else read_content(part.directory, part.file)
        store = decode_keys(data, self.key_columns, self.schema)
        if len(store) != part.count or (
            len(store) and (int(store.hashes[0]) < lo or (hi is not None and int(store.hashes[-1]) >= hi))
        ):
            raise CorruptIndexError(f"{part.file.name}: not the keys the manifest says")
        return store

    def partitions(self) -> Iterator[KeyStore]:
        """Every partition in hash order, one in memory at a time."""
        for i in range(len(self.parts)):
            yield self.load(i)

    def current_rows(self, table: pa.Table) -> np.ndarray:
        """Offset of the current row of each key in ``table`` (any key column types), or ``ABSENT``."""
        result = np.full(table.num_rows, ABSENT, np.int64)
        if self.schema is None or not table.num_rows:
            return result
        keys = self.normalise(table)
        hashes = hash_keys(keys)
        order = np.argsort(hashes, kind="stable")
        for i in range(len(self.parts)):
            start, end = _bounds(hashes[order], *hash_range(i, self.bits))
            if end > start:
                at = order[start:end]
                store = self.load(i)
                result[at] = store.rows_at(store.lookup(hashes[at], keys.take(pa.array(at))))
        return result

    def apply_pending(self, pending: PendingChanges, until: dict[int, BitMap64]) -> None:
        """Pass 2: apply every pending change, partition by partition; collect each block's superseded rows.

        The partitions double until they hold about ``partition_keys`` keys each (assuming every
        pending change that gives a key a row adds a key, an upper bound); afterwards, partitions
        left with fewer than a quarter of that on average merge in pairs (:meth:`_merged`).
        """
        bits = self.bits
        while len(self) + pending.adds > self.partition_keys << bits:
            bits += 1
        shift = bits - self.bits
        parts: list[Part] = []
        loaded: tuple[int, KeyStore] | None = None
        for i in range(1 << bits):
            lo, hi = hash_range(i, bits)
            changes = pending.between(lo, hi)
            if changes is None and not shift:
                parts.append(self.parts[i])
                continue
            parent = i >> shift
            if loaded is None or loaded[0] != parent:
                loaded = (parent, self.load(parent))
            store = _within(loaded[1], lo, hi) if shift else loaded[1]
            first = _first_keys(store, changes) if changes is not None and not len(store) else None
            if first is not None:
                store = first
            elif changes is not None:
                for block, block_changes in _by_block(changes):
                    hashes = block_changes.column(_HASH).to_numpy()
                    keys = block_changes.select(list(self.key_columns))
                    positions = store.lookup(hashes, keys)
                    previous = store.rows_at(positions)
                    until[block].update(to_bitmap(previous[previous != ABSENT]))
                    new_rows = block_changes.column(_ROW).to_numpy()
                    store.apply(KeyChanges(hashes, keys, positions, new_rows))
            parts.append(self._kept(store, i, bits))
        merged, merged_bits = self._merged(parts, bits)
        self.parts, self.bits = merged, merged_bits
        if merged is not parts and self._work is not None:
            # This update's files the merge superseded (a name is its content: a merged partition
            # equal to one of them, an empty one say, has the same name and stays).
            work = self._work.path
            kept = {p.file.name for p in merged if isinstance(p, StoredPart)}
            for part in parts:
                if isinstance(part, StoredPart) and part.directory == work and part.file.name not in kept:
                    (work / part.file.name).unlink(missing_ok=True)

    def _merged(self, parts: list[Part], bits: int) -> tuple[list[Part], int]:
        """``parts`` (of ``2**bits``) halved while they hold under a quarter of ``partition_keys`` on average.

        Partition ``i`` of ``2**(bits-1)`` is partitions ``2i`` and ``2i+1`` of ``2**bits`` end to end:
        neighbours in hash order whose ranges make up its range, so the merged file is sorted by hash
        and every partition still holds exactly the hashes of its range (what :meth:`load` checks).
        A hash spreads keys evenly, so the partitions shrink together and the average speaks for each.
        A quarter, not a half: a store just split holds over half of ``partition_keys`` per
        partition, and one just merged under a half, so it must lose half its keys to merge again or
        double them to split again: keys coming and going at a boundary never make it flap.

        Merged partitions are written like split ones: new files in the work folder, moved into the
        index folder by the save, whose manifest (replaced atomically) is the only thing naming them.
        Returns ``parts`` itself when nothing merges.
        """
        total = sum(len(p) if isinstance(p, KeyStore) else p.count for p in parts)
        merged_bits = bits
        while merged_bits and total * MERGE_FRACTION < self.partition_keys << merged_bits:
            merged_bits -= 1
        shift = bits - merged_bits
        if not shift:
            return parts, bits
        merged: list[Part] = []
        for i in range(1 << merged_bits):
            children = range(i << shift, (i + 1) << shift)  # one merged partition in memory at a time
            stores = [self._decoded(parts[j], *hash_range(j, bits)) for j in children]
            merged.append(self._kept(_concatenated(self.key_columns, self.schema, stores), i, merged_bits))
        return merged, merged_bits

    def _kept(self, store: KeyStore, i: int, bits: int) -> Part:
        if not bits:
            return store  # one partition: it stays in memory, as small stores always did
        stored = write_content(self.work_dir(), f"keys-{i:06d}", ".arrow", encode_keys(store))
        return StoredPart(self.work_dir(), stored, len(store))

    def save_parts(self, directory: Path) -> list[tuple[StoredFile, int]]:
        """Every partition as a content file of ``directory`` (written, moved in, or already there)."""
        saved: list[tuple[StoredFile, int]] = []
        for i, part in enumerate(self.parts):
            if isinstance(part, KeyStore):
                stored, count = (
                    write_content(directory, f"keys-{i:06d}", ".arrow", encode_keys(part)),
                    len(part),
                )
            else:
                if part.directory != directory:
                    _move(part.directory / part.file.name, directory / part.file.name)
                stored, count = part.file, part.count
                self.parts[i] = StoredPart(directory, stored, count)
            saved.append((stored, count))
        return saved


def _concatenated(
    key_columns: tuple[str, ...], schema: pa.Schema | None, stores: Iterable[KeyStore]
) -> KeyStore:
    """Stores of consecutive hash ranges, in range order, as one store (still sorted by hash)."""
    kept = [s for s in stores if len(s)]
    if schema is None or not kept:
        keys = schema.empty_table() if schema is not None else None
        return KeyStore(key_columns, schema, keys=keys)
    tables = [s.keys for s in kept if s.keys is not None]
    return KeyStore(
        key_columns,
        schema,
        np.concatenate([s.hashes for s in kept]),
        np.concatenate([s.rows for s in kept]),
        pa.concat_tables(tables).combine_chunks(),
    )


def _first_keys(empty: KeyStore, changes: pa.Table) -> KeyStore | None:
    """The partition an empty one becomes by ``changes`` if no two of them share a hash; else ``None``.

    What applying them block by block gives, in one sort instead of one merge per block (at 20M keys of
    a first Ledger or Snapshot, 128 partitions of 20 blocks each): distinct hashes mean each key is
    changed once and no two keys collide, so no block supersedes a row, a change that leaves its key
    without a row (a retraction of a key never seen) changes nothing, and the store has one order.
    The same sort finds a repeated hash, which leaves the block-by-block way to the caller.
    """
    assert empty.schema is not None
    hashes = changes.column(_HASH).to_numpy()
    order = np.argsort(hashes, kind="stable")
    by_hash = hashes[order]
    if np.any(by_hash[1:] == by_hash[:-1]):
        return None
    new_rows = changes.column(_ROW).to_numpy()[order]
    kept = new_rows != ABSENT
    keys = changes.select(list(empty.key_columns)).take(pa.array(order[kept])).combine_chunks()
    return KeyStore(empty.key_columns, empty.schema, by_hash[kept], new_rows[kept], keys)


def _within(store: KeyStore, lo: int, hi: int | None) -> KeyStore:
    """The keys of ``store`` with a hash in ``[lo, hi)``, as a store of their own."""
    start, end = _bounds(store.hashes, lo, hi)
    keys = store.keys.slice(start, end - start).combine_chunks() if store.keys is not None else None
    return KeyStore(
        store.key_columns, store.schema, store.hashes[start:end].copy(), store.rows[start:end].copy(), keys
    )


def _move(source: Path, target: Path) -> None:
    """Move a finished content file into the index folder (a copy, made durable, across filesystems)."""
    try:
        os.replace(source, target)
    except OSError:
        if not target.exists():  # under a temporary name first: a killed copy leaves no partial content file
            tmp = target.with_name(f".{target.name}.tmp-{new_txid()}")
            try:
                write_durable(tmp, source.read_bytes())
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
    fsync_dir(target.parent)


def stored_store(
    key_columns: tuple[str, ...],
    key_types: Sequence[str] | None,
    bits: int,
    files: Sequence[tuple[StoredFile, int]],
    directory: Path,
) -> PartitionedKeyStore:
    """The key store a manifest describes; a partition file is decoded (and proven) when first loaded."""
    schema = key_schema(key_columns, [pa.type_for_alias(t) for t in key_types]) if key_types else None
    if schema is None and any(count for _, count in files):
        raise CorruptIndexError("the key store holds rows but no key types")
    parts: list[Part] = [StoredPart(directory, f, count) for f, count in files]
    if len(parts) != 1 << bits:
        raise CorruptIndexError("the manifest's key partitions do not match its partition bits")
    if not bits:  # one partition is small (at most about PARTITION_KEYS keys): its bytes are kept in
        # memory, but decoded only when an update or a key lookup needs them: a read of the state
        # (the current or an as-at bitmap) never does.
        [(f, count)] = files
        parts = [StoredPart(directory, f, count, read_content(directory, f))]
    return PartitionedKeyStore(key_columns, schema, bits, parts, work_parent=directory)
