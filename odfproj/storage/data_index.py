"""Every block of a chain by sequence number: its hash and, for a data event, its slice and watermark.

Reading a dataset's data as of a block (:mod:`odfproj.storage.slices`) needs, from that block back to
the Seed, the data slices and the last watermark. Walking the chain for it reads and decodes every
block: about a second at 10,000 blocks, on every read. The data index holds those facts as columns,
one row per block, in ``info/data-index.arrow``, and is kept current the way the projection cache is:

* it is keyed by the head it reflects (its last row's hash);
* a reader walks back from the current head only until it meets that head and appends the newer
  blocks' rows (another process appended), then writes the file back (best effort, no fsync: losing
  it only costs a walk);
* a cache whose head the walk passes without meeting (history rewritten, rolled back, another
  dataset's folder) or that fails its checksum or format is never used: the index is rebuilt from the
  chain. A head names its whole chain, so a cache whose head is an ancestor-or-equal of the chain's
  head holds the right rows for every block up to it.

Rows: ``block_hash`` (multihash bytes), ``data_event`` (an AddData or ExecuteTransform), and for data
events ``start``/``end``/``physical_hash``/``logical_hash``/``size`` of ``newData`` (null without
one) and ``watermark_us`` (``newWatermark`` in microseconds since the epoch, null without one).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np
import pyarrow as pa

from odfproj.odf import model
from odfproj.odf.multiformats import Multihash, multibase_encode
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import StorageError
from odfproj.storage.fsutil import replace_atomic
from odfproj.storage.projection import DATA_EVENTS

__all__ = ["DATA_INDEX_FILE", "DataIndex", "data_index"]

DATA_INDEX_FILE = "data-index.arrow"
#: Bumped whenever the columns change; a file of another format is rebuilt.
_FORMAT = b"1"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCHEMA = pa.schema(
    [
        pa.field("block_hash", pa.binary(), nullable=False),
        pa.field("data_event", pa.bool_(), nullable=False),
        pa.field("start", pa.int64()),
        pa.field("end", pa.int64()),
        pa.field("physical_hash", pa.binary()),
        pa.field("logical_hash", pa.binary()),
        pa.field("size", pa.int64()),
        pa.field("watermark_us", pa.int64()),
    ],
    metadata={b"odfproj-data-index": _FORMAT},
)
#: The handle's memo key (``Dataset.memo``): an index is reused while the head does not move.
_MEMO = "data-index"


@dataclass(frozen=True)
class DataIndex:
    """The rows of every block from the Seed (row 0) to ``head`` (the last row)."""

    table: pa.Table

    @property
    def block_count(self) -> int:
        return self.table.num_rows

    @cached_property
    def head(self) -> Multihash:
        return Multihash.from_bytes(self.table.column("block_hash")[-1].as_py())

    def blocks_like(self, text: str) -> list[Multihash]:
        """The blocks whose hash, as multibase text, starts or ends with ``text`` (an abbreviation)."""
        return [
            Multihash.from_bytes(data)
            for data in self.table.column("block_hash").to_pylist()
            if (full := multibase_encode(data)).startswith(text) or full.endswith(text)
        ]

    def block_hash(self, sequence_number: int) -> bytes:
        """The hash (multihash bytes) of the block at ``sequence_number``."""
        return self.table.column("block_hash")[sequence_number].as_py()

    @cached_property
    def data_rows(self) -> np.ndarray:
        """Sequence numbers of the data events, ascending."""
        return np.flatnonzero(self.table.column("data_event").to_numpy(zero_copy_only=False))

    @cached_property
    def slice_rows(self) -> np.ndarray:
        """Sequence numbers of the blocks with ``newData``, ascending (their offsets ascend too)."""
        return np.flatnonzero(self.table.column("start").is_valid().to_numpy(zero_copy_only=False))

    @cached_property
    def starts(self) -> np.ndarray:
        """First offset of each slice of :attr:`slice_rows`."""
        return self.table.column("start").take(self.slice_rows).to_numpy()

    @cached_property
    def ends(self) -> np.ndarray:
        """Last offset of each slice of :attr:`slice_rows`."""
        return self.table.column("end").take(self.slice_rows).to_numpy()

    def data_slice(self, sequence_number: int) -> model.DataSlice:
        """The ``newData`` of the block at ``sequence_number`` (which must have one)."""
        row = {name: self.table.column(name)[sequence_number].as_py() for name in _SLICE_COLUMNS}
        return model.DataSlice(
            logical_hash=Multihash.from_bytes(row["logical_hash"]),
            physical_hash=Multihash.from_bytes(row["physical_hash"]),
            offset_interval=model.OffsetInterval(start=row["start"], end=row["end"]),
            size=row["size"],
        )

    def watermark_at(self, sequence_number: int) -> datetime | None:
        """The watermark after the block at ``sequence_number``: the last data event's up to it
        (once set, every data event carries it)."""
        upto = np.searchsorted(self.data_rows, sequence_number, side="right")
        if not upto:
            return None
        value = self.table.column("watermark_us")[int(self.data_rows[upto - 1])].as_py()
        return None if value is None else _EPOCH + timedelta(microseconds=value)


_SLICE_COLUMNS = ("start", "end", "physical_hash", "logical_hash", "size")


def data_index(dataset: Dataset) -> DataIndex:
    """The data index at the dataset's current head, from the handle, ``info/`` or the chain."""
    head = dataset.head()
    if head is None:
        raise StorageError(f"dataset {dataset.name}: {dataset.layout.head_ref} is missing (not a dataset)")
    held = dataset.memo.get(_MEMO)
    if isinstance(held, DataIndex) and held.head == head:
        return held
    cached = held if isinstance(held, DataIndex) else _read(dataset)
    newer, met = dataset.blocks_since(
        head, cached.head if cached else None, cached.block_count - 1 if cached else -1
    )
    base = cached if met else None
    if base is not None and newer and newer[0][1].sequence_number != base.block_count:
        base, (newer, _) = None, dataset.blocks_since(head, None)  # rows that disagree: rebuild
    rows = _rows(newer)
    table = rows if base is None else pa.concat_tables([base.table, rows]).combine_chunks()
    if newer and table.num_rows != newer[-1][1].sequence_number + 1:
        raise StorageError(f"dataset {dataset.name}: the chain's sequence numbers are not consecutive")
    index = DataIndex(table) if newer else base
    assert index is not None
    dataset.memo[_MEMO] = index
    if newer:
        _write(dataset, index)
    return index


