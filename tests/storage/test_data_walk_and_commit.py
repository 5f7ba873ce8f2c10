"""The chain-to-data walk (storage.slices) and the one data commit (storage.data_commit), without Spark."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from odfproj.errors import InvalidValueError
from odfproj.odf import model
from odfproj.odf.arrow_schema import decode_arrow_schema
from odfproj.storage.data_commit import SliceFile, commit_data
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import IntegrityError
from odfproj.storage.objects import DescribedDataFile, describe_data_file, logical_hash, physical_hash
from odfproj.storage.projection import ChainProjection
from odfproj.storage.slices import data_as_of, data_slices
from tests.storage.helpers.chains import (
    BASE_TIME,
    DEFAULT_SCHEMA,
    Writer,
    fake_block_hash,
    schema_with,
    set_schema,
    write_slice,
)


def test_the_walk_gives_slices_oldest_first_with_the_schema_and_watermark_of_the_block(
    root: Dataset, writer: Writer
) -> None:
    writer.add_data(2, watermark=BASE_TIME)
    middle = writer.add_data(3, watermark=BASE_TIME + timedelta(hours=1))
    wider = schema_with(("value", pa.string()), ("n", pa.int64()))
    root.append([set_schema(wider)])
    writer.add_data(1, watermark=BASE_TIME + timedelta(hours=2))

    assert [(s.start, s.end) for s in data_slices(root)] == [(0, 1), (2, 4), (5, 5)]
    at_middle = data_as_of(root, middle)
    assert at_middle is not None
    assert [(s.start, s.end) for s in at_middle.slices] == [(0, 1), (2, 4)]
    assert decode_arrow_schema(at_middle.schema) == DEFAULT_SCHEMA
    assert at_middle.watermark == BASE_TIME + timedelta(hours=1)
    assert [s.start for s in at_middle.up_to(1)] == [0] and at_middle.up_to(None) == ()
    assert all(s.path.is_file() for s in at_middle.slices)
    assert decode_arrow_schema(data_as_of(root).schema) == wider
    assert data_as_of(root, fake_block_hash(7)) is None


def later(p: ChainProjection) -> datetime:
    return p.system_time + timedelta(seconds=1)


def test_a_commit_continues_the_chain_and_adds_a_schema_only_when_it_changed(
    root: Dataset, writer: Writer, scratch: Path
) -> None:
    writer.add_data(2)
    p = root.projection()
    path = write_slice(scratch / "a.parquet", DEFAULT_SCHEMA, 2, 3)
    event = model.AddData(new_watermark=BASE_TIME)
    head = commit_data(root, p, event, system_time=later(p), data_file=path, records=3, schema=DEFAULT_SCHEMA)
    block = root.get_block(head)
    assert isinstance(block.event, model.AddData) and block.sequence_number == p.sequence_number + 1
    assert block.event.prev_offset == 1 and block.event.new_data.offset_interval == model.OffsetInterval(
        start=2, end=4
    )

    wider = schema_with(("value", pa.string()), ("n", pa.int64()))
    p = root.projection()
    path = write_slice(scratch / "b.parquet", wider, 5, 1)
    head = commit_data(root, p, event, system_time=later(p), data_file=path, records=1, schema=wider)
    kinds = [type(b.event).__name__ for _, b in list(root.iter_blocks())[:2]]
    assert kinds == ["AddData", "SetDataSchema"]
    assert root.get_block(head).event.new_data.logical_hash == logical_hash(path)
    assert root.projection().arrow_schema == wider

    p = root.projection()
    head = commit_data(root, p, model.AddData(new_watermark=BASE_TIME), system_time=later(p))
    assert root.get_block(head).event.new_data is None and root.get_block(head).event.prev_offset == 5


def test_a_batch_of_several_slices_is_one_transaction_of_one_block_each(
    root: Dataset, writer: Writer, scratch: Path
) -> None:
    writer.add_data(2)
    p = root.projection()
    pieces = [
        SliceFile(write_slice(scratch / f"{i}.parquet", DEFAULT_SCHEMA, start, n), n)
        for i, (start, n) in enumerate([(2, 3), (5, 3), (8, 1)])
    ]
    source = model.SourceState(source_name="s", kind="odf/etag", value="v1")
    event = model.AddData(new_watermark=BASE_TIME, new_source_state=source)
    head = commit_data(root, p, event, system_time=later(p), slices=pieces)
    new_blocks = [b for _, b in root.iter_blocks()][:3][::-1]
    assert [b.event.new_data.offset_interval for b in new_blocks] == [
        model.OffsetInterval(start=2, end=4),
        model.OffsetInterval(start=5, end=7),
        model.OffsetInterval(start=8, end=8),
    ]
    assert [b.event.prev_offset for b in new_blocks] == [1, 4, 7]
    assert {b.system_time for b in new_blocks} == {later(p)}
    assert all(b.event.new_source_state == source for b in new_blocks)
    assert root.head() == head and [(s.start, s.end) for s in data_slices(root)][1:] == [
        (2, 4),
        (5, 7),
        (8, 8),
    ]

    # A transform's update is never cut; more files than data events leave the dataset as it was.
    p = root.projection()
    extra = write_slice(scratch / "x.parquet", DEFAULT_SCHEMA, 9, 1)
    with pytest.raises(ValueError, match="only an AddData"):
        commit_data(root, p, model.ExecuteTransform(query_inputs=()), system_time=later(p), slices=pieces)
    with pytest.raises(InvalidValueError, match="2 data file"):
        root.append(
            [model.AddData(prev_offset=8, new_watermark=BASE_TIME)],
            system_time=later(p),
            data_files=[extra, extra],
        )
    assert root.head() == head


def test_a_described_file_is_hashed_once_and_its_staged_copy_still_proven(
    root: Dataset, writer: Writer, scratch: Path
) -> None:
    """``append`` takes a described file without re-hashing its records, yet refuses any other bytes."""
    writer.add_data(2)
    p = root.projection()
    path = write_slice(scratch / "a.parquet", DEFAULT_SCHEMA, 2, 3)
    described = describe_data_file(path)
    assert (described.physical_hash, described.logical_hash) == (physical_hash(path), logical_hash(path))
    assert (described.size, described.records) == (path.stat().st_size, 3)

    def event(d: DescribedDataFile, records: int = 3) -> model.AddData:
        interval = model.OffsetInterval(start=2, end=1 + records)
        new_data = model.DataSlice(
            logical_hash=d.logical_hash, physical_hash=d.physical_hash, offset_interval=interval, size=d.size
        )
        return model.AddData(prev_offset=1, new_data=new_data)

    # The file is rewritten after it was described: the copy's hash is not the described one.
    other = write_slice(scratch / "b.parquet", DEFAULT_SCHEMA, 3, 3)
    assert physical_hash(other) != described.physical_hash
    path.write_bytes(other.read_bytes())
    with pytest.raises(IntegrityError, match="physical hash"):
        root.append([event(described)], system_time=later(p), data_files=[described])
    # A description whose logical hash or record count is not the block's is refused too.
    path = write_slice(scratch / "c.parquet", DEFAULT_SCHEMA, 2, 3)
    described = describe_data_file(path)
    for wrong, message in [
        (replace(described, logical_hash=logical_hash(other)), "logical hash"),
        (replace(described, records=4), "holds 4 records"),
    ]:
        with pytest.raises(IntegrityError, match=message):
            root.append([event(described)], system_time=later(p), data_files=[wrong])
    assert root.head() == p.head
    root.append([event(described)], system_time=later(p), data_files=[described])
    assert [(s.start, s.end) for s in data_slices(root)] == [(0, 1), (2, 4)]
