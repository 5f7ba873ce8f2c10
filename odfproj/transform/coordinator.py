"""Bring one derivative dataset up to date: pick the input slices, run the query, commit ExecuteTransform.

``update_derivative`` is the only entry point the run orchestration needs. One call:

1. reads the derivative's projection and resolves its SetTransform inputs (``did:odf`` ids) to
   workspace datasets;
2. for every input, computes the block interval ``(prevBlockHash, newBlockHash]`` and the offset
   interval ``(prevOffset, newOffset]`` since the derivative's last ExecuteTransform;
3. does nothing (no Spark work) when no input has new records and the transform is unchanged; commits
   a data-less ExecuteTransform when only the inputs' watermarks moved;
4. otherwise, under an unchanged SetTransform, takes the incremental path of the query's mode: the
   inputs' new records only (``stateless``, :mod:`odfproj.transform.incremental.stateless`), merged into per-group
   partials (``grouped``, :mod:`odfproj.transform.incremental.grouped`, also over a join's delta) or joined with
   the other inputs' rows they meet, found by join key once their history is large (``join``,
   :mod:`odfproj.transform.incremental.joins`, :mod:`odfproj.transform.incremental.join_sides`); for any other query (or ``full_refresh``)
   recomputes it over the inputs' full current states and diffs it with the derivative's own current
   state (:mod:`odfproj.transform.execute`); either way commits the difference as one data slice,
   plus a SetDataSchema before the first data and whenever the query added columns
   (:func:`odfproj.storage.data_commit.commit_data`, the commit ingest uses too).

See docs/design/transforms.md for why the whole state is recomputed (batch independence).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from odfproj.engine.spark import SMALL_WORK_RECORDS, SparkEngine, translating_errors
from odfproj.errors import OdfprojError
from odfproj.odf import model
from odfproj.odf.data_schema import Vocab
from odfproj.odf.multiformats import Multihash
from odfproj.odf.timestamps import format_rfc3339, to_utc
from odfproj.state.frames import (
    ChangelogView,
    changelog_as_of,
    changelog_between,
    only_appends,
    read_changelog_frame,
)
from odfproj.state.projections import query_state
from odfproj.storage.data_commit import commit_data, next_offset
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import ChainProjection, InputPosition
from odfproj.storage.update_record import UpdateRecord, transform_block, write_update_record
from odfproj.storage.workspace import Workspace
from odfproj.transform.errors import TransformError
from odfproj.transform.execute import compute_changes, write_changes
from odfproj.transform.incremental.grouped import (
    GroupedUpdate,
    checked_mode,
    grouped_changes,
    keep_group_state,
)
from odfproj.transform.incremental.join_sides import IndexedInput, JoinSides, keep_join_index, open_join_sides
from odfproj.transform.incremental.joins import JoinInput, join_changes
from odfproj.transform.incremental.stateless import signed_inputs, stateless_changes
from odfproj.transform.inputs import resolve_inputs
from odfproj.transform.modes import Mode, QueryMode, query_mode

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame

__all__ = ["InputSlice", "TransformOutcome", "plan_inputs", "update_derivative"]


@dataclass(frozen=True)
class TransformOutcome:
    """What one ``update_derivative`` call did."""

    #: Records appended to the derivative (0 if none).
    records: int
    #: Whether a block was committed.
    committed: bool
    #: Why, in a few words, for run reports.
    reason: str
    #: How the records were computed: ``stateless`` (the inputs' new records only), ``grouped``
    #: (per-group partials and new records), ``join`` (the new records joined with the other inputs'
    #: states), ``grouped over a join`` (per-group partials and the join's delta), ``full`` (recompute
    #: and diff), or ``""`` when no query ran.
    mode: str = ""
    #: Why the update took the full path (``""`` for another): the construct that makes the query
    #: ``full`` (``window function``), or this update's own reason (``it had no data yet``, ``input d on
    #: the optional side of an outer join has new records``); the reason ends with it too.
    why_full: str = ""
    #: The query's mode as the update found it (``grouped``, ``full: window function``): the path its
    #: updates take when nothing of their own forces the full one; ``""`` when not known.
    query_mode: str = ""
    #: For a ``full`` query: the small rewrite that would make it incremental (``sum a DECIMAL ...``), or ``""``.
    hint: str = ""


@dataclass(frozen=True)
class InputSlice:
    """One input's part in the next ExecuteTransform."""

    alias: str
    dataset: Dataset
    projection: ChainProjection
    query_input: model.ExecuteTransformInput

    @property
    def has_new_records(self) -> bool:
        return self.query_input.new_offset is not None

    @cached_property
    def new_records_view(self) -> ChangelogView:
        """The records after the consumed offset, as files to read: found in the chain once, then read
        (``_slice_records``) and judged from their footers (``_appending_only``)."""
        q = self.query_input
        return changelog_between(
            self.dataset, self.projection.head, q.prev_offset, self.projection.last_offset
        )


