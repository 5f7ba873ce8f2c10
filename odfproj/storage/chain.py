"""The metadata chain's invariants, checked one block at a time against the chain's projection.

Validation needs only the projection of the chain so far, never the blocks themselves, which is
what lets :meth:`Dataset.append` check a new block in constant time and :func:`replay` re-check a
whole chain in one pass (``verify``). Every rule raises :class:`ChainInvariantError` with a message
naming the block and the rule; nothing here touches the disk.

Rules (ODF 0.35 "Metadata Chain", "Metadata Reference", RFC-014, "Schema Evolution"):

- the first block is a Seed, at sequence number 0 without ``prevBlockHash``; no other Seed follows;
- sequence numbers are consecutive and ``prevBlockHash`` is the previous block's hash;
- system time never goes backwards (equal is allowed: one transaction stamps all its blocks alike);
- AddData, SetPollingSource, DisablePollingSource, AddPushSource, DisablePushSource only in root
  datasets; ExecuteTransform, SetTransform only in derivatives;
- ``prevOffset`` equals the end of the last non-empty slice; a new slice starts right after it (at 0
  for the first) and ``end >= start``; data needs a SetDataSchema first;
- ``prevCheckpoint`` equals the physical hash of the previous data event's ``newCheckpoint``;
- watermarks never decrease and, once set, are carried by every data event;
- a later SetDataSchema may only append columns (same names, order, types; nullability may widen):
  :func:`odfproj.odf.schema_diff.diff_schemas`;
- SetTransform inputs are DatasetIds (``did:odf:``), each once; ExecuteTransform covers exactly those
  inputs, each continuing where the previous ExecuteTransform left it (``prevBlockHash``/``prevOffset``);
- DisablePushSource names an enabled push source; DisablePollingSource needs a polling source.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from odfproj.errors import InvalidValueError, SerializationError
from odfproj.odf import model
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multihash
from odfproj.odf.timestamps import format_rfc3339
from odfproj.storage.errors import ChainInvariantError
from odfproj.storage.projection import ChainProjection, InputPosition, advance, event_kind

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["append_block", "check_block", "replay", "schema_evolution_problem"]

_ROOT_ONLY = (
    model.AddData,
    model.SetPollingSource,
    model.DisablePollingSource,
    model.AddPushSource,
    model.DisablePushSource,
)
_DERIVATIVE_ONLY = (model.ExecuteTransform, model.SetTransform)


def _fail(block: model.MetadataBlock, message: str) -> ChainInvariantError:
    return ChainInvariantError(f"block {block.sequence_number} ({event_kind(block.event)}): {message}")


def _short(value: Multihash | None) -> str:
    return value.to_multibase() if value is not None else "none"


def check_block(
    projection: ChainProjection | None, block_hash: Multihash, block: model.MetadataBlock
) -> None:
    """Raise :class:`ChainInvariantError` unless ``block`` may follow the chain described by ``projection``."""
    del block_hash  # a block's own hash constrains nothing; kept for a uniform signature
    event = block.event
    if projection is None:
        if not isinstance(event, model.Seed):
            raise _fail(block, "the first block of a chain must be a Seed")
        if block.sequence_number != 0:
            raise _fail(block, f"sequence number is {block.sequence_number}, the Seed block must have 0")
        if block.prev_block_hash is not None:
            raise _fail(block, "the Seed block must not have a prevBlockHash")
        return
    _check_linkage(projection, block)
    _check_kind(projection, block)
    match event:
        case model.AddData() | model.ExecuteTransform():
            _check_data_event(projection, block, event)
            if isinstance(event, model.ExecuteTransform):
                _check_execute_transform(projection, block, event)
        case model.SetDataSchema():
            _check_schema(projection, block, event)
        case model.SetTransform():
            _check_set_transform(block, event)
        case model.DisablePushSource():
            if event.source_name not in projection.push_sources:
                enabled = ", ".join(sorted(projection.push_sources)) or "none"
                raise _fail(block, f"no enabled push source named {event.source_name!r} (enabled: {enabled})")
        case model.DisablePollingSource():
            if projection.set_polling_source is None:
                raise _fail(block, "there is no polling source to disable")


def _check_linkage(p: ChainProjection, block: model.MetadataBlock) -> None:
    if isinstance(block.event, model.Seed):
        raise _fail(block, "Seed may appear only once, as the first block of the chain")
    expected_seq = p.sequence_number + 1
    if block.sequence_number != expected_seq:
        raise _fail(block, f"sequence number is {block.sequence_number}, expected {expected_seq}")
    if block.prev_block_hash != p.head:
        raise _fail(
            block,
            f"prevBlockHash is {_short(block.prev_block_hash)}, expected the current head {_short(p.head)}",
        )
    if block.system_time < p.system_time:
        raise _fail(
            block,
            f"system time {format_rfc3339(block.system_time)} is earlier than the previous block's "
            f"{format_rfc3339(p.system_time)} (system time may not go backwards)",
        )


def _check_kind(p: ChainProjection, block: model.MetadataBlock) -> None:
    kind = event_kind(block.event)
    if isinstance(block.event, _ROOT_ONLY) and p.kind != model.DatasetKind.Root:
        raise _fail(block, f"{kind} is only allowed in root datasets, this one is {p.kind.name}")
    if isinstance(block.event, _DERIVATIVE_ONLY) and p.kind != model.DatasetKind.Derivative:
        raise _fail(block, f"{kind} is only allowed in derivative datasets, this one is {p.kind.name}")


def _check_data_event(
    p: ChainProjection, block: model.MetadataBlock, event: model.AddData | model.ExecuteTransform
) -> None:
    if event.prev_offset != p.last_offset:
        where = "no data yet" if p.last_offset is None else "the end offset of the last data slice"
        raise _fail(block, f"prevOffset is {event.prev_offset}, expected {p.last_offset} ({where})")
    if event.new_data is not None:
        if p.schema is None:
            raise _fail(block, "data was added before any SetDataSchema: the schema must be set first")
        interval = event.new_data.offset_interval
        expected_start = 0 if p.last_offset is None else p.last_offset + 1
        if interval.start != expected_start:
            raise _fail(
                block,
                f"newData.offsetInterval.start is {interval.start}, expected {expected_start} "
                "(offsets must be contiguous)",
            )
        if interval.end < interval.start:
            raise _fail(
                block, f"newData.offsetInterval end {interval.end} is before its start {interval.start}"
            )
    expected_checkpoint = p.last_checkpoint.physical_hash if p.last_checkpoint else None
    if event.prev_checkpoint != expected_checkpoint:
        raise _fail(
            block,
            f"prevCheckpoint is {_short(event.prev_checkpoint)}, expected {_short(expected_checkpoint)} "
            "(the previous newCheckpoint)",
        )
    if p.watermark is not None:
        if event.new_watermark is None:
            raise _fail(
                block,
                f"newWatermark is missing but the watermark is already {format_rfc3339(p.watermark)} "
                "(once set, every data event must carry it)",
            )
        if event.new_watermark < p.watermark:
            raise _fail(
                block,
                f"newWatermark {format_rfc3339(event.new_watermark)} is earlier than the current "
                f"watermark {format_rfc3339(p.watermark)} (watermarks may not go backwards)",
            )


def _transform_input_ids(event: model.SetTransform) -> list[DatasetId]:
    return [DatasetId.from_did_str(i.dataset_ref) for i in event.inputs]


def _check_set_transform(block: model.MetadataBlock, event: model.SetTransform) -> None:
    seen: set[DatasetId] = set()
    for index, transform_input in enumerate(event.inputs):
        try:
            dataset_id = DatasetId.from_did_str(transform_input.dataset_ref)
        except InvalidValueError:
            raise _fail(
                block,
                "input references must be resolved to DatasetIds before commit "
                f"(input {index} is {transform_input.dataset_ref!r})",
            ) from None
        if dataset_id in seen:
            raise _fail(block, f"input {dataset_id} is listed more than once")
        seen.add(dataset_id)


def _check_execute_transform(
    p: ChainProjection, block: model.MetadataBlock, event: model.ExecuteTransform
) -> None:
    if p.set_transform is None:
        raise _fail(block, "ExecuteTransform before any SetTransform")
    expected = _transform_input_ids(p.set_transform)
    given = [qi.dataset_id for qi in event.query_inputs]
    duplicates = sorted({str(d) for d in given if given.count(d) > 1})
    if duplicates:
        raise _fail(block, f"queryInputs list {', '.join(duplicates)} more than once")
    missing = [str(d) for d in expected if d not in given]
    unexpected = [str(d) for d in given if d not in expected]
    if missing or unexpected:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"not inputs of the SetTransform: {', '.join(unexpected)}"] if unexpected else []
        )
        raise _fail(block, "queryInputs must match the SetTransform inputs: " + "; ".join(parts))
    for qi in event.query_inputs:
        last = p.inputs.get(qi.dataset_id, InputPosition())
        if qi.prev_block_hash != last.new_block_hash:
            raise _fail(
                block,
                f"input {qi.dataset_id}: prevBlockHash is {_short(qi.prev_block_hash)}, expected "
                f"{_short(last.new_block_hash)} (the last newBlockHash of this input)",
            )
        if qi.prev_offset != last.new_offset:
            raise _fail(
                block,
                f"input {qi.dataset_id}: prevOffset is {qi.prev_offset}, expected {last.new_offset} "
                "(the last newOffset of this input)",
            )
        if qi.new_offset is not None and qi.prev_offset is not None and qi.new_offset < qi.prev_offset:
            raise _fail(
                block,
                f"input {qi.dataset_id}: newOffset {qi.new_offset} is before prevOffset {qi.prev_offset}",
            )


def _check_schema(p: ChainProjection, block: model.MetadataBlock, event: model.SetDataSchema) -> None:
    # The schema modules import pyarrow (0.1 s): only a chain that gains a schema block needs them.
    from odfproj.odf.odf_schema import arrow_schema_of

    try:
        new = arrow_schema_of(event)
    except SerializationError as e:
        raise _fail(block, f"schema is not a valid Arrow schema: {e}") from None
    if p.schema is None:
        return
    problem = schema_evolution_problem(p.arrow_schema, new)
    if problem:
        raise _fail(block, f"{problem} (a schema may only gain new columns at the end)")


def schema_evolution_problem(old: pa.Schema | None, new: pa.Schema) -> str | None:
    """Why ``new`` is not an additive evolution of the stored layout ``old``, or ``None`` if it is.

    The rule is :func:`odfproj.odf.schema_diff.diff_schemas`: old columns keep their position, name,
    type and nullability (which may only widen); new columns come at the end.
    """
    if old is None:
        return None
    from odfproj.odf.schema_diff import diff_schemas

    problems = diff_schemas(old, new).problems()
    return f"the new schema {problems[0]}" if problems else None


def append_block(
    projection: ChainProjection | None, block_hash: Multihash, block: model.MetadataBlock
) -> ChainProjection:
    """Validate ``block`` against ``projection`` and return the projection with it appended."""
    check_block(projection, block_hash, block)
    return advance(projection, block_hash, block)


def replay(blocks: Iterable[tuple[Multihash, model.MetadataBlock]]) -> ChainProjection | None:
    """Validate a whole chain given oldest first; the projection at its end (``None`` if empty)."""
    projection: ChainProjection | None = None
    for block_hash, block in blocks:
        projection = append_block(projection, block_hash, block)
    return projection
