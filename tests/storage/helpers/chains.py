"""Building real chains for tests: ODF-shaped Parquet slices and the events that describe them.

Every data file is real Parquet written by pyarrow with the common columns (``offset``, ``op``,
``system_time``, ``event_time``) plus data columns, and its DataSlice carries the real physical and
logical hashes, so what the tests commit is what a coordinator would commit.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.odf import model
from odfproj.odf.arrow_schema import encode_arrow_schema
from odfproj.odf.multiformats import Multihash
from odfproj.storage.dataset import Dataset
from odfproj.storage.objects import logical_hash, physical_hash
from odfproj.storage.physical_hash import PHYSICAL_HASH_CODEC, physical_digest
from odfproj.storage.projection import ChainProjection

TS = pa.timestamp("ms", tz="UTC")
COMMON_FIELDS = [
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("op", pa.int32(), nullable=False),
    pa.field("system_time", TS, nullable=False),
    pa.field("event_time", TS),
]
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)


def schema_with(*columns: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([*COMMON_FIELDS, *(pa.field(name, t) for name, t in columns)])


DEFAULT_SCHEMA = schema_with(("value", pa.string()))


def set_schema(schema: pa.Schema = DEFAULT_SCHEMA) -> model.SetDataSchema:
    return model.SetDataSchema(schema=encode_arrow_schema(schema))


def _column(t: pa.DataType, start: int, count: int) -> pa.Array:
    values = range(start, start + count)
    if pa.types.is_string(t):
        return pa.array([f"v{i}" for i in values], t)
    if pa.types.is_floating(t):
        return pa.array([i / 2 for i in values], t)
    if pa.types.is_integer(t):
        return pa.array(list(values), t)
    if pa.types.is_boolean(t):
        return pa.array([i % 2 == 0 for i in values], t)
    raise AssertionError(f"no test values for {t}")


def write_slice(path: Path, schema: pa.Schema, start: int, count: int) -> Path:
    """A Parquet file with ``count`` records at offsets ``start..``, following ``schema``."""
    columns = [
        pa.array(range(start, start + count), pa.int64()),
        pa.array([0] * count, pa.int32()),
        pa.array([BASE_TIME + timedelta(seconds=i) for i in range(start, start + count)], TS),
        pa.array([BASE_TIME + timedelta(minutes=i) for i in range(start, start + count)], TS),
    ]
    columns += [_column(f.type, start, count) for f in list(schema)[len(COMMON_FIELDS) :]]
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), path)
    return path


def data_slice(path: Path, start: int, count: int) -> model.DataSlice:
    return model.DataSlice(
        logical_hash=logical_hash(path),
        physical_hash=physical_hash(path),
        offset_interval=model.OffsetInterval(start=start, end=start + count - 1),
        size=path.stat().st_size,
    )


def write_checkpoint(path: Path, content: bytes) -> tuple[Path, model.Checkpoint]:
    path.write_bytes(content)
    checkpoint = model.Checkpoint(
        physical_hash=Multihash(PHYSICAL_HASH_CODEC, physical_digest(path)), size=len(content)
    )
    return path, checkpoint


def build_add_data(
    p: ChainProjection,
    scratch: Path,
    count: int,
    *,
    watermark: datetime | None = None,
    checkpoint: bytes | Literal["carry"] | None = None,
    source_state: model.SourceState | None = None,
    schema: pa.Schema | None = None,
) -> tuple[model.AddData, Path | None, Path | None]:
    """The AddData that follows ``p`` with ``count`` new records, and the files it describes.

    ``checkpoint``: new checkpoint content, ``"carry"`` to keep the previous one, ``None`` for none.
    ``schema`` overrides the projection's (for a SetDataSchema committed in the same batch).
    """
    start = 0 if p.last_offset is None else p.last_offset + 1
    tag = f"{os.getpid()}-{p.sequence_number}-{count}-{os.urandom(4).hex()}"
    data_file = new_data = None
    if count:
        data_file = write_slice(scratch / f"{tag}.parquet", schema or p.arrow_schema, start, count)
        new_data = data_slice(data_file, start, count)
    checkpoint_file = new_checkpoint = None
    if checkpoint == "carry":
        new_checkpoint = p.last_checkpoint
    elif checkpoint is not None:
        checkpoint_file, new_checkpoint = write_checkpoint(scratch / f"{tag}.ckpt", checkpoint)
    event = model.AddData(
        prev_checkpoint=p.last_checkpoint.physical_hash if p.last_checkpoint else None,
        prev_offset=p.last_offset,
        new_data=new_data,
        new_checkpoint=new_checkpoint,
        new_watermark=watermark if watermark is not None else p.watermark,
        new_source_state=source_state,
    )
    return event, data_file, checkpoint_file


class Writer:
    """Appends realistic AddData events to one root dataset, tracking offsets and checkpoints.

    Reads the dataset's projection before each append, so it also works across processes.
    """

    def __init__(self, dataset: Dataset, scratch: Path) -> None:
        self.dataset = dataset
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)

    def add_data(
        self,
        count: int,
        *,
        watermark: datetime | None = None,
        checkpoint: bytes | None = None,
        source_state: model.SourceState | None = None,
    ) -> Multihash:
        p = self.dataset.projection()
        event, data_file, checkpoint_file = build_add_data(
            p, self.scratch, count, watermark=watermark, checkpoint=checkpoint, source_state=source_state
        )
        return self.dataset.append(
            [event], expected_head=p.head, data_file=data_file, checkpoint_file=checkpoint_file
        )


# --- definition events ----------------------------------------------------------------------------


def polling_source(url: str = "https://example.org/data.csv") -> model.SetPollingSource:
    return model.SetPollingSource(
        fetch=model.FetchStepUrl(url=url),
        read=model.ReadStepCsv(header=True),
        merge=model.MergeStrategyAppend(),
    )


def push_source(name: str) -> model.AddPushSource:
    return model.AddPushSource(
        source_name=name, read=model.ReadStepNdJson(), merge=model.MergeStrategyAppend()
    )


def set_transform(*input_ids: model.DatasetId) -> model.SetTransform:
    return model.SetTransform(
        inputs=tuple(
            model.TransformInput(dataset_ref=i.as_did_str(), alias=f"in{n}") for n, i in enumerate(input_ids)
        ),
        transform=model.TransformSql(engine="spark", query="select * from in0"),
    )


def fake_block_hash(n: int) -> Multihash:
    """A stand-in for an input dataset's block hash (derivative chains only store it)."""
    return Multihash.sha3_256(f"input block {n}".encode())