def _slice(alias: str, dataset: Dataset, last: InputPosition, derivative: str) -> InputSlice:
    p = dataset.projection()
    if last.new_block_hash is not None and not dataset.in_chain(last.new_block_hash):
        raise TransformError(
            f"dataset {derivative}: input {alias} ({dataset.name}) no longer contains block "
            f"{last.new_block_hash}, which the last transform consumed: its refs/head was rolled back "
            "or its chain replaced (odfproj verify shows it)"
        )
    if last.new_offset is not None and (p.last_offset is None or p.last_offset < last.new_offset):
        raise TransformError(
            f"dataset {derivative}: input {alias} ends at offset {p.last_offset}, but offset "
            f"{last.new_offset} was already consumed (was the input re-created?)"
        )
    new_block = p.head if p.head != last.new_block_hash else None
    new_offset = p.last_offset if p.last_offset != last.new_offset else None
    query_input = model.ExecuteTransformInput(
        dataset_id=p.dataset_id,
        prev_block_hash=last.new_block_hash,
        new_block_hash=new_block,
        prev_offset=last.new_offset,
        new_offset=new_offset,
    )
    return InputSlice(alias, dataset, p, query_input)


def plan_inputs(workspace: Workspace, dataset: Dataset) -> list[InputSlice]:
    """Every input's block and offset interval since the derivative's last ExecuteTransform."""
    p = dataset.projection()
    if p.set_transform is None:
        return []
    return [
        _slice(alias, input_dataset, p.inputs.get(dataset_id, InputPosition()), dataset.name)
        for alias, dataset_id, input_dataset in resolve_inputs(
            workspace, dataset.name, p.set_transform.inputs
        )
    ]


def _output_watermark(p: ChainProjection, slices: list[InputSlice]) -> datetime | None:
    """The least of the inputs' watermarks (none if an input has none), never behind the current one."""
    marks = [s.projection.watermark for s in slices]
    computed = min(marks) if marks and all(m is not None for m in marks) else None  # type: ignore[type-var]
    if computed is None:
        return p.watermark
    if p.watermark is None:
        return computed
    return max(p.watermark, computed)


def _transform_changed(dataset: Dataset, p: ChainProjection) -> bool:
    """Whether the latest SetTransform came after the last ExecuteTransform (so results must be redone)."""
    if not (p.has_data or p.inputs):
        return False
    set_at = max(
        (d.sequence_number for d in p.definition_events if isinstance(d.event, model.SetTransform)),
        default=-1,
    )
    for _hash, block in dataset.iter_blocks():
        if block.sequence_number <= set_at:
            return True
        if isinstance(block.event, model.ExecuteTransform):
            return False
    return False


def _sql(p: ChainProjection, name: str) -> model.TransformSql:
    assert p.set_transform is not None
    transform = p.set_transform.transform
    if not isinstance(transform, model.TransformSql):
        raise TransformError(
            f"dataset {name}: only Sql transforms are supported, not {type(transform).__name__}"
        )
    return transform


