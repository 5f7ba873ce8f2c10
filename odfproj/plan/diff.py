"""Desired (a manifest) versus actual (a chain's definition events) for one dataset.

Definition events are compared by *key*, not by position: the latest ``SetInfo`` is the dataset's info
whatever came between, and a push source is identified by its name. So a manifest whose events are merely
re-ordered appends nothing, and an update appends exactly the events whose value changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from odfproj.odf import model
from odfproj.odf.yaml_codec import to_data
from odfproj.plan import evolution
from odfproj.plan.model import Action, AppendDefinitions, EventChange
from odfproj.storage.update_record import UpdateRecord

if TYPE_CHECKING:
    import pyarrow as pa

#: Events that manifests define; the rest (Seed, AddData, ExecuteTransform) are written by odfproj itself.
DEFINITION_EVENTS = (
    model.SetPollingSource,
    model.DisablePollingSource,
    model.AddPushSource,
    model.DisablePushSource,
    model.SetTransform,
    model.SetVocab,
    model.SetInfo,
    model.SetLicense,
    model.SetAttachments,
    model.SetDataSchema,
)

#: Definition slots that ingest and transforms fill themselves (the data schema follows the data), so
#: a manifest that does not set them leaves them alone and their appearance is not drift.
WRITTEN_BY_DATA = frozenset({"SetDataSchema"})


@dataclass(frozen=True)
class ChainView:
    """What the planner needs to know about an existing dataset, from its chain projection."""

    dataset_id: str
    kind: model.DatasetKind
    head: str
    has_data: bool
    #: A tuple when read from the chain; from the view cache, its ``StoredEvents``, unpickled when first
    #: read (a plan that finds the chain agreeing with its manifest never reads them).
    definition_events: Sequence[Any]
    #: Definition events appended after the last apply, i.e. not produced by a manifest (described
    #: as "SetInfo (block 7)"); empty when there are none or no apply record exists.
    foreign_events: tuple[str, ...] = ()
    #: End offset of the last data slice (None: no data yet).
    last_offset: int | None = None
    #: For a derivative: per input ``did:odf``, the last input offset it has consumed (pairs, so that
    #: the view stays immutable and is unpickled from the plan's cache as it was pickled).
    input_offsets: tuple[tuple[str, int | None], ...] = ()
    #: The current ``SetDataSchema`` as stored (FlatBuffers bytes); None before the first data.
    schema_bytes: bytes | None = None
    #: The polling source's state as the last ``AddData`` recorded it (None: never ingested).
    polling_state: model.SourceState | None = None
    #: For a ``FilesGlob`` root: the file names its ``AddData`` blocks record as ingested.
    ingested_files: frozenset[str] | None = None
    #: For a derivative: how its last update computed it under its current query (the ``info/`` record
    #: of :mod:`odfproj.storage.update_record`); None when no update recorded it.
    last_update: UpdateRecord | None = None
    #: The manifest version of the chain's blocks (``odf.odf_versions``: 2 is ODF 0.35's form, 3 is 0.39's).
    block_version: int | None = None

    @property
    def data_schema(self) -> pa.Schema | None:
        """The current data schema, decoded only when asked: plan needs it for changed queries only
        (and pyarrow, which decoding imports, costs an unchanged plan 0.1 s)."""
        from odfproj.odf.arrow_schema import decode_arrow_schema

        return decode_arrow_schema(self.schema_bytes) if self.schema_bytes is not None else None


#: The slot of each definition event's type (a push source's slot is per source name, see ``event_key``).
#: Looked up by exact type: the model's event classes have no subclasses, and a plan of 10,000 datasets
#: asks this 100,000 times, where a chain of isinstance checks took half a second.
_SLOTS: dict[type, str] = {
    **{kind: kind.__name__ for kind in DEFINITION_EVENTS},
    model.DisablePollingSource: "SetPollingSource",
}
_PUSH_SLOTS = (model.AddPushSource, model.DisablePushSource)
_DISABLING = (model.DisablePollingSource, model.DisablePushSource)


def event_key(event: Any) -> str | None:
    """The slot an event fills: a new event with the same key replaces the old one."""
    kind = type(event)
    if kind in _PUSH_SLOTS:
        return f"AddPushSource[{(event.source_name or '').lower()}]"
    return _SLOTS.get(kind)


def fold(events: Iterable[Any]) -> dict[str, Any]:
    """The current definition: the last event per key; disabling a source empties its slot."""
    state: dict[str, Any] = {}
    for event in events:
        key = event_key(event)
        if key is None:
            continue
        if type(event) in _DISABLING:
            state.pop(key, None)
        else:
            state[key] = event
    return state


def _resolved(ref: str, resolve_input: Callable[[str], str | None]) -> str | None:
    """The id an input reference is committed as: a ``did:odf`` as given, a name as it resolves (None: not yet)."""
    return ref if ref.startswith("did:") else resolve_input(ref)


def normalise(event: Any, resolve_input: Callable[[str], str | None]) -> tuple[Any, tuple[str, ...]]:
    """The event as it must be committed: ``query`` as one-step ``queries``, inputs as DatasetIds.

    Returns the event and the inputs that could not be resolved yet (they are created by the same apply).
    """
    pending: list[str] = []
    if isinstance(event, model.SetTransform):
        inputs = []
        for inp in event.inputs:
            alias = inp.alias or inp.dataset_ref
            resolved = _resolved(inp.dataset_ref, resolve_input)
            if resolved is None:
                pending.append(inp.dataset_ref)
                resolved = inp.dataset_ref
            inputs.append(model.TransformInput(dataset_ref=resolved, alias=alias))
        event = replace(event, inputs=tuple(inputs), transform=_normalise_transform(event.transform))
    elif isinstance(event, model.SetPollingSource | model.AddPushSource) and event.preprocess is not None:
        event = replace(event, preprocess=_normalise_transform(event.preprocess))
    return event, tuple(pending)


def _normalise_transform(transform: Any) -> Any:
    if isinstance(transform, model.TransformSql) and transform.query is not None and not transform.queries:
        return replace(transform, query=None, queries=(model.SqlQueryStep(query=transform.query),))
    return transform


@dataclass(frozen=True)
class Agreement:
    """A manifest definition that a chain was found to define exactly (``diff_dataset`` gave an unchanged
    step with no changes): the manifest's definition digest (``project.parse_cache.definition_digest``) and
    the ids its inputs resolved to.

    ``diff_dataset`` depends on the snapshot, the view and those ids only. The view cache keeps an
    agreement with the view it was found for and drops it when the chain's stamp changes, so while
    the digest and the ids stay the same the diff would give the same step again: ``make_plan`` gives
    ``unchanged_step`` without diffing (or unpickling the chain's events).
    """

    digest: str
    inputs: tuple[str | None, ...]


def agreement_of(
    snapshot: model.DatasetSnapshot, digest: str, resolve_input: Callable[[str], str | None]
) -> Agreement:
    """The agreement ``snapshot`` (whose definition digest is ``digest``) would have with a chain today."""
    return Agreement(
        digest,
        tuple(
            _resolved(inp.dataset_ref, resolve_input)
            for event in snapshot.metadata
            if isinstance(event, model.SetTransform)
            for inp in event.inputs
        ),
    )


def _existing_step(
    snapshot: model.DatasetSnapshot, manifest: str, view: ChainView, action: Action, **fields: Any
) -> AppendDefinitions:
    """A step for an existing dataset, pinned to the head it was planned against."""
    return AppendDefinitions(
        snapshot.name, action, manifest, snapshot.kind.name, expected_head=view.head, **fields
    )


def unchanged_step(snapshot: model.DatasetSnapshot, manifest: str, view: ChainView) -> AppendDefinitions:
    """The step of a dataset whose chain defines exactly what its manifest does."""
    return _existing_step(snapshot, manifest, view, Action.UNCHANGED)


def diff_dataset(
    snapshot: model.DatasetSnapshot,
    manifest: str,
    view: ChainView | None,
    resolve_input: Callable[[str], str | None],
) -> AppendDefinitions:
    desired_events: list[Any] = []
    pending: list[str] = []
    for event in snapshot.metadata:
        normalised, unresolved = normalise(event, resolve_input)
        desired_events.append(normalised)
        pending.extend(unresolved)
    kind_name = snapshot.kind.name
    if view is None:
        changes = tuple(
            EventChange(event_key(e) or type(e).__name__, type(e).__name__, None, to_data(e), to_data(e))
            for e in desired_events
        )
        return AppendDefinitions(
            snapshot.name, Action.CREATE, manifest, kind_name, changes=changes, pending_inputs=tuple(pending)
        )

    def step(action: Action, **fields: Any) -> AppendDefinitions:
        return _existing_step(snapshot, manifest, view, action, **fields)

    if view.kind != snapshot.kind:
        why = f"dataset kind changes from {view.kind.name} to {kind_name}; a dataset cannot change kind"
        return step(Action.REFUSED, reasons=(why,))

    desired = fold(desired_events)
    current = fold(view.definition_events)
    changes: list[EventChange] = []
    reasons: list[str] = []
    for key, event in desired.items():
        old = current.get(key)
        if old == event:
            continue
        verdict = _verdict(old, event, view.has_data)
        reasons.extend(verdict.reasons)
        after = to_data(event)
        changes.append(
            EventChange(
                key,
                type(event).__name__,
                to_data(old) if old is not None else None,
                after,
                after,
                verdict.notes,
            )
        )
    for key, old in current.items():
        if key in desired or key in WRITTEN_BY_DATA:
            continue
        undo = _undo(old)
        changes.append(
            EventChange(
                key,
                type(undo or old).__name__,
                to_data(old),
                None,
                to_data(undo) if undo else None,
                () if undo else ("cannot be removed from the chain; kept",),
            )
        )

    if reasons:
        return step(Action.REFUSED, reasons=tuple(reasons))
    if not changes:
        return unchanged_step(snapshot, manifest, view)
    if not any(c.event is not None for c in changes):
        return step(Action.UNCHANGED, changes=tuple(changes))
    if view.foreign_events:
        drift = "changed outside this project since the last apply: " + ", ".join(view.foreign_events)
        return step(Action.DRIFT, changes=tuple(changes), reasons=(drift,), pending_inputs=tuple(pending))
    return step(Action.UPDATE, changes=tuple(changes), pending_inputs=tuple(pending))


def _verdict(old: Any, new: Any, has_data: bool) -> evolution.Verdict:
    if old is None:
        return evolution.OK
    if isinstance(new, model.SetPollingSource | model.AddPushSource):
        return evolution.source_change(old, new, has_data=has_data)
    return evolution.OK


def _undo(old: Any) -> Any | None:
    """The event that removes a definition the manifest no longer has, where ODF has one."""
    if isinstance(old, model.SetPollingSource):
        return model.DisablePollingSource()
    if isinstance(old, model.AddPushSource):
        return model.DisablePushSource(source_name=old.source_name)
    return None
