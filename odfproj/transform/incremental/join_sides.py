"""The other side of a join term, found by join key through the derivative's join index.

The join path (:mod:`odfproj.transform.incremental.joins`) computes, for each changed input ``X``, the term
``Q(.., dX, ..)`` with every other input fixed. An input ``Y`` joined to ``X`` by an equality
``X.cx = Y.cy`` (:mod:`odfproj.transform.incremental.join_keys`) contributes only its rows whose ``cy`` is among
the ``cx`` of ``dX``'s rows, so the term reads only those: the derivative keeps each such input's rows
bucketed by ``cy`` (:mod:`odfproj.state.join_index`), the term reads the buckets of ``dX``'s keys,
nets their counts (plus ``Y``'s own new records when the term sees ``Y`` after them), and keeps the
rows whose key occurs in ``dX``. An input without such an edge to ``X`` is read whole, as before.

The index covers the inputs as the derivative's head consumed them (its stamp). Before the update
it is opened for exactly those offsets: used as stored, *caught up* from the records after the
offsets it covers (after a crash between a commit and its write, or a full-path commit), or
*rebuilt* from the inputs' changelogs when missing, foreign, of another query or damaged. After the
commit, :func:`keep_join_index` advances it by the records the block consumed, stamped with the new
head. Every path ends with the same rows as the whole state would give for those keys, so the block
is the full path's, record for record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.spark import SparkEngine
from odfproj.engine.types import spark_schema_from_arrow
from odfproj.odf import model
from odfproj.odf.data_schema import EVENT_TIME, Vocab
from odfproj.odf.multiformats import Multihash
from odfproj.state.join_index import (
    BUCKETS,
    FORMAT,
    IndexedKey,
    JoinIndex,
    add_run,
    is_storage_failure,
    join_index_directory,
    key_bucket,
    key_value,
    load_join_index,
    read_buckets,
    save_join_index,
)
from odfproj.state.projections import (
    COUNT,
    column,
    query_state,
    renamed,
    repeated,
    signed_counts,
    state_columns,
)
from odfproj.state.stamped import MANIFEST
from odfproj.storage.dataset import Dataset
from odfproj.transform.incremental.join_keys import JoinEdge, join_edges
from odfproj.transform.modes import query_mode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["IndexedInput", "JoinSides", "analysed_edges", "keep_join_index", "open_join_sides"]

_KEY = "__odfproj_key"


@dataclass(frozen=True)
class IndexedInput:
    """What the join index needs of one input: its schema, offsets, and a reader of its records."""

    alias: str
    vocab: Vocab
    dataset_id: str
    #: The input's current data schema (its files' column names).
    schema: pa.Schema
    #: The last offset the derivative consumed before this update (``None``: nothing).
    consumed: int | None
    #: The input's last offset now (what the update consumes).
    current: int | None
    #: The input's records with offsets in ``(after, upto]``, its files' names, under ``schema``.
    records: Callable[[int | None, int | None], DataFrame]

    def standard(self, name: str) -> str:
        return self.vocab.to_standard().get(name, name)

    def state_schema(self) -> StructType:
        """The stored rows' schema: the state columns (standard names) and their signed count."""
        from pyspark.sql import types as T

        fields = spark_schema_from_arrow(self.schema).fields
        names = state_columns_of([self.standard(f.name) for f in fields])
        by_name = {self.standard(f.name): f for f in fields}
        return T.StructType(
            [T.StructField(n, by_name[n].dataType, True) for n in names]
            + [T.StructField(COUNT, T.LongType(), True)]
        )

    def counts(self, records: DataFrame) -> DataFrame:
        """``records``' rows with their signed counts, standard names (what a run stores)."""
        standard = renamed(records, self.vocab.to_standard())
        return signed_counts(standard, state_columns(standard))

    def empty_view(self, engine: SparkEngine) -> DataFrame:
        """An empty frame shaped as the query sees this input (to analyse the query, nothing read)."""
        empty = engine.session.createDataFrame([], spark_schema_from_arrow(self.schema))
        return query_state(empty, self.vocab)


def state_columns_of(names: Sequence[str]) -> list[str]:
    from odfproj.odf.data_schema import OFFSET, OP, SYSTEM_TIME

    return [n for n in names if n not in (OFFSET, OP, SYSTEM_TIME)]