def update_derivative(
    workspace: Workspace,
    name: str,
    engine: SparkEngine,
    system_time: datetime,
    *,
    full_refresh: bool = False,
) -> TransformOutcome:
    """Bring the derivative ``name`` up to date with its inputs; commit at most one ExecuteTransform.

    ``system_time`` stamps the block and the ``system_time`` column of the new records. Raises
    :class:`TransformError` (unknown input, changed schema), ``InvalidQueryError`` (a bad query),
    ``EngineError`` (Spark failed) or a storage error (the head moved meanwhile); nothing is committed
    then. A stateless query under an unchanged SetTransform reads only the inputs' new records
    (:mod:`odfproj.transform.incremental.stateless`); ``full_refresh`` forces the full recomputation, whose
    block is the same.
    """
    system_time = to_utc(system_time)
    dataset = workspace.open(name)
    p = dataset.projection()
    if p.kind != model.DatasetKind.Derivative:
        raise TransformError(f"dataset {name} is a root dataset; only derivatives have transforms")
    if p.set_transform is None:
        return TransformOutcome(0, False, "no transform defined")
    transform = _sql(p, name)
    slices = plan_inputs(workspace, dataset)
    watermark = _output_watermark(p, slices)
    query_inputs = tuple(s.query_input for s in slices)
    new_records = any(s.has_new_records for s in slices)
    changed = _transform_changed(dataset, p)
    if not new_records and not changed:
        if watermark != p.watermark:
            event = model.ExecuteTransform(query_inputs=query_inputs, new_watermark=watermark)
            commit_data(dataset, p, event, system_time=system_time)
            return TransformOutcome(0, True, "watermark advanced (no new input records)")
        return TransformOutcome(0, False, "no new input data")
    waiting = [s.alias for s in slices if s.projection.schema is None]
    if waiting:
        return TransformOutcome(0, False, f"waiting for input {', '.join(waiting)} to get a data schema")

    # Few records in all (inputs and own, as the full path would read them): small work, no code compiled.
    with engine.small_work(_records_read(p, slices, full=True) <= SMALL_WORK_RECORDS):
        with tempfile.TemporaryDirectory(prefix="odfproj-transform-") as scratch:
            path = Path(scratch) / "data.parquet"
            with translating_errors(f"transform of {name}"):
                vocab = Vocab.of(p.set_vocab)
                update = _Update(engine, transform, dataset, p, slices, name)
                changes, mode, why_full = (
                    None,
                    "full",
                    _forced_full(p, changed=changed, full_refresh=full_refresh),
                )
                grouped: GroupedUpdate | None = None
                sides: JoinSides | None = None
                classified: QueryMode | None = None
                if why_full is None:
                    found = _incremental_changes(update)
                    changes, mode, why_full = found.changes, found.mode, found.why_full
                    grouped, sides, classified = found.grouped, found.sides, found.query_mode
                seen: list[tuple[Mapping[str, DataFrame], DataFrame]] = []
                if changes is None:
                    changes, mode = _full_changes(update, on_query=lambda *q: seen.append(q)), "full"
                    if why_full is None and classified is not None and classified.mode is Mode.FULL:
                        why_full = classified.construct  # the query's own construct
                written = write_changes(
                    changes,
                    next_offset(p),
                    system_time,
                    path,
                    p.arrow_schema,
                    vocab,
                    collect_below=_collect_below(p, slices, mode),
                )
            head = commit_data(
                dataset,
                p,
                model.ExecuteTransform(query_inputs=query_inputs, new_watermark=watermark),
                system_time=system_time,
                data_file=path,
                records=written.count,
                schema=written.schema,
            )
        # Best effort, like the state index: the block is committed, and a group state that is not
        # written is found stale by its stamp and rebuilt by the next update.
        with suppress(OdfprojError), translating_errors(f"transform of {name} (its group state)"):
            _keep_group_state(engine, transform, dataset, head, slices, grouped if mode != "full" else None)
        # The same best effort for the join index (transform/incremental/join_sides.py): the one this update opened,
        # or after a full-path commit the stored one, if any.
        if sides is not None or mode in ("join", "full"):
            with suppress(OdfprojError), translating_errors(f"transform of {name} (its join index)"):
                keep_join_index(engine, dataset, transform, _indexed_inputs(engine, slices), head, sides)
        if classified is None:  # a forced full path: classified for the record (an analysis, nothing run)
            with suppress(OdfprojError), translating_errors(f"transform of {name} (its mode)"):
                classified = _classified(engine, transform, slices, seen[0] if seen else None)
        why_full = why_full or ""
        note = f" (full: {why_full})" if why_full else ""
        reason = (
            f"appended {written.count} records{note}"
            if written.count
            else (f"inputs consumed, the result did not change{note}")
        )
        outcome = TransformOutcome(
            written.count,
            True,
            reason,
            mode,
            why_full,
            str(classified) if classified is not None else "",
            (classified.hint or "") if classified is not None else "",
        )
        _record(dataset, p, head, outcome, system_time)
        return outcome


