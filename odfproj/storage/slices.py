"""The chain-to-data walk: which data files a dataset holds as of a block, in one pass, without Spark.

Every reader of a dataset's records (the state index and its reads, ingest's merge history, a
transform's inputs, ``verify --reproduce``) starts from the same question: from a block back to the
Seed, which data slices are there, which data schema was in effect, what was the watermark. This is
the one place that answers it (from the data index, :mod:`odfproj.storage.data_index`, so without
walking the chain); what to do with the files is the caller's business.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

import numpy as np

from odfproj.odf import model
from odfproj.odf.multiformats import Multihash
from odfproj.odf.odf_schema import arrow_schema_bytes
from odfproj.storage.areas import ObjectAreas
from odfproj.storage.data_index import DataIndex, data_index
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import IntegrityError

__all__ = ["DataAsOf", "SliceFile", "data_as_of", "data_slices"]


@dataclass(frozen=True)
class SliceFile:
    """One data slice of the chain and where the file that holds it is.

    Located when asked, not when listed: a remote workspace's cache fetches a file only for a reader
    that opens it here (:attr:`path`), and Spark may open it in the store instead (:meth:`uri`).
    """

    sequence_number: int
    data: model.DataSlice
    objects: ObjectAreas = field(repr=False, compare=False)

    @property
    def path(self) -> Path:
        """The file on this machine (fetched first if only the store holds it): for pyarrow, hashing."""
        return self.objects.data_path(self.data.physical_hash, self.data.size)

    @property
    def held(self) -> Path | None:
        """The file where this machine opens it without fetching it; ``None`` if only the store has it."""
        return self.objects.data_held(self.data.physical_hash)

    def uri(self, *, in_place: bool) -> str:
        """Where Spark opens the file; ``in_place``: the session reads the store itself (see
        ``ObjectAreas.data_uri``)."""
        return self.objects.data_uri(self.data.physical_hash, self.data.size, in_place=in_place)

    def stored_uri(self) -> str | None:
        """Where a reader on another host opens the file: at its place in the workspace's store, sent there
        first if only this machine has it (``ObjectAreas.data_in_store``); ``None`` for a local workspace."""
        return self.objects.data_in_store(self.data.physical_hash, self.data.size)

    @property
    def start(self) -> int:
        return self.data.offset_interval.start

    @property
    def end(self) -> int:
        return self.data.offset_interval.end


@dataclass(frozen=True)
class DataAsOf:
    """A dataset's data as of one block: its slices (oldest first), data schema and watermark then.

    The slices are read off the data index (:mod:`odfproj.storage.data_index`) when asked for, and
    only those asked for: a long chain's thousands of slices are never all built for a read of a few.
    """

    block_hash: Multihash
    #: Arrow schema bytes of the last SetDataSchema at or before the block (``None``: none yet).
    schema: bytes | None
    watermark: datetime | None
    index: DataIndex = field(repr=False)
    #: How many slices of the index are at or before the block.
    count: int
    objects: ObjectAreas = field(repr=False)

    @cached_property
    def slices(self) -> tuple[SliceFile, ...]:
        """Every slice at or before the block, oldest first."""
        return self._slices(range(self.count))

    def iter_slices(self, *, newest: bool = False) -> Iterator[SliceFile]:
        """The slices one at a time, oldest (or newest) first: a reader that stops early builds no more."""
        for position in range(self.count - 1, -1, -1) if newest else range(self.count):
            yield from self._slices((position,))

    def up_to(self, offset: int | None) -> tuple[SliceFile, ...]:
        """The slices holding any record with an offset up to ``offset`` (none for ``None``)."""
        return self.between(None, offset)

    def between(self, after: int | None, offset: int | None) -> tuple[SliceFile, ...]:
        """The slices holding any record with an offset in ``(after, offset]`` (``after`` None: from 0)."""
        return self._slices(self.positions(after, offset))

    def positions(self, after: int | None, offset: int | None) -> range:
        """Which of :attr:`slices` :meth:`between` gives (by position), without building them."""
        if offset is None:
            return range(0)
        starts, ends = self.index.starts[: self.count], self.index.ends[: self.count]
        last = int(np.searchsorted(starts, offset, side="right"))
        first = 0 if after is None else int(np.searchsorted(ends, after, side="right"))
        return range(first, max(first, last))

    def holding(self, offsets: np.ndarray) -> Iterator[SliceFile]:
        """The slices holding any of ``offsets`` (ascending), oldest first, built as they are taken."""
        if not offsets.size:
            return
        starts = self.index.starts[: self.count]
        positions = np.unique(np.searchsorted(starts, offsets, side="right") - 1)
        for position in positions[positions >= 0].tolist():
            yield from self._slices((position,))

    def _slices(self, positions: Iterable[int]) -> tuple[SliceFile, ...]:
        rows = self.index.slice_rows
        out = []
        for position in positions:
            sequence_number = int(rows[position])
            data = self.index.data_slice(sequence_number)
            out.append(SliceFile(sequence_number, data, self.objects))
        return tuple(out)


def data_as_of(dataset: Dataset, block_hash: Multihash | None = None) -> DataAsOf | None:
    """The data at ``block_hash`` (default: the head); ``None`` if the block is not in the chain.

    Whether the block is in the chain is the index's answer for its sequence number (a rolled-back
    head leaves newer block files on disk, so a block that can be read is not necessarily in it);
    only the target block itself is read, and only when it is not the head.
    """
    index = data_index(dataset)
    if block_hash is None or block_hash == index.head:
        sequence_number = index.block_count - 1
        target = index.head
    else:
        try:
            sequence_number = dataset.get_block(block_hash).sequence_number
        except IntegrityError:
            return None
        if sequence_number >= index.block_count or index.block_hash(sequence_number) != block_hash.to_bytes():
            return None
        target = block_hash
    projection = dataset.projection()
    schema = None
    for definition in projection.definition_events:
        if definition.sequence_number > sequence_number:
            break
        if isinstance(definition.event, model.SetDataSchema):
            schema = arrow_schema_bytes(definition.event)
    count = int(np.searchsorted(index.slice_rows, sequence_number, side="right"))
    return DataAsOf(target, schema, index.watermark_at(sequence_number), index, count, dataset.objects)


def data_slices(dataset: Dataset) -> tuple[SliceFile, ...]:
    """Every data slice of the dataset up to its head, oldest first."""
    data = data_as_of(dataset)
    return data.slices if data is not None else ()