def analysed_edges(
    engine: SparkEngine, transform: model.TransformSql, inputs: Sequence[IndexedInput]
) -> tuple[tuple[JoinEdge, ...], frozenset[str]]:
    """The join edges of ``transform`` and its inputs on the optional side of an outer join (which
    never run a term), if it is a ``join`` query, else none (analysis only, nothing read)."""
    from odfproj.engine.dialects import translated_queries
    from odfproj.engine.spark import analysed_plan_json

    result = engine.query({s.alias: s.empty_view(engine) for s in inputs}, transform)
    mode = query_mode(transform, result)
    if not mode.is_join:
        return (), frozenset()
    plan = analysed_plan_json(result)
    steps = [step.alias for step in translated_queries(transform)]
    return (join_edges(plan, steps) if plan else ()), mode.fixed_inputs


def _keys(
    edges: Sequence[JoinEdge], fixed: frozenset[str], inputs: Sequence[IndexedInput]
) -> dict[tuple[str, str], tuple]:
    """Per ordered pair (changed alias, other alias), lower case: the first edge's (key, other's stored
    key); none for a changed input in ``fixed`` (its change takes the full path, no term reads by key)."""
    by_alias = {s.alias.lower(): s for s in inputs}
    pairs: dict[tuple[str, str], tuple] = {}
    for edge in edges:
        for mine, theirs in ((edge.left, edge.right), (edge.right, edge.left)):
            other = by_alias.get(theirs.alias)
            if mine.alias not in by_alias or mine.alias in fixed or other is None:
                continue
            if (mine.alias, theirs.alias) in pairs:
                continue
            stored = IndexedKey(other.alias.lower(), other.standard(theirs.column), theirs.kind)
            pairs[(mine.alias, theirs.alias)] = (mine, stored)
    return pairs