def _forced_full(p: ChainProjection, *, changed: bool, full_refresh: bool) -> str | None:
    """Why the update takes the full path whatever the query's mode, or ``None`` (its mode decides)."""
    if full_refresh:
        return "a full refresh was asked for (--full-refresh)"
    if changed:
        return "its query changed since its last update"
    if not p.has_data or p.arrow_schema is None:
        return "it had no data yet"
    return None


def _classified(
    engine: SparkEngine,
    transform: model.TransformSql,
    slices: list[InputSlice],
    seen: tuple[Mapping[str, DataFrame], DataFrame] | None,
) -> QueryMode:
    """The query's mode after a forced full path, for the record: remembered (a grouped query's full
    commit classified it to keep its group state), or read off the frame the full path analysed
    (``seen``: the inputs' states and the query over them; else both are built again); a grouped one
    checked against its aggregates' types, as ``plan`` checks it. Nothing is run."""
    key = _mode_key(transform, slices)
    known = _MODES.get(key)
    states = seen[0] if seen is not None else None
    if known is None:
        if seen is None:
            states = _states(engine, slices, _history_views(slices))
            seen = (states, engine.query(states, transform))
        known = query_mode(transform, seen[1])
        _remember_mode(key, known)
    if known.mode is not Mode.GROUPED:
        return known
    grouped_states = states if states is not None else _states(engine, slices, _history_views(slices))
    return checked_mode(known, transform, lambda t: engine.query(grouped_states, t))


def _record(
    dataset: Dataset, p: ChainProjection, head: Multihash, outcome: TransformOutcome, system_time: datetime
) -> None:
    """Leave the update's path in the derivative's ``info/`` (:mod:`odfproj.storage.update_record`)."""
    record = UpdateRecord(
        path=outcome.mode,
        why_full=outcome.why_full,
        mode=outcome.query_mode,
        hint=outcome.hint,
        transform=transform_block(p) or "",
        head=head.to_multibase(),
        updated_at=format_rfc3339(system_time),
    )
    write_update_record(dataset, record)


def _collect_below(p: ChainProjection, slices: list[InputSlice], mode: str) -> int:
    """``SMALL_WORK_RECORDS`` when the records this update read are that few, else 0 (the Spark writer).

    An update that reads that few records expects few changes: they are written through the driver
    (``write_changes``'s ``collect_below``), one Spark job instead of three; if there are more after all
    (a join can multiply rows), the Spark writer takes over.
    """
    return SMALL_WORK_RECORDS if _records_read(p, slices, full=mode == "full") <= SMALL_WORK_RECORDS else 0


def _records_read(p: ChainProjection, slices: list[InputSlice], *, full: bool) -> int:
    """How many records an update reads, counted from the chain, no job: on the full path every input's
    records and the derivative's own; on an incremental path each input's new records."""

    def records(last: int | None, consumed: int | None = None) -> int:
        return 0 if last is None else last - (-1 if consumed is None else consumed)

    if full:
        return records(p.last_offset) + sum(records(s.projection.last_offset) for s in slices)
    return sum(
        records(s.projection.last_offset, s.query_input.prev_offset) for s in slices if s.has_new_records
    )


def _input_vocabs(slices: list[InputSlice]) -> dict[str, Vocab]:
    return {s.alias: Vocab.of(s.projection.set_vocab) for s in slices}