def build_execute_transform(
    p: ChainProjection,
    scratch: Path,
    count: int,
    *,
    input_rows: int = 1,
    watermark: datetime | None = None,
    schema: pa.Schema | None = None,
) -> tuple[model.ExecuteTransform, Path | None]:
    """The ExecuteTransform that follows ``p``, consuming ``input_rows`` more records of every input."""
    assert p.set_transform is not None
    start = 0 if p.last_offset is None else p.last_offset + 1
    data_file = new_data = None
    if count:
        tag = f"{os.getpid()}-{p.sequence_number}-{os.urandom(4).hex()}"
        data_file = write_slice(scratch / f"{tag}.parquet", schema or p.arrow_schema, start, count)
        new_data = data_slice(data_file, start, count)
    inputs = []
    for n, transform_input in enumerate(p.set_transform.inputs):
        dataset_id = model.DatasetId.from_did_str(transform_input.dataset_ref)
        last = p.inputs.get(dataset_id)
        prev_offset = last.new_offset if last else None
        new_offset = (prev_offset if prev_offset is not None else -1) + input_rows if input_rows else None
        inputs.append(
            model.ExecuteTransformInput(
                dataset_id=dataset_id,
                prev_block_hash=last.new_block_hash if last else None,
                new_block_hash=fake_block_hash(p.sequence_number * 10 + n),
                prev_offset=prev_offset,
                new_offset=new_offset,
            )
        )
    event = model.ExecuteTransform(
        query_inputs=tuple(inputs),
        prev_checkpoint=p.last_checkpoint.physical_hash if p.last_checkpoint else None,
        prev_offset=p.last_offset,
        new_data=new_data,
        new_watermark=watermark if watermark is not None else p.watermark,
    )
    return event, data_file


def add_transform(
    dataset: Dataset,
    scratch: Path,
    count: int,
    *,
    input_rows: int = 1,
    watermark: datetime | None = None,
) -> Multihash:
    """Append an ExecuteTransform that consumes ``input_rows`` more records of every input."""
    p = dataset.projection()
    event, data_file = build_execute_transform(p, scratch, count, input_rows=input_rows, watermark=watermark)
    return dataset.append([event], expected_head=p.head, data_file=data_file)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) with its content, to prove nothing changed."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
