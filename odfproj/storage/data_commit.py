"""One data commit: the data slice, a SetDataSchema when the schema grew, the data event, one atomic append.

Ingest (``AddData``) and transforms (``ExecuteTransform``) end the same way, and the rules of that end
live here once: the slice starts right after the last offset, ``prevOffset`` and ``prevCheckpoint``
continue the chain, a ``SetDataSchema`` precedes the event whenever the records' schema is not the
dataset's (first data, or added columns; whether the change is allowed is the chain validator's
business), and the append names the head the work was planned on, so a concurrent writer makes it
fail with ``HeadMovedError`` instead of interleaving.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from odfproj.odf import model
from odfproj.odf.arrow_schema import encode_arrow_schema
from odfproj.odf.multiformats import Multihash
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import IntegrityError
from odfproj.storage.objects import logical_hash, physical_hash
from odfproj.storage.projection import ChainProjection

__all__ = ["DataEvent", "commit_data", "next_offset"]

DataEvent = model.AddData | model.ExecuteTransform


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
    known_logical_hash: Multihash | None = None,
) -> Multihash:
    """Append ``event`` (and a SetDataSchema if needed) after ``projection``'s head; the new head.

    ``event`` carries what only its caller knows (source state, query inputs, watermark, checkpoint);
    ``prevOffset``, ``prevCheckpoint`` and ``newData`` are set here. ``data_file`` holds ``records``
    records numbered from :func:`next_offset` (none: a data-less event). ``schema`` is the records' data
    schema. ``known_logical_hash`` is a hash the caller computed from memory (one pass less over the
    data); if the stored copy disagrees, the file's own hash is used.
    """
    events: list[model.MetadataEvent] = []
    if schema is not None and (projection.arrow_schema is None or not schema.equals(projection.arrow_schema)):
        events.append(model.SetDataSchema(schema=encode_arrow_schema(schema)))
    new_data = None
    if data_file is not None and records:
        start = next_offset(projection)
        new_data = model.DataSlice(
            logical_hash=known_logical_hash or logical_hash(data_file),
            physical_hash=physical_hash(data_file),
            offset_interval=model.OffsetInterval(start=start, end=start + records - 1),
            size=data_file.stat().st_size,
        )
    checkpoint = projection.last_checkpoint
    event = replace(
        event,
        prev_offset=projection.last_offset,
        prev_checkpoint=checkpoint.physical_hash if checkpoint else None,
        new_data=new_data,
    )
    stored_file = data_file if new_data is not None else None

    def append(final: DataEvent) -> Multihash:
        return dataset.append(
            [*events, final], expected_head=projection.head, system_time=system_time, data_file=stored_file
        )

    try:
        return append(event)
    except IntegrityError:
        if new_data is None or stored_file is None or known_logical_hash is None:
            raise
        from_file = replace(new_data, logical_hash=logical_hash(stored_file))
        if from_file == new_data:
            raise
        return append(replace(event, new_data=from_file))