def _changelog_to(engine: SparkEngine, s: InputSlice, offset: int | None) -> DataFrame:
    """The input's changelog up to ``offset``, under its current schema (older files lack added columns)."""
    return read_changelog_frame(engine.session, changelog_as_of(s.dataset, s.projection.head, offset))


def _history_view(s: InputSlice) -> ChangelogView:
    """The input's changelog up to its current head and last offset (what the full path reads)."""
    return changelog_as_of(s.dataset, s.projection.head, s.projection.last_offset)


def _history_views(slices: list[InputSlice]) -> dict[str, ChangelogView]:
    return {s.alias: _history_view(s) for s in slices}


@dataclass(frozen=True)
class _Update:
    """One derivative's update as both paths take it: its engine, query, dataset, chain and input slices."""

    engine: SparkEngine
    transform: model.TransformSql
    dataset: Dataset
    p: ChainProjection
    slices: list[InputSlice]
    name: str

    def parts(
        self,
    ) -> tuple[SparkEngine, model.TransformSql, Dataset, ChainProjection, list[InputSlice], str]:
        return self.engine, self.transform, self.dataset, self.p, self.slices, self.name


def _full_changes(
    update: _Update, *, on_query: Callable[[Mapping[str, DataFrame], DataFrame], object] | None = None
) -> DataFrame:
    """The full path: the query over the inputs' whole current states, diffed with the derivative's own."""
    engine, transform, dataset, p, slices, name = update.parts()
    session = engine.session
    views = _history_views(slices)
    own = None
    if p.has_data:
        own = read_changelog_frame(session, changelog_as_of(dataset, p.head, p.last_offset))
    return compute_changes(
        engine,
        transform,
        {alias: read_changelog_frame(session, view) for alias, view in views.items()},
        own,
        where=f"dataset {name}",
        vocab=Vocab.of(p.set_vocab),
        input_vocabs=_input_vocabs(slices),
        appends_only={alias for alias, view in views.items() if only_appends(view)},
        on_query=on_query,
    )


@dataclass(frozen=True)
class _Incremental:
    """What the incremental path of a query's mode made of an update (``changes`` None: run in full)."""

    changes: DataFrame | None
    #: The path that ran, as ``TransformOutcome.mode`` names it (``full``: none could).
    mode: str = "full"
    #: Why an incremental mode must run in full this time, or ``None``.
    why_full: str | None = None
    grouped: GroupedUpdate | None = None
    #: The join index the update opened, to advance after the commit.
    sides: JoinSides | None = None
    #: The query's mode as this update found it (``None``: not classified).
    query_mode: QueryMode | None = None


def _incremental_changes(update: _Update) -> _Incremental:
    """The incremental path of the query's mode, for a derivative with data under an unchanged
    SetTransform (the caller checks): the query is analysed over the rows the inputs' new records add
    and classified once (:func:`odfproj.transform.modes.query_mode`), and only that mode's path runs
    (:mod:`~odfproj.transform.incremental.stateless`, :mod:`~odfproj.transform.incremental.grouped`, :mod:`~odfproj.transform.incremental.joins`).
    A mode seen before for the same query and inputs' schemas is not classified again, and a join's
    update then skips the query over the added rows too (its terms analyse their own inputs)."""
    engine, transform, dataset, p, slices, name = update.parts()
    assert p.arrow_schema is not None
    where, vocab, input_vocabs = f"dataset {name}", Vocab.of(p.set_vocab), _input_vocabs(slices)
    key = _mode_key(transform, slices)
    known = _MODES.get(key)
    if known is not None and not (known.is_stateless or known.mode is Mode.GROUPED):
        classified, signed, added = known, None, None
    else:
        signed = signed_inputs(_new_records(engine, slices), input_vocabs, _appending_only(slices))
        added = engine.query(signed.added, transform)
        classified = known
        if classified is None:
            classified = query_mode(transform, added)
            _remember_mode(key, classified)
    if classified.is_stateless:
        assert signed is not None and added is not None
        changes = stateless_changes(
            engine,
            transform,
            signed,
            added,
            p.arrow_schema,
            where=where,
            vocab=vocab,
            constants=classified.constants,
        )
        if changes is None:
            return _Incremental(None, why_full=_OTHER_COLUMNS, query_mode=classified)
        return _Incremental(changes, "stateless", query_mode=classified)
    open_sides = _join_sides_opener(engine, dataset, p, slices)
    if classified.mode is Mode.GROUPED:
        assert signed is not None and added is not None
        grouped = grouped_changes(
            engine,
            transform,
            signed,
            added,
            classified,
            lambda: _consumed(engine, slices),
            dataset,
            p.arrow_schema,
            where=where,
            vocab=vocab,
            join_inputs=lambda: _join_inputs(engine, slices),
            join_sides=open_sides,
        )
        if grouped is None:
            return _Incremental(None, query_mode=classified)
        return _Incremental(
            grouped.changes,
            grouped.mode,
            grouped.reason or None,
            grouped,
            grouped.sides,
            grouped.query_mode or classified,
        )
    if classified.is_join:
        sides = open_sides(transform) if open_sides is not None else None
        changes, why_full = join_changes(
            engine,
            transform,
            _join_inputs(engine, slices),
            p.arrow_schema,
            where=where,
            vocab=vocab,
            sides=sides,
            known=known,
        )
        if changes is None:
            return _Incremental(None, why_full=why_full or _OTHER_COLUMNS, sides=sides, query_mode=classified)
        return _Incremental(changes, "join", sides=sides, query_mode=classified)
    return _Incremental(None, query_mode=classified)


