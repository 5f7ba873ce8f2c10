"""The heart of a derivative update: full recomputation, then the changelog that turns old into new.

``compute_changes`` materialises every input's current state from its changelog, runs the query over
those states, projects the derivative's own changelog onto its current state, and returns the
difference as ``+A``/``-R`` records. ``write_changes`` numbers them in a deterministic order and writes
them as one Parquet file in the common data schema. Both the live update (``coordinator``) and the
re-execution of a recorded block (``reproduce``) go through these two functions, so a recorded block
reproduces exactly when its inputs do.

States are *multisets* (:func:`odfproj.state.projections.multiset_state`): the difference is the
signed count of each row in the new result minus its count in the stored state.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.columns import cast, column, literal
from odfproj.engine.driver_slices import collect_small, driver_codec, driver_writable, write_driver_slice
from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.session import in_one_partition, is_small_work_frame
from odfproj.engine.slices import nullable, number_rows, write_slices
from odfproj.engine.spark import SparkEngine
from odfproj.engine.types import arrow_schema_from_spark, spark_type_from_arrow
from odfproj.odf import data_schema, model
from odfproj.odf.data_schema import EVENT_TIME, OP, SYSTEM_COLUMNS, Op, Vocab
from odfproj.odf.schema_diff import diff_columns, diff_schemas
from odfproj.state.projections import (
    ASSERTING_OPS,
    COUNT,
    query_state,
    renamed,
    repeated,
    state_columns,
)
from odfproj.transform.errors import TransformError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The numbering column while records are ordered (a user column may be called ``offset`` under a SetVocab).
_OFFSET = "__odfproj_offset"

__all__ = [
    "WrittenChanges",
    "check_result",
    "compute_changes",
    "net_changes",
    "net_counts",
    "output_schema",
    "write_changes",
]


def check_result(result: DataFrame, where: str, vocab: Vocab | None = None) -> DataFrame:
    """The query's output with its event time as ``event_time``; refuse reserved or duplicate names.

    The query names columns as the derivative's files do (``vocab``, default the standard names):
    its event time is the vocabulary's ``eventTimeColumn``. A ``DATE`` event time stays a date.
    """
    from pyspark.sql import types as T

    vocab = vocab or Vocab()
    name = vocab.event_time
    names = result.columns
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidQueryError(
            f"{where}: the query outputs the column {', '.join(map(repr, duplicates))} more than once; "
            "give every output column its own name"
        )
    reserved = [c for c in (vocab.offset, vocab.op, vocab.system_time) if c in names]
    if reserved:
        raise InvalidQueryError(
            f"{where}: the query outputs {', '.join(map(repr, reserved))}, which the transform sets itself; "
            f"do not select system columns other than {name}"
        )
    if name not in names:
        raise InvalidQueryError(
            f"{where}: the query result has no {name!r} column; a derivative's query must produce "
            f"its event time (for an aggregation, e.g. `max({name}) AS {name}`)"
        )
    clash = vocab.clash(names)
    if clash is not None:
        raise InvalidQueryError(
            f"{where}: the query outputs {clash!r}, which the dataset's SetVocab gives to a system column "
            "under another name; rename it"
        )
    result = renamed(result, vocab.to_standard())
    data_type = result.schema[EVENT_TIME].dataType
    if isinstance(data_type, T.TimestampNTZType):
        return result.withColumn(EVENT_TIME, column(EVENT_TIME).cast("timestamp"))
    if not isinstance(data_type, T.TimestampType | T.DateType):
        raise InvalidQueryError(
            f"{where}: the query's {name!r} column is {data_type.simpleString()}, "
            "it must be a timestamp or a date"
        )
    return result


def _canonical_order(state: DataFrame) -> DataFrame:
    """One partition in a total order, so the query sees its input rows in the same order every time.

    Floating-point aggregates (sum, avg over DOUBLE) depend on the order values are added in; without
    this a re-execution on differently split data can differ in the last bits and, after rounding,
    in the visible value, which breaks `verify --reproduce`. Found on the example project's
    per-cluster average. The price is parallelism inside one transform's input scan.

    Small work merges the partitions without a shuffle (:func:`in_one_partition`), one task reading
    them all, which is what such an update does anyway; the sort after it makes the order total all
    the same.
    """
    single = in_one_partition(state) if is_small_work_frame(state) else state.repartition(1)
    return single.sortWithinPartitions(*state.columns)


def compute_changes(
    engine: SparkEngine,
    transform: model.TransformSql,
    inputs: Mapping[str, DataFrame],
    own_history: DataFrame | None,
    *,
    where: str,
    vocab: Vocab | None = None,
    input_vocabs: Mapping[str, Vocab] | None = None,
    appends_only: Collection[str] = (),
    on_query: Callable[[Mapping[str, DataFrame], DataFrame], object] | None = None,
) -> DataFrame:
    """The records that turn the derivative's current state into the query's result over ``inputs``.

    ``inputs`` are the inputs' changelogs by alias; ``own_history`` the derivative's changelog so far
    (``None``: no data yet), both as their files name the columns: ``vocab`` is the derivative's
    vocabulary, ``input_vocabs`` the inputs' (by alias; default the standard names), ``appends_only``
    the inputs whose every record is ``+A`` (their state needs no netting, see
    :func:`~odfproj.state.projections.query_state`). Returns ``op`` (``+A``/``-R``), ``event_time``
    and the user columns (standard names), in the query's column order, unordered. ``on_query`` is
    shown the inputs' states and the query's analysed frame over them (nothing run), so a caller can
    read the query's mode without analysing it again.
    """
    from pyspark.sql import functions as F

    vocab = vocab or Vocab()
    input_vocabs = input_vocabs or {}
    states = {
        alias: _canonical_order(
            query_state(history, input_vocabs.get(alias, Vocab()), appends_only=alias in appends_only)
        )
        for alias, history in inputs.items()
    }
    if own_history is not None:
        own_history = renamed(own_history, vocab.to_standard())
    queried = engine.query(states, transform)
    if on_query is not None:
        on_query(states, queried)
    result = check_result(queried, where, vocab)
    columns = [EVENT_TIME, *(c for c in result.columns if c != EVENT_TIME)]
    result = result.select(*[column(c) for c in columns])
    if own_history is not None:
        own_columns = state_columns(own_history)
        problems = diff_columns(
            arrow_schema_from_spark(own_history.select(*[column(c) for c in own_columns]).schema),
            arrow_schema_from_spark(result.schema),
        ).problems()
        if problems:
            raise TransformError(
                f"{where}: the query {'; '.join(problems)}; a derivative's columns may only be added "
                "(create a new dataset to remove, rename or retype one)"
            )
        new_types = {f.name: f.dataType for f in result.schema.fields}
        added = [c for c in columns if c not in own_columns]
        # The stored column order wins; added columns follow in the query's order and the stored rows
        # hold null in them, so every stored row is retracted and re-appended with its new values.
        for name in added:
            own_history = own_history.withColumn(name, F.lit(None).cast(new_types[name]))
        columns = [*own_columns, *added]
        return net_changes(signed_net_counts(result, own_history, columns), columns)
    return net_changes(_row_counts(result, columns), columns)


def _row_counts(result: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``columns`` and how many times each distinct row occurs in ``result`` (:data:`COUNT`)."""
    from pyspark.sql import functions as F

    return result.groupBy(*[column(c) for c in columns]).agg(F.count(F.lit(1)).cast("long").alias(COUNT))


