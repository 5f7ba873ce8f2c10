"""The chain's current state (its *projection*) and how one block changes it.

Planning compares manifests with a chain's state; re-reading every block for that would make plan
time grow with history. A :class:`ChainProjection` is everything the planner and the validator need
about the chain up to its head, folded block by block with :func:`advance`, and cached on disk as
JSON keyed by the head hash.

:func:`advance` trusts its input: the invariants are checked first by :mod:`odfproj.storage.chain`.

JSON form: events and fragments go through the YAML codec's ``to_data``/``from_data`` (so they are
written exactly as in manifests). Only the definition events are stored; the latest-of-each fields
(``set_info``, ``push_sources``, ``schema``...) are re-derived from them on load, so the two can
never disagree.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from odfproj.errors import InvalidValueError, SerializationError
from odfproj.odf import model
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multihash
from odfproj.odf.timestamps import format_rfc3339, parse_rfc3339
from odfproj.odf.yaml_codec import from_data, to_data

if TYPE_CHECKING:  # the schema modules import pyarrow (0.1 s), which reading a chain's state never needs
    import pyarrow as pa

#: Bumped whenever the JSON layout changes; a cache of another format is simply rebuilt.
PROJECTION_FORMAT = 1


def _empty() -> Mapping[Any, Any]:
    return MappingProxyType({})


DATA_EVENTS = (model.AddData, model.ExecuteTransform)


def event_kind(event: model.MetadataEvent) -> str:
    """The event's ``kind`` tag as written in manifests (``AddData``, ``SetDataSchema``...)."""
    return model.VARIANT_OF[type(event)][1]


@dataclass(frozen=True)
class InputPosition:
    """How far a derivative has consumed one input: the last non-empty ``newBlockHash``/``newOffset``."""

    new_block_hash: Multihash | None = None
    new_offset: int | None = None


@dataclass(frozen=True)
class DefinitionEvent:
    """A non-data event (everything except Seed, AddData, ExecuteTransform) and where it sits."""

    sequence_number: int
    block_hash: Multihash
    event: model.MetadataEvent


