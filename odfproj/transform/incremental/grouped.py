"""The grouped path: a ``GROUP BY`` derivative updated from per-group partial aggregates and new rows only.

A grouped query (:mod:`odfproj.transform.incremental.aggregation`) is split into a stateless *pre-aggregation*
(keys ``k_i`` and aggregate arguments ``a_j`` per input row) and a *final projection* over one row per
group. Per group the derivative keeps, in its group state (:mod:`odfproj.state.group_state`), the row
count and partials that merge exactly:

- ``count(x)``: the number of non-null ``x`` (``count(*)``: the row count);
- ``sum(x)`` over integers or decimals: that count and the exact sum in ``DECIMAL(37, scale)``, cast to
  Spark's result type at the end;
- ``min(x)``/``max(x)``: that count, the extreme value and how many rows hold it.

An update runs the pre-aggregation over the rows the inputs' new records add (``D+``) and withdraw
(``D-``), exactly as the stateless path does, partially aggregates both, and merges them into the
stored partials: counts and sums add and subtract (exact integers, so the order of batches cannot
matter), an extreme is replaced by a better added value, and a withdrawn row at the extreme lowers its
count. When a group's last row at its extreme is withdrawn while other values remain, the new extreme
is unknown without the group's rows: that update takes the full path (correct, just not incremental),
and so does a sum that leaves its result type's range. For the touched groups only, the final
projection over the old partials counts -1 and over the new ones +1, through the same ``net_changes``
as the other paths: the block equals the full recomputation's, record for record, so ``verify
--reproduce`` reproduces it and the result does not depend on how the inputs were split into blocks.
A group whose row count falls to 0 disappears (its output row is retracted); a global aggregate's one
group always exists.

Over a join (``grouped over a join``, :attr:`odfproj.transform.modes.QueryMode.over_join`) the
pre-aggregation is a ``join`` query, linear in each input taken alone but not in all of them at
once, so running it over every input's ``D+`` and ``D-`` would be wrong. Its rows' change comes from
:func:`odfproj.transform.incremental.joins.join_delta` instead (each changed input's term joined with the other
inputs' states), netted per pre-aggregated row so that the withdrawn rows are a sub-multiset of the
old ones, as the min/max merge needs (two terms may add and withdraw the same row); the rest is the
same. A change on the optional side of an outer join takes the full path, as for a join.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from odfproj.engine.columns import column
from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.spark import SparkEngine
from odfproj.engine.types import arrow_schema_from_spark
from odfproj.odf import model
from odfproj.odf.data_schema import Vocab
from odfproj.odf.multiformats import Multihash
from odfproj.odf.schema_diff import diff_columns
from odfproj.state.group_state import FORMAT, load_group_state, save_group_state
from odfproj.state.projections import COUNT, grouping_values, repeated
from odfproj.storage.dataset import Dataset
from odfproj.transform.execute import check_result, net_changes, net_counts
from odfproj.transform.incremental.aggregation import (
    PREFIX,
    ROWS,
    GroupedQuery,
    NotSplittable,
    split_grouped,
    value_column,
)
from odfproj.transform.incremental.join_sides import JoinSides
from odfproj.transform.incremental.joins import JoinInput, SignedRows, join_delta
from odfproj.transform.incremental.stateless import SignedInputs, stored_columns
from odfproj.transform.modes import Mode, QueryMode, Rewrite, query_mode, sum_hint

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = [
    "GroupedUpdate",
    "Unmergeable",
    "check_grouped",
    "checked_mode",
    "grouped_changes",
    "keep_group_state",
]

_TAG = f"{PREFIX}tag"
_TOUCHED = f"{PREFIX}touched"
_UNSAFE = f"{PREFIX}unsafe"
_GROUPS = f"{PREFIX}groups"
_OLD, _ADDED, _WITHDRAWN = 0, 1, 2


def _n(j: int) -> str:
    return f"{PREFIX}n{j}"


def _s(j: int) -> str:
    return f"{PREFIX}s{j}"


def _e(j: int) -> str:
    return f"{PREFIX}e{j}"


def _c(j: int) -> str:
    return f"{PREFIX}c{j}"


def _unsafe(i: int) -> str:
    return f"{PREFIX}unsafe{i}"


@dataclass(frozen=True)
class _Analysed:
    """A split whose pre-aggregation Spark analysed: each aggregate's result and accumulator types."""

    split: GroupedQuery
    #: Spark's result type of each aggregate (``count``: bigint; ``sum``: by its argument; ``min``/``max``: its argument's).
    results: tuple[DataType, ...]
    #: The exact accumulator of each ``sum`` (``DECIMAL(37, scale)``), ``None`` for the others.
    accumulators: tuple[DataType | None, ...]

    @property
    def fingerprint(self) -> str:
        """What the stored group state must have been built for: the split, its types, the format."""
        text = json.dumps(
            [FORMAT, repr(self.split), [t.simpleString() if t else None for t in self.accumulators]]
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def partial_columns(self) -> list[str]:
        columns = [ROWS]
        for j, aggregate in enumerate(self.split.aggregates):
            if aggregate.kind == "rows":
                continue
            columns.append(_n(j))
            if aggregate.kind == "sum":
                columns.append(_s(j))
            elif aggregate.kind in ("min", "max"):
                columns += [_e(j), _c(j)]
        return columns


class Unmergeable(NotSplittable):
    """A grouped query whose aggregates' types do not merge exactly, with the rewrite that would make
    them merge when there is one (every such aggregate a floating-point ``sum``: sum a ``DECIMAL``)."""

    def __init__(self, construct: str, rewrite: Rewrite | None) -> None:
        super().__init__(construct)
        self.rewrite = rewrite


def check_grouped(split: GroupedQuery, pre: DataFrame) -> _Analysed:
    """The types of ``split``'s aggregates over ``pre``, its analysed pre-aggregation (nothing runs).

    :class:`Unmergeable` (a :class:`NotSplittable`) for a ``sum`` that is not over integers or
    decimals: a floating-point sum depends on the order values are added in, so its partials do not
    merge exactly; it names the rewrite (a ``DECIMAL`` sum) when every refused aggregate is such a sum.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    results: list[DataType] = []
    accumulators: list[DataType | None] = []
    refused: list[tuple[str, str | None]] = []  # (construct, hint)
    for j, aggregate in enumerate(split.aggregates):
        if aggregate.kind in ("rows", "count"):
            results.append(T.LongType())
            accumulators.append(None)
            continue
        assert aggregate.argument is not None
        argument = pre.schema[aggregate.argument].dataType
        if aggregate.kind == "sum":
            if isinstance(argument, T.DecimalType) and argument.scale <= 30:
                accumulators.append(T.DecimalType(37, argument.scale))
            elif isinstance(argument, T.IntegralType):
                accumulators.append(T.DecimalType(37, 0))
            else:
                floating = isinstance(argument, T.DoubleType | T.FloatType)
                hint = sum_hint(_column_argument(split, j)) if floating else None
                refused.append((f"sum over {argument.simpleString().upper()}", hint))
                continue
            results.append(pre.select(F.sum(column(aggregate.argument))).schema[0].dataType)
        else:
            if isinstance(argument, T.MapType):
                refused.append((f"{aggregate.kind} over a map", None))
                continue
            results.append(argument)
            accumulators.append(None)
    if refused:
        hints = [hint for _, hint in refused]
        rewrite = None
        if all(hints):
            rewrite = Rewrite(
                "; ".join(dict.fromkeys(h for h in hints if h)), Mode.GROUPED, frozenset({"decimal_sum"})
            )
        raise Unmergeable(refused[0][0], rewrite)
    return _Analysed(split, tuple(results), tuple(accumulators))


def _argument_sql(split: GroupedQuery, j: int) -> str | None:
    """The SQL of aggregate ``j``'s argument as the query writes it (from the pre-aggregation), or ``None``."""
    name = split.aggregates[j].argument
    if name is None:
        return None
    try:
        statement = sqlglot.parse_one(split.pre_aggregation, read="spark")
    except SqlglotError:
        return None
    for expression in statement.expressions:
        if isinstance(expression, exp.Alias) and expression.alias == name:
            return expression.this.sql(dialect="spark")
    return None


def _column_argument(split: GroupedQuery, j: int) -> str | None:
    """Aggregate ``j``'s argument when it is a plain column (a hint names it), else ``None``."""
    sql = _argument_sql(split, j)
    return sql if sql is not None and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", sql) else None


def _call(split: GroupedQuery, j: int) -> str:
    """Aggregate ``j`` as a reason names it: ``min(v)``, or ``the 2nd aggregate's min`` for a long argument."""
    aggregate = split.aggregates[j]
    sql = _argument_sql(split, j)
    if sql is not None and len(sql) <= 60:
        return f"{aggregate.kind}({sql})"
    return f"{aggregate.kind} (aggregate {j + 1})"


def grouped_split(
    engine: SparkEngine, transform: model.TransformSql, inputs: Mapping[str, DataFrame]
) -> _Analysed:
    """``transform`` split and its pre-aggregation analysed over ``inputs`` (views by alias); raises
    :class:`NotSplittable`."""
    split = split_grouped(transform)
    return check_grouped(split, _analysed_pre_aggregation(lambda t: engine.query(inputs, t), split))


def _analysed_pre_aggregation(
    run: Callable[[model.TransformSql], DataFrame], split: GroupedQuery
) -> DataFrame:
    """The pre-aggregation analysed by ``run``; one Spark refuses (a split it reads otherwise than the
    query, say) is :class:`NotSplittable`: the query then runs in full, as written."""
    try:
        return run(split.pre_aggregation_transform())
    except InvalidQueryError:
        raise NotSplittable("a grouped query odfproj cannot split") from None


def checked_mode(
    mode: QueryMode, transform: model.TransformSql, run: Callable[[model.TransformSql], DataFrame]
) -> QueryMode:
    """``mode``, or ``full`` (named) when a ``grouped`` query's aggregates have types whose partials do
    not merge exactly; ``run`` analyses a transform over the same inputs (a query scope's ``run``).

    What ``plan`` shows, so that it names the path ``run`` will take.
    """
    if mode.mode is not Mode.GROUPED:
        return mode
    try:
        split = split_grouped(transform)
        check_grouped(split, _analysed_pre_aggregation(run, split))
    except NotSplittable as e:
        return QueryMode(Mode.FULL, e.construct, rewrite=_rewrite_of(e))
    return mode


def _rewrite_of(e: NotSplittable) -> Rewrite | None:
    return e.rewrite if isinstance(e, Unmergeable) else None


def _partials(pre: DataFrame, analysed: _Analysed) -> DataFrame:
    """Per group of ``pre`` (pre-aggregated rows): the row count and every aggregate's partials."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    split = analysed.split
    keys = [column(k) for k in split.keys]
    frame = pre
    extremes = [j for j, a in enumerate(split.aggregates) if a.kind in ("min", "max")]
    if extremes:
        window = Window.partitionBy(*keys) if keys else Window.partitionBy(F.lit(0))
        for j in extremes:
            aggregate = split.aggregates[j]
            extreme = F.min if aggregate.kind == "min" else F.max
            frame = frame.withColumn(_e(j), extreme(column(aggregate.argument or "")).over(window))
    sums = [F.count(F.lit(1)).cast("long").alias(ROWS)]
    for j, aggregate in enumerate(split.aggregates):
        if aggregate.kind == "rows":
            continue
        argument = column(aggregate.argument or "")
        sums.append(F.count(argument).cast("long").alias(_n(j)))
        accumulator = analysed.accumulators[j]
        if accumulator is not None:
            sums.append(F.sum(argument.cast(accumulator)).cast(accumulator).alias(_s(j)))
        elif aggregate.kind in ("min", "max"):
            at_extreme = argument.isNotNull() & (argument == column(_e(j)))
            sums.append(F.min(column(_e(j))).alias(_e(j)))
            sums.append(F.sum(F.when(at_extreme, 1).otherwise(0)).cast("long").alias(_c(j)))
    return frame.groupBy(*keys).agg(*sums)


def _merged(
    old: DataFrame, added: DataFrame, withdrawn: DataFrame, analysed: _Analysed
) -> tuple[DataFrame, tuple[str, ...]]:
    """Per group: the old partials (prefixed by tag 0), the new ones, whether touched, whether unsafe;
    and the reasons a group can be unsafe, each flagged in its own column (:func:`_unsafe`).

    Unsafe: a min/max lost every row at its extreme while other values remain (the new extreme is
    unknown without the group's rows), a sum left its accumulator's or result type's range, or a count
    went negative (inputs that withdraw rows they never held): the full path must run.
    """
    from pyspark.sql import functions as F

    split = analysed.split
    keys = split.keys
    partials = analysed.partial_columns()
    tagged = (
        old.select(*[column(c) for c in (*keys, *partials)])
        .withColumn(_TAG, F.lit(_OLD))
        .unionByName(added.withColumn(_TAG, F.lit(_ADDED)))
        .unionByName(withdrawn.withColumn(_TAG, F.lit(_WITHDRAWN)))
    )

    def tagged_name(name: str, tag: int) -> str:
        return f"{name}@{tag}"

    gathered = tagged.groupBy(*[column(k) for k in keys]).agg(
        *[
            F.max(F.when(column(_TAG) == tag, column(c))).alias(tagged_name(c, tag))
            for c in partials
            for tag in (_OLD, _ADDED, _WITHDRAWN)
        ],
        *[
            F.max(F.when(column(_TAG) == tag, F.lit(True))).alias(tagged_name(_TAG, tag))
            for tag in (_OLD, _ADDED, _WITHDRAWN)
        ],
    )

    def value(name: str, tag: int) -> Column:
        return column(tagged_name(name, tag))

    def counted(name: str, tag: int) -> Column:
        return F.coalesce(value(name, tag), F.lit(0).cast("long"))

    def net(name: str) -> Column:
        return counted(name, _OLD) + counted(name, _ADDED) - counted(name, _WITHDRAWN)

    new: dict[str, Column] = {ROWS: net(ROWS)}
    negative = "a group lost more rows than it held (an input withdrew rows it never added)"
    unsafe: list[tuple[str, Column]] = [(negative, net(ROWS) < 0)]
    for j, aggregate in enumerate(split.aggregates):
        if aggregate.kind == "rows":
            continue
        new[_n(j)] = net(_n(j))
        unsafe.append((negative, new[_n(j)] < 0))
        accumulator = analysed.accumulators[j]
        if accumulator is not None:
            zero = F.lit(0).cast(accumulator)
            total = (
                F.coalesce(value(_s(j), _OLD), zero)
                + F.coalesce(value(_s(j), _ADDED), zero)
                - F.coalesce(value(_s(j), _WITHDRAWN), zero)
            ).try_cast(accumulator)  # null when out of range, also in an ANSI session: the full path runs
            new[_s(j)] = F.when(new[_n(j)] > 0, total)
            result = analysed.results[j].simpleString().upper()
            unsafe.append(
                (
                    f"{_call(split, j)} of a group left the range of its type {result}",
                    (new[_n(j)] > 0) & (total.isNull() | total.try_cast(analysed.results[j]).isNull()),
                )
            )
        elif aggregate.kind in ("min", "max"):
            old_extreme, old_count = value(_e(j), _OLD), counted(_c(j), _OLD)
            gone = value(_e(j), _WITHDRAWN)
            left = old_count - F.when(
                gone.isNotNull() & (gone == old_extreme), counted(_c(j), _WITHDRAWN)
            ).otherwise(0)
            came, came_count = value(_e(j), _ADDED), counted(_c(j), _ADDED)
            better = (came < old_extreme) if aggregate.kind == "min" else (came > old_extreme)
            # Every old row at the extreme withdrawn, others left, no added value at least as good:
            # the new extreme is among the old rows, which are not kept.
            replaced = F.coalesce((came_count > 0) & (better | (came == old_extreme)), F.lit(False))
            extreme = "minimum" if aggregate.kind == "min" else "maximum"
            unsafe.append(
                (
                    f"{_call(split, j)}: a group lost its last row at its {extreme} while other rows "
                    f"remain (its new {extreme} is not known without them)",
                    (old_count > 0)
                    & (left <= 0)
                    & (counted(_n(j), _OLD) - counted(_n(j), _WITHDRAWN) > 0)
                    & ~replaced,
                )
            )
            new[_e(j)] = (
                F.when(came_count <= 0, F.when(left > 0, old_extreme))
                .when(left <= 0, came)
                .when(better, came)
                .otherwise(old_extreme)
            )
            new[_c(j)] = (
                F.when(came_count <= 0, F.when(left > 0, left).otherwise(F.lit(0).cast("long")))
                .when(left <= 0, came_count)
                .when(better, came_count)
                .when(came == old_extreme, left + came_count)
                .otherwise(left)
            )
    touched = F.coalesce(value(_TAG, _ADDED), F.lit(False)) | F.coalesce(
        value(_TAG, _WITHDRAWN), F.lit(False)
    )
    any_unsafe = F.lit(False)
    flags = []
    for i, (_, condition) in enumerate(unsafe):
        flag = F.coalesce(condition, F.lit(False))
        any_unsafe = any_unsafe | flag
        flags.append(flag.alias(_unsafe(i)))
    merged = gathered.select(
        *[column(k) for k in keys],
        *[value(c, _OLD).alias(tagged_name(c, _OLD)) for c in partials],
        F.coalesce(value(_TAG, _OLD), F.lit(False)).alias(tagged_name(_TAG, _OLD)),
        *[expression.alias(name) for name, expression in new.items()],
        touched.alias(_TOUCHED),
        any_unsafe.alias(_UNSAFE),
        *flags,
    )
    return merged, tuple(reason for reason, _ in unsafe)


def _values(groups: DataFrame, analysed: _Analysed) -> DataFrame:
    """Per group: its keys and each aggregate's value (``f_j``) from its partials, as Spark types it."""
    from pyspark.sql import functions as F

    split = analysed.split
    values = []
    for j, aggregate in enumerate(split.aggregates):
        if aggregate.kind == "rows":
            value = column(ROWS).cast("long")
        elif aggregate.kind == "count":
            value = column(_n(j)).cast("long")
        elif aggregate.kind == "sum":
            value = F.when(column(_n(j)) > 0, column(_s(j)).cast(analysed.results[j]))
        else:
            value = F.when(column(_n(j)) > 0, column(_e(j)))
        values.append(value.alias(value_column(j)))
    return groups.select(*[column(k) for k in split.keys], *values)


def _projected(engine: SparkEngine, analysed: _Analysed, groups: DataFrame, names: list[str]) -> DataFrame:
    """The final projection (with ``HAVING``) over ``groups`` (keys and partials)."""
    return engine.query({_GROUPS: _values(groups, analysed)}, analysed.split.final_transform(_GROUPS, names))


def build_group_state(engine: SparkEngine, analysed: _Analysed, states: Mapping[str, DataFrame]) -> DataFrame:
    """Every group's partials from the inputs' whole states (one pass, like catching up the root index)."""
    pre = engine.query(states, analysed.split.pre_aggregation_transform())
    groups = _partials(pre, analysed)
    return groups if analysed.split.is_global else groups.where(column(ROWS) > 0)


@dataclass(frozen=True)
class GroupedUpdate:
    """What the grouped path made of an update: the changes, or why the full path must run instead."""

    #: ``op`` and the stored columns, like the other paths; ``None``: take the full path (``reason``).
    changes: DataFrame | None
    reason: str = ""
    #: The mode the update ran in, as the plan names it: ``grouped`` or ``grouped over a join``.
    mode: str = "grouped"
    #: Every group after the update, to be stored once the block is committed (:meth:`keep`).
    groups: DataFrame | None = None
    fingerprint: str = ""
    #: The join index an aggregation over a join read the other sides through (opened for its
    #: pre-aggregation join), to be advanced once the block is committed; ``None``: none was used.
    sides: JoinSides | None = None
    #: The query's mode when the analysed types make it ``full`` (``sum over DOUBLE``, with its hint):
    #: not this update's reason but every update's; ``None`` when the types let it be grouped.
    query_mode: QueryMode | None = None

    def keep(self, dataset: Dataset, head: Multihash) -> None:
        """Store the groups as the state at ``head``, the block just committed."""
        if self.groups is not None:
            save_group_state(self.groups, dataset, head, self.fingerprint)


def _names_match(result: DataFrame, declared: pa.Schema, vocab: Vocab, where: str) -> list[str] | None:
    """The stored column order if the query's output columns are exactly the stored ones, else ``None``."""
    checked = check_result(result, where, vocab)
    stored = stored_columns(declared, vocab)
    if (
        set(checked.columns) != set(stored.names)
        or diff_columns(stored, arrow_schema_from_spark(checked.schema)).problems()
    ):
        return None
    return list(stored.names)


def grouped_changes(
    engine: SparkEngine,
    transform: model.TransformSql,
    inputs: SignedInputs,
    result: DataFrame,
    mode: QueryMode,
    consumed_states: Callable[[], Mapping[str, DataFrame]],
    dataset: Dataset,
    declared: pa.Schema,
    *,
    where: str,
    vocab: Vocab | None = None,
    join_inputs: Callable[[], Sequence[JoinInput]] | None = None,
    join_sides: Callable[[model.TransformSql], JoinSides | None] | None = None,
) -> GroupedUpdate | None:
    """The records that bring a grouped derivative up to date, from its group state and new records.

    ``inputs`` are the rows the inputs' new records add and withdraw (as for the stateless path),
    ``result`` the query over the added ones and ``mode`` its classification (``grouped``, checked by
    the caller); ``consumed_states`` gives what the query saw of each input at the consumed offsets
    (its state, by alias), read only when the group state is missing or stale (its stamp is not the
    derivative's head); ``join_inputs`` gives the inputs as the join path sees them, and
    ``join_sides`` opens the join index for the aggregation's pre-aggregation join (``None``: the
    other sides are read whole), both called only for an aggregation over a join. ``None`` when the
    query is not grouped; a :class:`GroupedUpdate` without changes when it is but this update must run
    in full.
    """
    if mode.mode is not Mode.GROUPED:
        return None
    try:
        split = split_grouped(transform)  # pure Python; a grouped mode means it splits
    except NotSplittable:
        return None
    vocab = vocab or Vocab()
    columns = _names_match(result, declared, vocab, where)
    if columns is None:
        return GroupedUpdate(None, "the query's output columns are not the stored ones", str(mode))
    sides: JoinSides | None = None
    try:
        if mode.over_join:
            pre_aggregation = split.pre_aggregation_transform()
            sides = _opened_sides(join_sides, pre_aggregation)
            joined = join_inputs() if join_inputs else ()
            delta = _joined_pre_aggregation(engine, pre_aggregation, joined, sides)
            if isinstance(delta, str):
                return GroupedUpdate(None, delta, str(mode), sides=sides)
        else:
            pre_added = _analysed_pre_aggregation(lambda t: engine.query(inputs.added, t), split)
            # The pre-aggregation is stateless: over no withdrawn rows it is empty (no second query),
            # but for a constant relation's rows, which cancel only if both queries run.
            pre_withdrawn = (
                engine.query(inputs.withdrawn, split.pre_aggregation_transform())
                if inputs.withdraws or mode.constants
                else pre_added.limit(0)
            )
            delta = SignedRows(pre_added, pre_withdrawn)
        analysed = check_grouped(split, delta.added)
    except NotSplittable as e:  # the types say full: that is the query's mode, not this update's
        full = QueryMode(Mode.FULL, e.construct, rewrite=_rewrite_of(e))
        return GroupedUpdate(None, e.construct, str(mode), sides=sides, query_mode=full)
    added = _partials(delta.added, analysed)
    withdrawn = _partials(delta.withdrawn, analysed)
    old = _stored_groups(engine, analysed, dataset, consumed_states)
    merged, reasons = _merged(old, added, withdrawn, analysed)
    merged = merged.localCheckpoint()
    touched = merged.where(column(_TOUCHED))
    flags = touched.where(column(_UNSAFE)).select(*[column(_unsafe(i)) for i in range(len(reasons))])
    unsafe = flags.limit(1).collect()  # one job, as counting it was; its flags say which case it is
    if unsafe:
        why = next((reason for reason, flag in zip(reasons, unsafe[0], strict=True) if flag), reasons[0])
        return GroupedUpdate(None, why, str(mode), sides=sides)
    partials = analysed.partial_columns()
    keys = analysed.split.keys
    old_groups = touched.where(column(f"{_TAG}@{_OLD}")).select(
        *[column(k) for k in keys], *[column(f"{c}@{_OLD}").alias(c) for c in partials]
    )
    new_groups = touched.select(*[column(k) for k in (*keys, *partials)])
    all_groups = merged.select(*[column(k) for k in (*keys, *partials)])
    if not analysed.split.is_global:
        new_groups = new_groups.where(column(ROWS) > 0)
        old_groups = old_groups.where(column(ROWS) > 0)
        all_groups = all_groups.where(column(ROWS) > 0)
    names = list(result.columns)
    before = check_result(_projected(engine, analysed, old_groups, names), where, vocab)
    after = check_result(_projected(engine, analysed, new_groups, names), where, vocab)
    net = net_counts(after, before, columns)
    return GroupedUpdate(net_changes(net, columns), "", str(mode), all_groups, analysed.fingerprint, sides)


def _opened_sides(
    join_sides: Callable[[model.TransformSql], JoinSides | None] | None, pre_aggregation: model.TransformSql
) -> JoinSides | None:
    """The join index of the pre-aggregation join, or ``None`` (no opener: the sides are read whole)."""
    if join_sides is None:
        return None
    try:
        return join_sides(pre_aggregation)
    except InvalidQueryError:
        raise NotSplittable("a grouped query odfproj cannot split") from None


def _joined_pre_aggregation(
    engine: SparkEngine,
    pre_aggregation: model.TransformSql,
    inputs: Sequence[JoinInput],
    sides: JoinSides | None,
) -> SignedRows | str:
    """The pre-aggregated rows an aggregation over a join gains and loses, netted per row; or why the
    full path must run (an input on the optional side of an outer join has new records).

    :func:`join_delta`'s terms may add and withdraw the same row (new facts meeting a withdrawn
    dimension row): netted, the withdrawn rows are a sub-multiset of the old ones, which the
    min/max merge relies on, and the counts and sums are the same.
    """
    try:
        delta = join_delta(engine, pre_aggregation, inputs, sides)
    except InvalidQueryError:
        raise NotSplittable("a grouped query odfproj cannot split") from None
    if delta.rows is None:
        return delta.why_full or "its pre-aggregation is not a join odfproj can keep"
    columns = list(delta.rows.added.columns)
    values = None if delta.rows.withdraws else grouping_values(delta.rows.added, columns)
    if values is not None:  # appends only: nothing nets out; the rows normalised as the netting would
        rows = delta.rows.added.select(*values)
        return SignedRows(rows, delta.rows.withdrawn, withdraws=False)
    net = net_counts(delta.rows.added, delta.rows.withdrawn, columns)
    return SignedRows(
        repeated(net.where(column(COUNT) > 0), columns, column(COUNT)),
        repeated(net.where(column(COUNT) < 0), columns, -column(COUNT)),
    )


def _stored_groups(
    engine: SparkEngine,
    analysed: _Analysed,
    dataset: Dataset,
    consumed_states: Callable[[], Mapping[str, DataFrame]],
) -> DataFrame:
    """The group state at the derivative's head: stored, or rebuilt from the inputs (and stored)."""
    stored = load_group_state(engine.session, dataset, analysed.fingerprint)
    if stored is not None:
        return stored
    head = dataset.head()
    groups = build_group_state(engine, analysed, consumed_states())
    if head is not None:
        save_group_state(groups, dataset, head, analysed.fingerprint)
        stored = load_group_state(engine.session, dataset, analysed.fingerprint)
        if stored is not None:
            return stored
    return groups.localCheckpoint()


def keep_group_state(
    engine: SparkEngine,
    transform: model.TransformSql,
    states: Callable[[], Mapping[str, DataFrame]],
    dataset: Dataset,
    head: Multihash,
    known: QueryMode | None = None,
    remember: Callable[[QueryMode], None] | None = None,
) -> None:
    """After a full-path commit of a grouped query: store its group state at ``head`` (one pass).

    ``states`` gives what the query saw of each input in that commit (its state, by alias; see
    :func:`~odfproj.state.projections.query_state`); it is called only for a query the split keeps,
    so every other derivative's commit reads nothing more. Nothing for a query that is
    not grouped, or that the grouped path cannot keep. ``known``: the query's mode when an earlier
    update classified it (a ``full`` one then costs no analysis); ``remember`` is told the mode found
    otherwise.
    """
    try:
        split_grouped(transform)  # pure Python: most queries stop here, before any Spark analysis
    except NotSplittable:
        return
    if known is not None and known.mode is not Mode.GROUPED:
        return
    views = states()
    if known is None:
        known = query_mode(transform, engine.query(views, transform))
        if remember is not None:
            remember(known)
    if known.mode is not Mode.GROUPED:
        return
    try:
        analysed = grouped_split(engine, transform, views)
    except NotSplittable:
        return
    save_group_state(build_group_state(engine, analysed, views), dataset, head, analysed.fingerprint)
