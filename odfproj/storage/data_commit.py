"""One data commit: the data slice, a SetDataSchema when the schema grew, the data event, one atomic append.

Ingest (``AddData``) and transforms (``ExecuteTransform``) end the same way, and the rules of that end
live here once: the slice starts right after the last offset, ``prevOffset`` and ``prevCheckpoint``
continue the chain, a ``SetDataSchema`` precedes the event whenever the records' schema is not the
dataset's (first data, or added columns; whether the change is allowed is the chain validator's
business), and the append names the head the work was planned on, so a concurrent writer makes it
fail with ``HeadMovedError`` instead of interleaving.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from odfproj.odf import model
from odfproj.odf.multiformats import Multihash
from odfproj.odf.odf_schema import set_data_schema
from odfproj.odf.odf_versions import writes_odf_schema
from odfproj.storage.dataset import Dataset
from odfproj.storage.objects import DescribedDataFile, describe_data_file
from odfproj.storage.projection import ChainProjection

__all__ = ["DataEvent", "SliceFile", "commit_data", "next_offset"]

DataEvent = model.AddData | model.ExecuteTransform


@dataclass(frozen=True)
class SliceFile:
    """One data file of a batch and how many records it holds (their offsets follow the previous file's)."""

    path: Path
    records: int


def next_offset(projection: ChainProjection) -> int:
    """The offset of the next record: right after the last one, 0 for the first."""
    return 0 if projection.last_offset is None else projection.last_offset + 1


def commit_data(
    dataset: Dataset,
    projection: ChainProjection,
    event: DataEvent,
    *,
    system_time: datetime,
    data_file: Path | None = None,
    records: int = 0,
    schema: pa.Schema | None = None,
    slices: Sequence[SliceFile] = (),
) -> Multihash:
    """Append ``event`` (and a SetDataSchema if needed) after ``projection``'s head; the new head.

    ``event`` carries what only its caller knows (source state, query inputs, watermark, checkpoint);
    ``prevOffset``, ``prevCheckpoint`` and ``newData`` are set here. ``data_file`` holds ``records``
    records numbered from :func:`next_offset` (none: a data-less event). ``schema`` is the records' data
    schema. Both hashes are streamed from the file (``storage.hashing``), never from rows in memory, and
    computed once: ``append`` proves its staged copy is the described file by the copy's physical hash.

    ``slices`` is a batch cut into several files (the records-per-file limit): one block per file, in
    one atomic append, each a copy of ``event`` with its own ``newData`` and ``prevOffset``, so a reader
    sees consecutive offsets and cannot tell how the batch was cut. Only ``AddData`` may be cut: an
    ``ExecuteTransform`` names its inputs' new blocks once.
    """
    if slices and data_file is not None:
        raise ValueError("commit_data takes slices or data_file, not both")
    if data_file is not None:
        slices = [SliceFile(data_file, records)]
    if not isinstance(event, model.AddData) and len(slices) > 1:
        raise ValueError("only an AddData batch may be cut into several slices")
    # A dataset of a remote workspace's cache sends each file to the store while the next is described
    # and the blocks are appended; the sends end before this returns, ahead of the commit to the store.
    with _Sender(dataset) as send:
        return _commit_slices(
            dataset, projection, event, system_time, [s for s in slices if s.records], schema, send
        )


def _schema_events(
    dataset: Dataset, projection: ChainProjection, schema: pa.Schema | None
) -> list[model.MetadataEvent]:
    """A SetDataSchema when ``schema`` is not the dataset's (first data, or added columns), in the chain's
    form (:func:`_records_odf_schemas`)."""
    if schema is not None and (projection.arrow_schema is None or not schema.equals(projection.arrow_schema)):
        return [set_data_schema(schema, odf_schema=_records_odf_schemas(dataset, projection))]
    return []


def _records_odf_schemas(dataset: Dataset, projection: ChainProjection) -> bool:
    """Whether the chain records its data schema as an ODF schema: as its last SetDataSchema did, else as
    its blocks' version does (kamu wrote ODF schemas in manifest version 2 blocks before v0.265)."""
    for definition in reversed(projection.definition_events):
        if isinstance(definition.event, model.SetDataSchema):
            return definition.event.schema is None
    return writes_odf_schema(dataset.block_version(projection.head))


#: One thread sends every commit's data files ahead (``_Sender``): commits of steps that run at once send
#: one file at a time between them, so the sends add one upload's memory to the process, not one per step.
_SENDS = ThreadPoolExecutor(1, "odfproj-send")


class _Sender:
    """Sends described data files to the store of a remote workspace's dataset in :data:`_SENDS`
    (``ObjectAreas.send_data_ahead``); nothing for any other dataset. Leaving it waits for this commit's
    sends (a failed one is left to the commit to the store, which reports it); leaving on an error or an
    interrupt drops those not started."""

    def __init__(self, dataset: Dataset) -> None:
        self._objects = dataset.objects if dataset.objects.origin is not None else None
        self._sent: list[Future[bool]] = []

    def __enter__(self) -> Callable[[DescribedDataFile], None]:
        return self._send

    def _send(self, file: DescribedDataFile) -> None:
        if self._objects is not None:
            self._sent.append(_SENDS.submit(self._objects.send_data_ahead, file.path, file.physical_hash))

    def __exit__(self, error: type[BaseException] | None, *_: object) -> None:
        if error is not None:
            for sent in self._sent:
                sent.cancel()
            wait(self._sent)  # the one going ends; the error that left is the one to show
            return
        for sent in self._sent:
            sent.result()  # a store's failure is False; anything raised here is a bug to show


def _commit_slices(
    dataset: Dataset,
    projection: ChainProjection,
    event: DataEvent,
    system_time: datetime,
    slices: list[SliceFile],
    schema: pa.Schema | None,
    send: Callable[[DescribedDataFile], None],
) -> Multihash:
    events: list[model.MetadataEvent] = _schema_events(dataset, projection, schema)
    checkpoint = projection.last_checkpoint
    prev_offset = projection.last_offset
    data_events: list[DataEvent] = []
    # Hashed once here; append proves its copies are these files. One file after the other: a file's
    # columns hash in threads but its Parquet decoding runs on one, and two files at once raised the
    # driver's peak RSS at 20M rows by 150 MB (memory the allocator keeps per thread), past 500 MB.
    described = []
    for piece in slices:
        described.append(describe_data_file(piece.path))
        send(described[-1])
    for i, piece in enumerate(slices or [None]):
        new_data = None
        if piece is not None:
            start = 0 if prev_offset is None else prev_offset + 1
            new_data = model.DataSlice(
                logical_hash=described[i].logical_hash,
                physical_hash=described[i].physical_hash,
                offset_interval=model.OffsetInterval(start=start, end=start + piece.records - 1),
                size=described[i].size,
            )
        data_events.append(
            replace(
                event,
                prev_offset=prev_offset,
                prev_checkpoint=checkpoint.physical_hash if checkpoint else None,
                new_data=new_data,
            )
        )
        if new_data is not None:
            prev_offset = new_data.offset_interval.end
    return dataset.append(
        [*events, *data_events],
        expected_head=projection.head,
        system_time=system_time,
        data_files=described,
    )