def net_counts(added: DataFrame, withdrawn: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``columns`` and each distinct row's count in ``added`` minus its count in ``withdrawn`` (:data:`COUNT`).

    The one netting of two multisets every path ends with. One aggregation over the two, each row
    signed, rather than counting each side and then summing the counts: one shuffle instead of three.
    A ``withdrawn`` that is a changelog rather than a multiset (its ``op`` column signs each record) is
    :func:`signed_net_counts`.
    """
    return _summed(_signed(added, columns, 1).unionByName(_signed(withdrawn, columns, -1)), columns)


def signed_net_counts(added: DataFrame, history: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Like :func:`net_counts`, with the rows a changelog ``history`` holds withdrawn: each of its
    asserting records (``+A``, ``+C``) counts -1 for its row, each withdrawing one (``-R``, ``-C``) +1."""
    from pyspark.sql import functions as F

    sign = F.when(column(OP).isin(*ASSERTING_OPS), literal(-1)).otherwise(literal(1)).cast("long")
    old = history.select(*[column(c) for c in columns], sign.alias(COUNT))
    return _summed(_signed(added, columns, 1).unionByName(old), columns)


def _signed(rows: DataFrame, columns: Sequence[str], sign: int) -> DataFrame:

    return rows.select(*[column(c) for c in columns], literal(sign).cast("long").alias(COUNT))


def _summed(signed: DataFrame, columns: Sequence[str]) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        in_one_partition(signed).groupBy(*[column(c) for c in columns]).agg(F.sum(column(COUNT)).alias(COUNT))
    )


