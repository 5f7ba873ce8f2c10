"""Each chain invariant, violated once: a specific message, and the head and every file left as they were."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from odfproj.errors import InvalidValueError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash, encode_block
from odfproj.odf.identity import DatasetKeyPair
from odfproj.odf.multiformats import Multicodec, Multihash
from odfproj.storage.chain import check_block, replay
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import ChainInvariantError, HeadMovedError, IntegrityError
from odfproj.storage.hashing import LOGICAL_HASH_CODEC
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import (
    BASE_TIME,
    COMMON_FIELDS,
    DEFAULT_SCHEMA,
    Writer,
    add_transform,
    data_slice,
    fake_block_hash,
    polling_source,
    push_source,
    schema_with,
    set_schema,
    set_transform,
    snapshot,
    write_checkpoint,
    write_slice,
)


def fake_slice(start: int, end: int) -> model.DataSlice:
    """A slice whose file does not exist: enough for rules checked before any file is looked at."""
    return model.DataSlice(
        logical_hash=Multihash(LOGICAL_HASH_CODEC, b"\1" * 32),
        physical_hash=Multihash.sha3_256(f"{start}-{end}".encode()),
        offset_interval=model.OffsetInterval(start=start, end=end),
        size=100,
    )


def assert_rejected(
    dataset: Dataset,
    events: list[model.MetadataEvent],
    message: str,
    error: type[Exception] = ChainInvariantError,
    **kwargs: Any,
) -> None:
    dataset.projection()  # settle the projection cache so the snapshot is the steady state
    head = dataset.head()
    before = snapshot(dataset.path)
    with pytest.raises(error, match=re.escape(message)) as caught:
        dataset.append(events, **kwargs)
    assert "\n" not in str(caught.value)
    assert dataset.head() == head
    assert snapshot(dataset.path) == before


# --- structure ----------------------------------------------------------------------------------------


def test_seed_may_appear_only_once(root: Dataset) -> None:
    seed = model.Seed(dataset_id=DatasetKeyPair.generate().dataset_id, dataset_kind=model.DatasetKind.Root)
    assert_rejected(root, [seed], "Seed may appear only once, as the first block")


def _block(
    seq: int, prev: Multihash | None, event: model.MetadataEvent
) -> tuple[Multihash, model.MetadataBlock]:
    block = model.MetadataBlock(system_time=BASE_TIME, prev_block_hash=prev, sequence_number=seq, event=event)
    return block_hash(encode_block(block)), block


def _seed() -> tuple[Multihash, model.MetadataBlock]:
    key = DatasetKeyPair.generate()
    return _block(0, None, model.Seed(dataset_id=key.dataset_id, dataset_kind=model.DatasetKind.Root))


def test_first_block_must_be_seed() -> None:
    h, block = _block(0, None, model.SetInfo(description="x"))
    with pytest.raises(ChainInvariantError, match="the first block of a chain must be a Seed"):
        check_block(None, h, block)


def test_seed_block_has_sequence_number_zero_and_no_parent() -> None:
    seed_hash, seed = _seed()
    moved = model.MetadataBlock(system_time=BASE_TIME, sequence_number=1, event=seed.event)
    with pytest.raises(ChainInvariantError, match="the Seed block must have 0"):
        check_block(None, seed_hash, moved)
    orphan = model.MetadataBlock(
        system_time=BASE_TIME, sequence_number=0, event=seed.event, prev_block_hash=seed_hash
    )
    with pytest.raises(ChainInvariantError, match="must not have a prevBlockHash"):
        check_block(None, seed_hash, orphan)


def test_sequence_numbers_are_consecutive() -> None:
    seed_hash, seed = _seed()
    projection = replay([(seed_hash, seed)])
    h, skipping = _block(2, seed_hash, model.SetInfo(description="x"))
    with pytest.raises(ChainInvariantError, match="sequence number is 2, expected 1"):
        check_block(projection, h, skipping)


def test_prev_block_hash_links_to_the_head() -> None:
    seed_hash, seed = _seed()
    projection = replay([(seed_hash, seed)])
    h, forked = _block(1, fake_block_hash(1), model.SetInfo(description="x"))
    with pytest.raises(ChainInvariantError, match="expected the current head"):
        check_block(projection, h, forked)


def test_system_time_may_not_go_backwards(root: Dataset) -> None:
    head_time = root.get_block(root.head()).system_time
    assert_rejected(
        root,
        [model.SetInfo(description="late")],
        "is earlier than the previous block's",
        system_time=head_time - timedelta(seconds=1),
    )


def test_equal_system_time_is_allowed(root: Dataset) -> None:
    head_time = root.get_block(root.head()).system_time
    root.append([model.SetInfo(description="same instant")], system_time=head_time)
    assert root.projection().system_time == head_time


def test_a_failing_event_rejects_the_whole_batch(root: Dataset) -> None:
    assert_rejected(
        root,
        [model.SetInfo(description="fine"), model.AddData(prev_offset=7)],
        "block 3 (AddData): prevOffset is 7, expected None",
    )


# --- offsets ------------------------------------------------------------------------------------------


def test_prev_offset_must_be_the_last_slice_end(writer: Writer, root: Dataset) -> None:
    writer.add_data(3)
    assert_rejected(root, [model.AddData(prev_offset=5)], "prevOffset is 5, expected 2")


def test_prev_offset_must_be_none_before_data(root: Dataset) -> None:
    assert_rejected(root, [model.AddData(prev_offset=0)], "prevOffset is 0, expected None (no data yet)")


def test_offsets_start_at_zero(root: Dataset) -> None:
    assert_rejected(
        root, [model.AddData(new_data=fake_slice(1, 3))], "newData.offsetInterval.start is 1, expected 0"
    )


def test_offsets_are_contiguous(writer: Writer, root: Dataset) -> None:
    writer.add_data(3)
    assert_rejected(
        root,
        [model.AddData(prev_offset=2, new_data=fake_slice(4, 6))],
        "newData.offsetInterval.start is 4, expected 3 (offsets must be contiguous)",
    )


def test_interval_end_not_before_start(writer: Writer, root: Dataset) -> None:
    writer.add_data(3)
    assert_rejected(
        root, [model.AddData(prev_offset=2, new_data=fake_slice(3, 2))], "end 2 is before its start 3"
    )


def test_data_needs_a_schema_first(workspace: Workspace) -> None:
    bare = workspace.create("bare", model.DatasetKind.Root)
    assert_rejected(
        bare, [model.AddData(new_data=fake_slice(0, 1))], "data was added before any SetDataSchema"
    )


# --- watermarks and checkpoints -----------------------------------------------------------------------


def test_watermark_may_not_go_backwards(writer: Writer, root: Dataset) -> None:
    writer.add_data(1, watermark=BASE_TIME + timedelta(hours=2))
    assert_rejected(
        root,
        [model.AddData(prev_offset=0, new_watermark=BASE_TIME + timedelta(hours=1))],
        "is earlier than the current watermark 2024-01-01T02:00:00Z",
    )


def test_watermark_may_not_be_dropped(writer: Writer, root: Dataset) -> None:
    writer.add_data(1, watermark=BASE_TIME)
    assert_rejected(
        root, [model.AddData(prev_offset=0)], "newWatermark is missing but the watermark is already"
    )


def test_prev_checkpoint_must_be_the_last_new_checkpoint(writer: Writer, root: Dataset) -> None:
    writer.add_data(1, checkpoint=b"state-1")
    last = root.projection().last_checkpoint
    assert last is not None
    assert_rejected(
        root, [model.AddData(prev_offset=0)], f"prevCheckpoint is none, expected {last.physical_hash}"
    )
    assert_rejected(
        root,
        [model.AddData(prev_offset=0, prev_checkpoint=fake_block_hash(9))],
        "(the previous newCheckpoint)",
    )


def test_carried_checkpoint_needs_no_file(writer: Writer, root: Dataset) -> None:
    writer.add_data(1, checkpoint=b"kept")
    last = root.projection().last_checkpoint
    root.append([model.AddData(prev_offset=0, prev_checkpoint=last.physical_hash, new_checkpoint=last)])
    assert root.projection().last_checkpoint == last


# --- schema evolution ---------------------------------------------------------------------------------

_BASE = schema_with(("a", pa.string()), ("b", pa.int64()))


@pytest.mark.parametrize(
    ("new_schema", "message"),
    [
        (schema_with(("a", pa.string())), "removes or renames column 'b'"),
        (
            schema_with(("a", pa.string()), ("b", pa.int32())),
            "changes the type of column 'b' from int64 to int32",
        ),
        (schema_with(("b", pa.int64()), ("a", pa.string())), "moves column 'a' from position 4 to 5"),
        (schema_with(("a", pa.string()), ("c", pa.int64())), "removes or renames column 'b'"),
        (
            schema_with(("a", pa.string()), ("x", pa.int64()), ("b", pa.int64())),
            "moves column 'b' from position 5 to 6",
        ),
        (
            pa.schema(
                [*COMMON_FIELDS, pa.field("a", pa.string(), nullable=False), pa.field("b", pa.int64())]
            ),
            "makes column 'a' NOT NULL",
        ),
    ],
    ids=["removed", "retyped", "reordered", "renamed", "inserted", "not-null"],
)
def test_schema_may_only_gain_columns_at_the_end(
    workspace: Workspace, new_schema: pa.Schema, message: str
) -> None:
    dataset = workspace.create("evolving", model.DatasetKind.Root)
    dataset.append([set_schema(_BASE)])
    assert_rejected(dataset, [set_schema(new_schema)], message)


def test_schema_can_gain_a_column_and_then_data_uses_it(workspace: Workspace, scratch: Path) -> None:
    dataset = workspace.create("evolving", model.DatasetKind.Root)
    dataset.append([set_schema(_BASE)])
    Writer(dataset, scratch).add_data(2)
    wider = schema_with(("a", pa.string()), ("b", pa.int64()), ("c", pa.float64()))
    dataset.append([set_schema(wider)])
    Writer(dataset, scratch).add_data(2)
    assert dataset.projection().arrow_schema == wider
    assert dataset.projection().schema_ddl()[-1] == "c DOUBLE"


def test_schema_bytes_must_decode(root: Dataset) -> None:
    assert_rejected(root, [model.SetDataSchema(schema=b"\0\1\2")], "schema is not a valid Arrow schema")


# --- dataset kinds ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        model.AddData(),
        polling_source(),
        model.DisablePollingSource(),
        push_source("p"),
        model.DisablePushSource(source_name="p"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_root_only_events_are_rejected_in_derivatives(
    derivative: Dataset, event: model.MetadataEvent
) -> None:
    kind = type(event).__name__
    assert_rejected(derivative, [event], f"{kind} is only allowed in root datasets, this one is Derivative")


@pytest.mark.parametrize(
    "event",
    [model.ExecuteTransform(query_inputs=()), set_transform(DatasetKeyPair.generate().dataset_id)],
    ids=lambda e: type(e).__name__,
)
def test_derivative_only_events_are_rejected_in_roots(root: Dataset, event: model.MetadataEvent) -> None:
    kind = type(event).__name__
    assert_rejected(root, [event], f"{kind} is only allowed in derivative datasets, this one is Root")


# --- sources ------------------------------------------------------------------------------------------


def test_disable_push_source_needs_an_enabled_one(root: Dataset) -> None:
    root.append([push_source("a"), push_source("b"), model.DisablePushSource(source_name="b")])
    assert root.projection().push_sources.keys() == {"a"}
    assert_rejected(
        root, [model.DisablePushSource(source_name="b")], "no enabled push source named 'b' (enabled: a)"
    )


def test_disable_polling_source_needs_one(root: Dataset) -> None:
    assert_rejected(root, [model.DisablePollingSource()], "there is no polling source to disable")
    root.append([polling_source(), model.DisablePollingSource()])
    assert root.projection().set_polling_source is None


# --- derivatives --------------------------------------------------------------------------------------


def test_transform_inputs_must_be_dataset_ids(derivative: Dataset) -> None:
    alias = model.SetTransform(
        inputs=(model.TransformInput(dataset_ref="root"),),
        transform=model.TransformSql(engine="spark", query="select 1"),
    )
    assert_rejected(
        derivative,
        [alias],
        "input references must be resolved to DatasetIds before commit (input 0 is 'root')",
    )


def test_transform_inputs_are_unique(derivative: Dataset, root: Dataset) -> None:
    assert_rejected(derivative, [set_transform(root.dataset_id, root.dataset_id)], "is listed more than once")


def test_execute_transform_needs_a_set_transform(workspace: Workspace) -> None:
    bare = workspace.create("bare", model.DatasetKind.Derivative)
    assert_rejected(
        bare, [model.ExecuteTransform(query_inputs=())], "ExecuteTransform before any SetTransform"
    )


def test_execute_transform_covers_exactly_the_inputs(derivative: Dataset, root: Dataset) -> None:
    stranger = DatasetKeyPair.generate().dataset_id
    assert_rejected(
        derivative,
        [model.ExecuteTransform(query_inputs=(model.ExecuteTransformInput(dataset_id=stranger),))],
        f"queryInputs must match the SetTransform inputs: missing {root.dataset_id}; "
        f"not inputs of the SetTransform: {stranger}",
    )


def test_execute_transform_input_blocks_are_contiguous(
    derivative: Dataset, root: Dataset, scratch: Path
) -> None:
    add_transform(derivative, scratch, 2, input_rows=3)
    last = derivative.projection().inputs[root.dataset_id]
    assert_rejected(
        derivative,
        [
            model.ExecuteTransform(
                prev_offset=1,
                query_inputs=(
                    model.ExecuteTransformInput(
                        dataset_id=root.dataset_id,
                        prev_block_hash=fake_block_hash(77),
                        prev_offset=last.new_offset,
                    ),
                ),
            )
        ],
        f"prevBlockHash is {fake_block_hash(77)}, expected {last.new_block_hash}",
    )


def test_execute_transform_input_offsets_are_contiguous(
    derivative: Dataset, root: Dataset, scratch: Path
) -> None:
    add_transform(derivative, scratch, 2, input_rows=3)
    last = derivative.projection().inputs[root.dataset_id]
    assert last.new_offset == 2
    assert_rejected(
        derivative,
        [
            model.ExecuteTransform(
                prev_offset=1,
                query_inputs=(
                    model.ExecuteTransformInput(
                        dataset_id=root.dataset_id, prev_block_hash=last.new_block_hash, prev_offset=5
                    ),
                ),
            )
        ],
        "prevOffset is 5, expected 2 (the last newOffset of this input)",
    )


def test_execute_transform_input_offsets_do_not_go_backwards(
    derivative: Dataset, root: Dataset, scratch: Path
) -> None:
    add_transform(derivative, scratch, 1, input_rows=3)
    last = derivative.projection().inputs[root.dataset_id]
    assert_rejected(
        derivative,
        [
            model.ExecuteTransform(
                prev_offset=0,
                query_inputs=(
                    model.ExecuteTransformInput(
                        dataset_id=root.dataset_id,
                        prev_block_hash=last.new_block_hash,
                        new_block_hash=fake_block_hash(5),
                        prev_offset=2,
                        new_offset=1,
                    ),
                ),
            )
        ],
        "newOffset 1 is before prevOffset 2",
    )


# --- files --------------------------------------------------------------------------------------------


def test_data_file_must_match_physical_hash(root: Dataset, scratch: Path) -> None:
    real = write_slice(scratch / "real.parquet", DEFAULT_SCHEMA, 0, 3)
    other = write_slice(scratch / "other.parquet", DEFAULT_SCHEMA, 0, 4)
    slice_ = data_slice(real, 0, 3)
    forged = model.DataSlice(
        logical_hash=slice_.logical_hash,
        physical_hash=slice_.physical_hash,
        offset_interval=slice_.offset_interval,
        size=other.stat().st_size,
    )
    assert_rejected(
        root,
        [model.AddData(new_data=forged)],
        "does not match newData of block 2: physical hash is",
        error=IntegrityError,
        data_file=other,
    )


def test_data_file_must_match_size(root: Dataset, scratch: Path) -> None:
    real = write_slice(scratch / "real.parquet", DEFAULT_SCHEMA, 0, 3)
    slice_ = data_slice(real, 0, 3)
    forged = model.DataSlice(
        logical_hash=slice_.logical_hash,
        physical_hash=slice_.physical_hash,
        offset_interval=slice_.offset_interval,
        size=slice_.size + 1,
    )
    assert_rejected(
        root,
        [model.AddData(new_data=forged)],
        f"size is {slice_.size} bytes, the block says {slice_.size + 1}",
        error=IntegrityError,
        data_file=real,
    )


def test_data_file_must_match_logical_hash(root: Dataset, scratch: Path) -> None:
    real = write_slice(scratch / "real.parquet", DEFAULT_SCHEMA, 0, 3)
    slice_ = data_slice(real, 0, 3)
    forged = model.DataSlice(
        logical_hash=Multihash(LOGICAL_HASH_CODEC, b"\7" * 32),
        physical_hash=slice_.physical_hash,
        offset_interval=slice_.offset_interval,
        size=slice_.size,
    )
    assert_rejected(
        root, [model.AddData(new_data=forged)], "logical hash is", error=IntegrityError, data_file=real
    )


def test_data_file_must_hold_the_interval_records(root: Dataset, scratch: Path) -> None:
    real = write_slice(scratch / "real.parquet", DEFAULT_SCHEMA, 0, 3)
    slice_ = data_slice(real, 0, 3)
    wider = model.DataSlice(
        logical_hash=slice_.logical_hash,
        physical_hash=slice_.physical_hash,
        offset_interval=model.OffsetInterval(start=0, end=4),
        size=slice_.size,
    )
    assert_rejected(
        root,
        [model.AddData(new_data=wider)],
        "holds 3 records, but offsetInterval [0, 4] covers 5",
        error=IntegrityError,
        data_file=real,
    )


def test_new_data_needs_its_file(root: Dataset) -> None:
    assert_rejected(
        root,
        [model.AddData(new_data=fake_slice(0, 1))],
        "missing data file (pass data_file)",
        error=IntegrityError,
    )


def test_checkpoint_file_must_match(root: Dataset, scratch: Path) -> None:
    path, checkpoint = write_checkpoint(scratch / "ck", b"checkpoint bytes")
    other, _ = write_checkpoint(scratch / "ck2", b"checkpoint BYTES")
    assert_rejected(
        root,
        [model.AddData(new_checkpoint=checkpoint)],
        "does not match newCheckpoint of block 2: physical hash is",
        error=IntegrityError,
        checkpoint_file=other,
    )
    bigger = model.Checkpoint(physical_hash=checkpoint.physical_hash, size=checkpoint.size + 5)
    assert_rejected(
        root,
        [model.AddData(new_checkpoint=bigger)],
        "size is 16 bytes, the block says 21",
        error=IntegrityError,
        checkpoint_file=path,
    )
    assert_rejected(
        root,
        [model.AddData(new_checkpoint=checkpoint)],
        "missing checkpoint file (pass checkpoint_file)",
        error=IntegrityError,
    )


# --- compare-and-swap ---------------------------------------------------------------------------------


def test_expected_head_mismatch_raises_head_moved(writer: Writer, root: Dataset) -> None:
    planned = root.head()
    writer.add_data(1)
    moved_to = root.head()
    assert_rejected(
        root,
        [model.SetInfo(description="from an old plan")],
        f"dataset root: head moved from {planned} to {moved_to} since the plan was made",
        error=HeadMovedError,
        expected_head=planned,
    )


def test_expected_head_match_commits(root: Dataset) -> None:
    head = root.head()
    new = root.append([model.SetInfo(description="ok")], expected_head=head)
    assert root.head() == new != head
    assert root.get_block(new).prev_block_hash == head


def test_multihash_code_is_checked() -> None:
    # Guard for fake_slice: the physical hash must be a real sha3-256 multihash.
    assert fake_slice(0, 1).physical_hash.code == Multicodec.SHA3_256


# --- bad arguments ------------------------------------------------------------------------------------


def test_only_metadata_events_can_be_appended(root: Dataset) -> None:
    with pytest.raises(InvalidValueError, match="append takes metadata events, got DataSlice"):
        root.append([fake_slice(0, 1)])  # type: ignore[list-item]
    with pytest.raises(InvalidValueError, match="at least one event"):
        root.append([])


def test_naive_system_time_is_rejected(root: Dataset) -> None:
    with pytest.raises(InvalidValueError, match="has no time zone"):
        root.append([model.SetInfo(description="x")], system_time=BASE_TIME.replace(tzinfo=None))