#: Why an incremental path ran in full when its result's columns are not the derivative's stored ones.
_OTHER_COLUMNS = "its result's columns are not the stored ones"


#: Each query's mode by its text and its inputs' data schemas (:func:`_mode_key`): the warm engine's
#: server and ``watch`` update the same derivatives again and again, and a join's update then goes
#: straight to its terms. At most ``_MODES_KEPT`` entries, forgotten all at once when full.
_MODES: dict[str, QueryMode] = {}
_MODES_KEPT = 4096


def _mode_key(transform: model.TransformSql, slices: list[InputSlice]) -> str:
    """What a query's mode depends on: its engine and steps, and each input's alias, schema and vocabulary."""
    text = json.dumps(
        [
            transform.engine,
            [[step.alias, step.query] for step in transform.queries or ()] or transform.query,
            [
                [s.alias, str(s.projection.arrow_schema), repr(Vocab.of(s.projection.set_vocab))]
                for s in slices
            ],
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _remember_mode(key: str, mode: QueryMode) -> None:
    if len(_MODES) >= _MODES_KEPT:
        _MODES.clear()
    _MODES[key] = mode


def _new_records(engine: SparkEngine, slices: list[InputSlice]) -> dict[str, DataFrame]:
    """Each input's records after the offset the derivative consumed (the incremental paths' reads)."""
    return {s.alias: _slice_records(engine, s) for s in slices}


def _slice_records(engine: SparkEngine, s: InputSlice) -> DataFrame:
    """One input's records after the consumed offset (an empty frame when it has none)."""
    return read_changelog_frame(engine.session, s.new_records_view)


def _appending_only(slices: list[InputSlice]) -> set[str]:
    """The inputs whose new records are all appends (their files' footers say so; nothing is read)."""
    return {s.alias for s in slices if only_appends(s.new_records_view)}


def _consumed(engine: SparkEngine, slices: list[InputSlice]) -> dict[str, DataFrame]:
    """What the query saw of each input at the offset the derivative consumed (empty for nothing consumed)."""
    views = {
        s.alias: changelog_as_of(s.dataset, s.query_input.prev_block_hash, s.query_input.prev_offset)
        for s in slices
    }
    return _states(engine, slices, views)


def _states(
    engine: SparkEngine, slices: list[InputSlice], views: dict[str, ChangelogView]
) -> dict[str, DataFrame]:
    """What the query sees of each input at ``views`` (:func:`~odfproj.state.projections.query_state`):
    a history that only appends is its rows, any other is netted. Under the input's current schema when
    the view predates every schema (nothing to read then, but the columns must be known)."""
    states = {}
    for s in slices:
        view = views[s.alias]
        history = read_changelog_frame(engine.session, view, view.schema or s.projection.arrow_schema)
        vocab = Vocab.of(s.projection.set_vocab)
        states[s.alias] = query_state(history, vocab, appends_only=only_appends(view))
    return states


def _keep_group_state(
    engine: SparkEngine,
    transform: model.TransformSql,
    dataset: Dataset,
    head: Multihash,
    slices: list[InputSlice],
    grouped: GroupedUpdate | None,
) -> None:
    """Keep a grouped derivative's group state current with the block just committed at ``head``.

    After the grouped path, its merged groups; after the full path, a rebuild from the inputs as
    this block consumed them (nothing for a query that is not grouped). A crash before this ends
    leaves a state stamped with an older head, which the next update rebuilds: never a wrong answer.
    """
    if grouped is not None:
        grouped.keep(dataset, head)
        return
    key = _mode_key(transform, slices)
    keep_group_state(
        engine,
        transform,
        lambda: _states(engine, slices, _history_views(slices)),
        dataset,
        head,
        known=_MODES.get(key),
        remember=lambda mode: _remember_mode(key, mode),
    )


def _join_inputs(engine: SparkEngine, slices: list[InputSlice]) -> list[JoinInput]:
    """The inputs as the join rule reads them (the join path's, and the grouped path's over a join)."""

    def as_of(s: InputSlice, offset: int | None) -> Callable[[], DataFrame]:
        return lambda: _changelog_to(engine, s, offset)

    def history_appends(s: InputSlice) -> Callable[[], bool]:
        return lambda: only_appends(_history_view(s))

    appending = _appending_only(slices)
    return [
        JoinInput(
            s.alias,
            Vocab.of(s.projection.set_vocab),
            _slice_records(engine, s) if s.has_new_records else None,
            before=as_of(s, s.query_input.prev_offset),
            after=as_of(s, s.projection.last_offset),
            withdraws=s.alias not in appending,
            appends_only=history_appends(s),
        )
        for s in slices
    ]


#: The join index pays once the inputs' history is this long (records, the chain says): below it, a term
#: reads the other inputs' states from their changelogs, which costs less than the index's lookups and
#: upkeep (up to 64 small files per commit); above it, never. Tests set it to 0 to exercise the index.
JOIN_INDEX_MIN_RECORDS = 1_000_000


def _join_sides_opener(
    engine: SparkEngine, dataset: Dataset, p: ChainProjection, slices: list[InputSlice]
) -> Callable[[model.TransformSql], JoinSides | None] | None:
    """What opens the join index for a join (the query, or a grouped query's pre-aggregation join):
    ``None`` when the derivative has no data yet or the index would not pay (:func:`_join_index_pays`)."""
    if not (p.has_data and _join_index_pays(slices)):
        return None
    return lambda joined: open_join_sides(engine, dataset, joined, _indexed_inputs(engine, slices))


def _join_index_pays(slices: list[InputSlice]) -> bool:
    """Whether the inputs hold enough records for the join index to cost less than reading their states."""
    held = sum(0 if s.projection.last_offset is None else s.projection.last_offset + 1 for s in slices)
    return held >= JOIN_INDEX_MIN_RECORDS


def _indexed_inputs(engine: SparkEngine, slices: list[InputSlice]) -> list[IndexedInput]:
    """What the join index needs of each input: its schema, offsets, and its records between offsets."""

    def records(s: InputSlice) -> Callable[[int | None, int | None], DataFrame]:
        def between(after: int | None, upto: int | None) -> DataFrame:
            view = changelog_between(s.dataset, s.projection.head, after, upto)
            return read_changelog_frame(engine.session, view, s.projection.arrow_schema)

        return between

    return [
        IndexedInput(
            s.alias,
            Vocab.of(s.projection.set_vocab),
            s.projection.dataset_id.as_did_str(),
            s.projection.arrow_schema,
            s.query_input.prev_offset,
            s.projection.last_offset,
            records(s),
        )
        for s in slices
        if s.projection.arrow_schema is not None
    ]