@dataclass(frozen=True, repr=False)
class ChainProjection:
    """The state of a metadata chain at ``head``; immutable, replaced on every block."""

    dataset_id: DatasetId
    kind: model.DatasetKind
    head: Multihash
    sequence_number: int
    #: System time of the head block (the next block's may not be earlier).
    system_time: datetime
    #: End offset of the last non-empty data slice, ``None`` before any data.
    last_offset: int | None = None
    watermark: datetime | None = None
    #: ``newCheckpoint`` of the last AddData/ExecuteTransform (``None`` drops the checkpoint).
    last_checkpoint: model.Checkpoint | None = None
    has_data: bool = False
    #: Last ``newSourceState`` per source name.
    source_states: Mapping[str, model.SourceState] = field(default_factory=_empty)
    #: Per input dataset of a derivative, the last consumed block and offset.
    inputs: Mapping[DatasetId, InputPosition] = field(default_factory=_empty)
    #: Every definition event in chain order (for drift detection against manifests).
    definition_events: tuple[DefinitionEvent, ...] = ()
    # --- latest of each definition event (derived from ``definition_events``) ---
    #: Arrow schema bytes of the last SetDataSchema.
    schema: bytes | None = None
    set_polling_source: model.SetPollingSource | None = None
    set_transform: model.SetTransform | None = None
    set_vocab: model.SetVocab | None = None
    set_info: model.SetInfo | None = None
    set_license: model.SetLicense | None = None
    set_attachments: model.SetAttachments | None = None
    #: Enabled push sources by name (disabled ones removed).
    push_sources: Mapping[str, model.AddPushSource] = field(default_factory=_empty)

    def __repr__(self) -> str:
        return (
            f"ChainProjection({self.dataset_id}, {self.kind.name}, head={self.head.short()}, "
            f"sequence_number={self.sequence_number}, last_offset={self.last_offset}, "
            f"watermark={self.watermark}, definition_events={len(self.definition_events)})"
        )

    @property
    def block_count(self) -> int:
        return self.sequence_number + 1

    @cached_property
    def arrow_schema(self) -> pa.Schema | None:
        """The current data schema, decoded once per projection object."""
        from odfproj.odf.arrow_schema import decode_arrow_schema

        return decode_arrow_schema(self.schema) if self.schema is not None else None

    def schema_ddl(self) -> list[str] | None:
        """The current data schema as DDL column entries (as manifests write it)."""
        from odfproj.odf.ddl import format_ddl_schema

        schema = self.arrow_schema
        return format_ddl_schema(schema) if schema is not None else None

    # --- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(self.to_data(), indent=1, ensure_ascii=False)

    def to_data(self) -> dict[str, Any]:
        """The JSON form as plain data (what :meth:`to_json` writes), for records that embed a projection."""
        return {
            "format": PROJECTION_FORMAT,
            "datasetId": self.dataset_id.as_did_str(),
            "kind": self.kind.name,
            "head": self.head.to_multibase(),
            "sequenceNumber": self.sequence_number,
            "systemTime": format_rfc3339(self.system_time),
            "lastOffset": self.last_offset,
            "watermark": format_rfc3339(self.watermark) if self.watermark else None,
            "lastCheckpoint": to_data(self.last_checkpoint) if self.last_checkpoint else None,
            "hasData": self.has_data,
            "sourceStates": [to_data(state) for state in self.source_states.values()],
            "inputs": [
                {
                    "datasetId": dataset_id.as_did_str(),
                    "newBlockHash": pos.new_block_hash.to_multibase() if pos.new_block_hash else None,
                    "newOffset": pos.new_offset,
                }
                for dataset_id, pos in self.inputs.items()
            ],
            "definitionEvents": [
                {
                    "sequenceNumber": d.sequence_number,
                    "blockHash": d.block_hash.to_multibase(),
                    "event": to_data(d.event),
                }
                for d in self.definition_events
            ],
        }

    @classmethod
    def from_json(cls, text: str | bytes) -> ChainProjection:
        """Parse :meth:`to_json` output; any malformation raises :class:`InvalidValueError`."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise InvalidValueError(f"malformed projection cache: {type(e).__name__}: {e}") from None
        return cls.from_data(data)

    @classmethod
    def from_data(cls, data: Any) -> ChainProjection:
        """Parse :meth:`to_data` output; any malformation raises :class:`InvalidValueError`."""
        try:
            if not isinstance(data, dict) or data.get("format") != PROJECTION_FORMAT:
                raise InvalidValueError("not a projection cache of the current format")
            checkpoint = data["lastCheckpoint"]
            projection = cls(
                dataset_id=DatasetId.from_did_str(data["datasetId"]),
                kind=model.DatasetKind[data["kind"]],
                head=Multihash.from_multibase(data["head"]),
                sequence_number=_int(data["sequenceNumber"]),
                system_time=parse_rfc3339(data["systemTime"]),
                last_offset=_opt_int(data["lastOffset"]),
                watermark=parse_rfc3339(data["watermark"]) if data["watermark"] is not None else None,
                last_checkpoint=from_data("Checkpoint", checkpoint) if checkpoint is not None else None,
                has_data=bool(data["hasData"]),
                source_states=MappingProxyType(
                    {s.source_name: s for s in (from_data("SourceState", s) for s in data["sourceStates"])}
                ),
                inputs=MappingProxyType(
                    {
                        DatasetId.from_did_str(i["datasetId"]): InputPosition(
                            Multihash.from_multibase(i["newBlockHash"]) if i["newBlockHash"] else None,
                            _opt_int(i["newOffset"]),
                        )
                        for i in data["inputs"]
                    }
                ),
            )
            for d in data["definitionEvents"]:
                definition = DefinitionEvent(
                    _int(d["sequenceNumber"]),
                    Multihash.from_multibase(d["blockHash"]),
                    from_data("MetadataEvent", d["event"]),
                )
                projection = _with_definition(projection, definition)
            return projection
        except (KeyError, TypeError, ValueError, AttributeError, SerializationError) as e:
            raise InvalidValueError(f"malformed projection cache: {type(e).__name__}: {e}") from None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValueError(f"expected an integer, got {value!r}")
    return value


def _opt_int(value: Any) -> int | None:
    return None if value is None else _int(value)


class ProjectionMemo:
    """Projections already parsed, by dataset folder: shared by the handles one workspace opens.

    Every :class:`~odfproj.storage.dataset.Dataset` handle starts empty, so a run or plan that opens
    a dataset several times (its own step, then as an input of each reader) would parse the on-disk
    cache each time. Sharing is safe because a projection is immutable and is handed out only for the
    exact head it was folded to: a head names its whole chain, so nothing stale can be served.
    """

    def __init__(self) -> None:
        self._by_path: dict[Path, ChainProjection] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, head: Multihash) -> ChainProjection | None:
        with self._lock:
            projection = self._by_path.get(path)
        return projection if projection is not None and projection.head == head else None

    def put(self, path: Path, projection: ChainProjection) -> None:
        with self._lock:
            self._by_path[path] = projection


# --- folding ------------------------------------------------------------------------------------------


def advance(
    projection: ChainProjection | None, block_hash: Multihash, block: model.MetadataBlock
) -> ChainProjection:
    """The projection after ``block`` (already validated) is appended."""
    event = block.event
    if isinstance(event, model.Seed):
        return ChainProjection(
            dataset_id=event.dataset_id,
            kind=event.dataset_kind,
            head=block_hash,
            sequence_number=block.sequence_number,
            system_time=block.system_time,
        )
    if projection is None:
        raise ValueError("only a Seed block can start a projection")
    moved = dataclasses.replace(
        projection, head=block_hash, sequence_number=block.sequence_number, system_time=block.system_time
    )
    if isinstance(event, model.AddData | model.ExecuteTransform):
        return _with_data_event(moved, event)
    return _with_definition(moved, DefinitionEvent(block.sequence_number, block_hash, event))


def _with_data_event(p: ChainProjection, event: model.AddData | model.ExecuteTransform) -> ChainProjection:
    changes: dict[str, Any] = {"last_checkpoint": event.new_checkpoint}
    if event.new_data is not None:
        changes["last_offset"] = event.new_data.offset_interval.end
        changes["has_data"] = True
    if event.new_watermark is not None:
        changes["watermark"] = event.new_watermark
    if isinstance(event, model.AddData) and event.new_source_state is not None:
        state = event.new_source_state
        changes["source_states"] = MappingProxyType({**p.source_states, state.source_name: state})
    if isinstance(event, model.ExecuteTransform):
        inputs = dict(p.inputs)
        for qi in event.query_inputs:
            old = inputs.get(qi.dataset_id, InputPosition())
            inputs[qi.dataset_id] = InputPosition(
                qi.new_block_hash if qi.new_block_hash is not None else old.new_block_hash,
                qi.new_offset if qi.new_offset is not None else old.new_offset,
            )
        changes["inputs"] = MappingProxyType(inputs)
    return dataclasses.replace(p, **changes)


def _schema_bytes(event: model.SetDataSchema) -> bytes:
    """The stored Arrow form of the schema. A 0.35 block carries those bytes; only the newer ODF form is
    converted, by ``odf_schema`` (which imports pyarrow: 0.1 s that reading a 0.35 chain never needs)."""
    if event.schema is not None:
        return event.schema
    from odfproj.odf.odf_schema import arrow_schema_bytes

    return arrow_schema_bytes(event)


def _with_definition(p: ChainProjection, definition: DefinitionEvent) -> ChainProjection:
    event = definition.event
    changes: dict[str, Any] = {"definition_events": (*p.definition_events, definition)}
    match event:
        case model.SetDataSchema():
            changes["schema"] = _schema_bytes(event)
        case model.SetPollingSource():
            changes["set_polling_source"] = event
        case model.DisablePollingSource():
            changes["set_polling_source"] = None
        case model.AddPushSource():
            changes["push_sources"] = MappingProxyType({**p.push_sources, event.source_name: event})
        case model.DisablePushSource():
            remaining = {k: v for k, v in p.push_sources.items() if k != event.source_name}
            changes["push_sources"] = MappingProxyType(remaining)
        case model.SetTransform():
            changes["set_transform"] = event
        case model.SetVocab():
            changes["set_vocab"] = event
        case model.SetInfo():
            changes["set_info"] = event
        case model.SetLicense():
            changes["set_license"] = event
        case model.SetAttachments():
            changes["set_attachments"] = event
        case _:
            raise ValueError(f"{event_kind(event)} is not a definition event")
    return dataclasses.replace(p, **changes)