def _rows(blocks: list[tuple[Multihash, model.MetadataBlock]]) -> pa.Table:
    columns: dict[str, list[object]] = {name: [] for name in _SCHEMA.names}
    for block_hash, block in blocks:
        event = block.event
        data = event.new_data if isinstance(event, DATA_EVENTS) else None
        watermark = event.new_watermark if isinstance(event, DATA_EVENTS) else None
        columns["block_hash"].append(block_hash.to_bytes())
        columns["data_event"].append(isinstance(event, DATA_EVENTS))
        columns["start"].append(data.offset_interval.start if data else None)
        columns["end"].append(data.offset_interval.end if data else None)
        columns["physical_hash"].append(data.physical_hash.to_bytes() if data else None)
        columns["logical_hash"].append(data.logical_hash.to_bytes() if data else None)
        columns["size"].append(data.size if data else None)
        columns["watermark_us"].append(_microseconds(watermark) if watermark is not None else None)
    return pa.table(columns, schema=_SCHEMA)


def _microseconds(t: datetime) -> int:
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _read(dataset: Dataset) -> DataIndex | None:
    """The stored index, or ``None`` if it is missing, damaged or of another format."""
    data = dataset.read_info(DATA_INDEX_FILE)
    if data is None or len(data) < 4:
        return None
    body, crc = data[:-4], int.from_bytes(data[-4:], "big")
    if zlib.crc32(body) != crc:
        return None
    try:
        table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    except (pa.ArrowException, OSError, ValueError):
        return None
    if not table.schema.equals(_SCHEMA, check_metadata=True) or not table.num_rows:
        return None
    return DataIndex(table)


def _write(dataset: Dataset, index: DataIndex) -> None:
    """Best effort: an index that cannot be written (read-only workspace) only costs a walk."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _SCHEMA) as writer:
        writer.write_table(index.table)
    body = sink.getvalue().to_pybytes()
    try:
        dataset.layout.info_dir.mkdir(exist_ok=True)
        path = dataset.layout.info_dir / DATA_INDEX_FILE
        replace_atomic(path, body + zlib.crc32(body).to_bytes(4, "big"), durable=False)
    except OSError:
        pass
