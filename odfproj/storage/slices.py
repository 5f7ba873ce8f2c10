"""The chain-to-data walk: which data files a dataset holds as of a block, in one pass, without Spark.

Every reader of a dataset's records (the state index and its reads, ingest's merge history, a
transform's inputs, ``verify --reproduce``) starts from the same question: from a block back to the
Seed, which data slices are there, which data schema was in effect, what was the watermark. This is
the one place that walks the chain for it; what to do with the files is the caller's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from odfproj.odf import model
from odfproj.odf.multiformats import Multihash
from odfproj.odf.odf_schema import arrow_schema_bytes
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import DATA_EVENTS

__all__ = ["DataAsOf", "SliceFile", "data_as_of", "data_slices"]


@dataclass(frozen=True)
class SliceFile:
    """One data slice of the chain and the file that holds it."""

    sequence_number: int
    data: model.DataSlice
    path: Path

    @property
    def start(self) -> int:
        return self.data.offset_interval.start

    @property
    def end(self) -> int:
        return self.data.offset_interval.end


@dataclass(frozen=True)
class DataAsOf:
    """A dataset's data as of one block: its slices (oldest first), data schema and watermark then."""

    block_hash: Multihash
    slices: tuple[SliceFile, ...]
    #: Arrow schema bytes of the last SetDataSchema at or before the block (``None``: none yet).
    schema: bytes | None
    watermark: datetime | None

    def up_to(self, offset: int | None) -> tuple[SliceFile, ...]:
        """The slices holding any record with an offset up to ``offset`` (none for ``None``)."""
        if offset is None:
            return ()
        return tuple(s for s in self.slices if s.start <= offset)


def data_as_of(dataset: Dataset, block_hash: Multihash | None = None) -> DataAsOf | None:
    """The data at ``block_hash`` (default: the head); ``None`` if the block is not in the chain.

    Walks from the head, so blocks after ``block_hash`` are read but skipped: a rolled-back head
    leaves newer block files on disk, and only the walk from the head says what is in the chain.
    """
    target = block_hash if block_hash is not None else dataset.head()
    if target is None:
        return None
    started = False
    schema: bytes | None = None
    watermark: datetime | None = None
    watermark_known = False
    slices: list[SliceFile] = []
    for current, block in dataset.iter_blocks():
        if not started:
            if current != target:
                continue
            started = True
        event = block.event
        if isinstance(event, model.SetDataSchema) and schema is None:
            schema = arrow_schema_bytes(event)
        elif isinstance(event, DATA_EVENTS):
            if not watermark_known:
                # Once set, every data event carries the watermark: the latest one is the watermark.
                watermark, watermark_known = event.new_watermark, True
            if event.new_data is not None:
                path = dataset.layout.data_path(event.new_data.physical_hash)
                slices.append(SliceFile(block.sequence_number, event.new_data, path))
    if not started:
        return None
    slices.reverse()
    return DataAsOf(target, tuple(slices), schema, watermark)


def data_slices(dataset: Dataset) -> tuple[SliceFile, ...]:
    """Every data slice of the dataset up to its head, oldest first."""
    data = data_as_of(dataset)
    return data.slices if data is not None else ()