def _fingerprint(
    transform: model.TransformSql, keys: Sequence[IndexedKey], inputs: Sequence[IndexedInput]
) -> str:
    text = json.dumps(
        [
            FORMAT,
            BUCKETS,
            transform.engine,
            [[step.alias, step.query] for step in transform.queries or ()] or transform.query,
            sorted([k.alias, k.column, k.kind] for k in keys),
            sorted([s.alias.lower(), s.dataset_id, str(s.schema)] for s in inputs),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class _Plan:
    """The index one query needs: which keys, under which fingerprint."""

    pairs: Mapping[tuple[str, str], tuple]
    keys: tuple[IndexedKey, ...]
    fingerprint: str


def _plan(
    transform: model.TransformSql,
    analysed: tuple[tuple[JoinEdge, ...], frozenset[str]],
    inputs: Sequence[IndexedInput],
) -> _Plan | None:
    pairs = _keys(*analysed, inputs)
    if not pairs:
        return None
    keys = tuple(dict.fromkeys(stored for _, stored in pairs.values()))
    return _Plan(pairs, keys, _fingerprint(transform, keys, inputs))


def _advanced(
    engine: SparkEngine,
    dataset: Dataset,
    plan: _Plan,
    inputs: Sequence[IndexedInput],
    target: Mapping[str, int | None],
    head: Multihash,
    index: JoinIndex | None,
) -> JoinIndex:
    """The index covering ``target`` (per lower-case alias), stamped ``head``: ``index`` caught up,
    or rebuilt from the inputs' records when it is ``None`` or covers more than ``target``."""
    by_alias = {s.alias.lower(): s for s in inputs}

    def behind(covered: int | None, wanted: int | None) -> bool:
        return wanted is not None and (covered is None or covered < wanted)

    usable = index is not None and all(
        key.name in index.runs
        and key.alias in index.covered
        and (
            index.covered[key.alias] == target[key.alias]
            or behind(index.covered[key.alias], target[key.alias])
        )
        for key in plan.keys
    )
    runs = dict(index.runs) if usable and index is not None else {}
    covered: dict[str, int | None] = {}
    for key in plan.keys:
        source = by_alias[key.alias]
        start = index.covered[key.alias] if usable and index is not None else None
        covered[key.alias] = target[key.alias]
        if start == target[key.alias]:
            runs.setdefault(key.name, ())
            continue
        records = source.records(start, target[key.alias])
        runs[key.name] = add_run(
            engine.session,
            join_index_directory(dataset),
            key,
            runs.get(key.name, ()),
            source.counts(records),
            source.state_schema(),
        )
    return save_join_index(join_index_directory(dataset), head, plan.fingerprint, covered, runs)


class JoinSides:
    """The join index opened for one update, covering the inputs as the derivative consumed them."""

    def __init__(
        self, engine: SparkEngine, plan: _Plan, inputs: Sequence[IndexedInput], index: JoinIndex
    ) -> None:
        self.engine = engine
        self.plan = plan
        self.inputs = {s.alias.lower(): s for s in inputs}
        self.index = index

    def restricted(
        self, changed: str, added: DataFrame, withdrawn: DataFrame, other: str, new_records: DataFrame | None
    ) -> DataFrame | None:
        """What the term of ``changed`` (its rows ``added``/``withdrawn``) sees of ``other``: the rows
        whose join key occurs in the term's rows, or ``None`` when no edge joins them (read it whole).

        ``new_records``: ``other``'s records after the consumed offset when the term sees it after them.
        """
        from pyspark.sql import functions as F

        pair = self.plan.pairs.get((changed.lower(), other.lower()))
        if pair is None:
            return None
        mine, stored = pair
        source = self.inputs[other.lower()]
        values = (
            added.select(key_value(column(mine.column), mine.kind).alias(_KEY))
            .union(withdrawn.select(key_value(column(mine.column), mine.kind).alias(_KEY)))
            .where(column(_KEY).isNotNull())
            .distinct()
            .localCheckpoint()
        )
        buckets = sorted(
            int(r[0]) for r in values.select(key_bucket(column(_KEY), mine.kind)).distinct().collect()
        )
        schema = source.state_schema()
        names = [f.name for f in schema.fields if f.name != COUNT]
        parts = []
        found = read_buckets(self.engine.session, self.index, stored, schema, buckets)
        if found is not None:
            parts.append(found)
        if new_records is not None:
            parts.append(source.counts(new_records).select(*[column(c) for c in (*names, COUNT)]))
        if not parts:
            rows = self.engine.session.createDataFrame([], schema)
        else:
            rows = parts[0]
            for part in parts[1:]:
                rows = rows.unionByName(part)
        net = (
            rows.groupBy(*[column(c) for c in names])
            .agg(F.sum(column(COUNT)).alias(COUNT))
            .where(column(COUNT) > 0)
        )
        matching = net.join(
            values, key_value(column(stored.column), stored.kind) == column(_KEY), "left_semi"
        )
        return renamed(repeated(matching, names, column(COUNT)), {EVENT_TIME: source.vocab.event_time})


def open_join_sides(
    engine: SparkEngine,
    dataset: Dataset,
    transform: model.TransformSql,
    inputs: Sequence[IndexedInput],
) -> JoinSides | None:
    """The join index for this update (as stored, caught up or rebuilt, and stored), or ``None`` when
    the query is not a join or has no edge the index covers (the terms then read whole states)."""
    head = dataset.head()
    if head is None or len(inputs) < 2:
        return None
    plan = _plan(transform, analysed_edges(engine, transform, inputs), inputs)
    if plan is None:
        return None
    target = {s.alias.lower(): s.consumed for s in inputs}
    index = load_join_index(dataset, plan.fingerprint)
    if (
        index is None
        or index.head != head
        or any(index.covered.get(k.alias) != target[k.alias] for k in plan.keys)
    ):
        try:
            index = _advanced(engine, dataset, plan, inputs, target, head, index)
        except Exception as e:
            if not is_storage_failure(e):
                raise
            return None  # the terms read whole states this time; the next update rebuilds
    return JoinSides(engine, plan, inputs, index)


def keep_join_index(
    engine: SparkEngine,
    dataset: Dataset,
    transform: model.TransformSql,
    inputs: Sequence[IndexedInput],
    head: Multihash,
    sides: JoinSides | None,
) -> None:
    """After a commit at ``head``: advance the join index to the offsets that block consumed.

    From the index this update opened (``sides``), else from the stored one (caught up); nothing for
    a query without edges, or without a stored index (after a full-path commit): the first join
    update builds it, so a derivative's first run (full) reads its inputs once, as before. Best
    effort: a crash before the manifest is replaced leaves an index stamped with an older head,
    which the next update catches up.
    """
    if sides is not None:
        plan, index = sides.plan, sides.index
    else:
        if len(inputs) < 2 or not (join_index_directory(dataset) / MANIFEST).exists():
            return
        found = _plan(transform, analysed_edges(engine, transform, inputs), inputs)
        index = load_join_index(dataset, found.fingerprint) if found is not None else None
        if found is None or index is None:
            return
        plan = found
    target = {s.alias.lower(): s.current for s in inputs}
    try:
        _advanced(engine, dataset, plan, inputs, target, head, index)
    except Exception as e:
        if not is_storage_failure(e):
            raise