def net_changes(counted: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``op`` + ``columns`` from net counts per row: ``+A`` for each surplus copy, ``-R`` for each missing one.

    The one rule both the full recomputation (result minus stored state) and the stateless path (new
    rows' result minus withdrawn rows' result) end with, so both write the same records for the same
    net counts.
    """
    from pyspark.sql import functions as F

    changed_rows = counted.where(column(COUNT) != 0).withColumn(
        OP,
        F.when(column(COUNT) > 0, literal(int(Op.APPEND))).otherwise(literal(int(Op.RETRACT))).cast("int"),
    )
    changes = repeated(changed_rows, columns, F.abs(column(COUNT)))
    return changes.select(column(OP), *[column(c) for c in columns])


def _sort_key(df: DataFrame, name: str) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    data_type = df.schema[name].dataType
    if isinstance(data_type, T.MapType):  # maps are not orderable: order by their JSON text
        return F.to_json(column(name)).asc_nulls_first()
    return column(name).asc_nulls_first()


def _utc_literal(moment: datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(sep=" ", timespec="milliseconds")


@dataclass(frozen=True)
class WrittenChanges:
    """What ``write_changes`` wrote: the record count and (when non-empty) the file's Arrow schema."""

    count: int
    schema: pa.Schema | None


def output_schema(written: pa.Schema, declared: pa.Schema | None, vocab: Vocab | None = None) -> pa.Schema:
    """The schema a new data file must have: ``declared`` (the dataset's) plus any columns the query added.

    Spark's nullability depends on the plan (``count(*)`` is NOT NULL on a first run, nullable once
    unioned with the stored state), so it is not taken from Spark: the system columns follow the common
    data schema and every other column is nullable. ``written`` must start with ``declared``'s columns
    (same names and types; Schema Evolution allows only additions), else :class:`TransformError`.
    """
    system = {f.name: f for f in data_schema.system_fields(vocab)}
    event_time = (vocab or Vocab()).event_time

    def normalised_field(f: pa.Field) -> pa.Field:
        if f.name not in system or (f.name == event_time and pa.types.is_date(f.type)):
            return f.with_nullable(True)
        return system[f.name]

    normalised = pa.schema([normalised_field(f) for f in written])
    if declared is None:
        return normalised
    # The stored nullability wins for the stored columns (the file is cast to the declared schema).
    kept = [declared.field(f.name).nullable if f.name in declared.names else f.nullable for f in normalised]
    problems = diff_schemas(
        declared, pa.schema([f.with_nullable(n) for f, n in zip(normalised, kept, strict=True)])
    ).problems()
    if problems:
        raise TransformError(
            f"the transform's output {problems[0]} ({_describe(normalised)} does not extend the dataset's "
            f"{_describe(declared)}); a derivative's columns may only be added (create a new dataset)"
        )
    return pa.schema([*declared, *list(normalised)[len(declared) :]])


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name} {f.type}" for f in schema)


def write_changes(
    changes: DataFrame,
    next_offset: int,
    system_time: datetime,
    path: Path,
    declared: pa.Schema | None,
    vocab: Vocab | None = None,
    *,
    collect_below: int = 0,
) -> WrittenChanges:
    """Number ``changes`` from ``next_offset`` in a fixed order and write them as one Parquet file.

    Order: retractions before appends, then ``event_time``, then every user column (ascending, nulls
    first). Rows that tie are identical, so the file's content does not depend on Spark's partitioning.
    The file gets the schema of :func:`output_schema` (``declared``: the derivative's data schema, if it
    has one), its system columns named by ``vocab``, cast in Spark before a Spark task writes it: no
    record reaches the driver. Nothing is written when there are no changes.

    ``collect_below > 0`` says the caller expects few changes: up to that many are sorted by the same
    order, collected as Arrow and written by the driver (:mod:`odfproj.engine.driver_slices`, one Spark
    job instead of three, the same file to the logical hash); more fall back to the Spark writer.
    """
    from pyspark.sql import functions as F

    vocab = vocab or Vocab()
    data_columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    order = [
        column(OP).desc(),
        column(EVENT_TIME).asc_nulls_first(),
        *(_sort_key(changes, c) for c in data_columns),
    ]
    ordered = changes.orderBy(*order)

    def sources(offset: Column) -> dict[str, Column]:
        return {
            vocab.offset: offset,
            vocab.op: column(OP),
            vocab.system_time: F.lit(_utc_literal(system_time)).cast("timestamp"),
            vocab.event_time: column(EVENT_TIME),
            **{c: column(c) for c in data_columns},
        }

    if collect_below > 0:
        written = _write_through_driver(ordered, sources, declared, vocab, next_offset, path, collect_below)
        if written is not None:
            return written
    # A distributed sort, numbered by per-partition counts (engine.slices): no single-partition window.
    numbered = number_rows(ordered, _OFFSET, next_offset)
    if not numbered.count:
        return WrittenChanges(0, None)
    stored = sources(column(_OFFSET))
    spark_schema = numbered.frame.select(*(value.alias(name) for name, value in stored.items())).schema
    schema = output_schema(arrow_schema_from_spark(spark_schema, system_columns=False), declared, vocab)
    columns = []
    for f in schema:
        value = cast(stored[f.name], spark_type_from_arrow(f.type))
        columns.append((nullable(value, numbered) if f.nullable else value).alias(f.name))
    folder = Path(path).parent
    folder.mkdir(parents=True, exist_ok=True)
    (written,) = write_slices(
        numbered, numbered.frame.select(*columns), folder, 0, offset_column=vocab.offset
    )
    try:
        written.path.replace(path)
    finally:
        shutil.rmtree(written.path.parent, ignore_errors=True)
    return WrittenChanges(written.count, schema)


def _write_through_driver(
    ordered: DataFrame,
    sources: Callable[[Column], dict[str, Column]],
    declared: pa.Schema | None,
    vocab: Vocab,
    next_offset: int,
    path: Path,
    limit: int,
) -> WrittenChanges | None:
    """``write_changes`` for at most ``limit`` changes in the driver; ``None``: the Spark writer must do it.

    ``None`` for more changes than ``limit`` (after one top-k job) or a column the driver does not
    write exactly as Spark (:func:`odfproj.engine.driver_slices.driver_writable`; decided before any job).
    """

    stored = sources(literal(next_offset).cast("long"))
    spark_schema = ordered.select(*(value.alias(name) for name, value in stored.items())).schema
    schema = output_schema(arrow_schema_from_spark(spark_schema, system_columns=False), declared, vocab)
    codec = driver_codec(ordered)
    if codec is None or not driver_writable(schema):
        return None
    values = [
        cast(stored[f.name], spark_type_from_arrow(f.type)).alias(f.name)
        for f in schema
        if f.name != vocab.offset
    ]
    table = collect_small(ordered.select(*values), limit)
    if table is None:
        return None
    if table.num_rows == 0:
        return WrittenChanges(0, None)
    return WrittenChanges(write_driver_slice(table, schema, vocab.offset, next_offset, path, codec), schema)
