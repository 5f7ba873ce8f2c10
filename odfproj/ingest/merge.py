"""Merge strategies: turn a freshly read batch into the changelog records to append (spec: Merge Strategies).

Input: ``batch``, the new data as read and preprocessed (user columns plus ``event_time``; no
``offset``, ``op`` or ``system_time``), and for Ledger and Snapshot ``history``, the dataset's data so
far with the full common data schema (``None`` for a dataset with no data yet).

Output: a DataFrame with the columns ``op`` (int32), ``event_time``, then the user columns in the
batch's order. The caller adds ``offset`` and ``system_time``.

Ordering contract
-----------------
The returned frame is **sorted in offset order across its partitions** (a range-partitioned
``orderBy``: every row of partition ``i`` comes before every row of partition ``i + 1``, and rows are
in order within each). The caller numbers the rows with
:func:`odfproj.engine.slices.number_rows`, which pins the partitions in a checkpoint, counts them and
adds each partition's base offset: no single-partition window. Do not reshuffle (join,
``repartition``, ``orderBy`` on other columns) before the offsets are assigned. The order is:

* Append and Ledger: a *stable* sort of the batch by ``event_time`` (ascending, nulls first): rows with
  equal event time keep their order in ``batch`` (its partitions in order, then rows within each).
  This is deterministic whenever ``batch`` is, which holds for the read phase's file scans.
* Snapshot: by the primary key columns (ascending, nulls first, in ``primaryKey`` order), then by
  ``op``; every key has one ``+A``, one ``-R`` or a ``-C`` (2) immediately followed by its ``+C`` (3).
  The key is unique on each side, so this order is total and independent of the input's row order.

Documented choices
------------------
* Primary keys: a null is a key value like any other; keys are matched null-safely (``<=>``) and a
  key is the tuple of its column values.
* Ledger: a batch row is dropped when its key occurs anywhere in ``history`` (whatever the ``op``: the
  key was seen). Within the batch the *first* row per key wins: the lowest ``event_time``, ties broken
  by position in ``batch`` (as above).
* Snapshot ``-R`` and ``-C`` carry exactly the retracted row, old ``event_time`` included: the spec
  says they "must carry the same exact data fields (all fields excluding offset, op, and system_time)
  as the event that is being retracted". ``+A`` and ``+C`` carry the new snapshot's row and event
  time. (Kamu's engines stamp the new snapshot's time on ``-R``/``-C`` when the event time comes from
  metadata; we follow the spec text.)
* Snapshot change detection: with ``compareColumns`` only those columns decide; otherwise every
  column but the primary key and ``event_time``. Event time is usually the snapshot's time (from
  metadata), so comparing it would turn every row into a correction; pass ``compare_event_time=True``
  when the batch's event time is real row data, or name ``event_time`` in ``compareColumns``.
  Comparisons are null-safe (null equals null); map columns are compared as their sorted entries.
* Duplicate primary keys within one snapshot raise ``MergeError`` naming the first keys (checked
  eagerly: one aggregation over the batch, at most three rows reach the driver). A first snapshot
  (no state) may leave the check to the caller (``check_unique=False``): its records are the batch
  sorted by key, so a repeated key shows as two neighbours in the written files
  (:func:`sorted_keys_repeat`, a read of the key columns instead of an aggregation over the batch);
  only then does :func:`check_unique_keys` run, to name them.

All work is joins, aggregations and one final (distributed) sort of the output rows; nothing
else is collected to the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.columns import column
from odfproj.engine.session import in_one_partition
from odfproj.ingest.errors import IngestError
from odfproj.odf.data_schema import EVENT_TIME, OFFSET, OP, SYSTEM_TIME, Op
from odfproj.state.projections import current_state, state_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Prefix of the helper columns this module adds and drops again; batch columns may not use it.
_HELPER_PREFIX = "__odfproj_"
_POS = _HELPER_PREFIX + "pos"
_RANK = _HELPER_PREFIX + "rank"
_OLD_PRESENT = _HELPER_PREFIX + "old"
_NEW_PRESENT = _HELPER_PREFIX + "new"


class MergeError(IngestError):
    """New data cannot be merged into a dataset (bad key, duplicate keys in a snapshot, schema mismatch...).

    Messages do not name the dataset or source (this module does not know them): the coordinator
    prefixes ``source_label(...)`` when it reports one.
    """


def merge_append(batch: DataFrame) -> DataFrame:
    """Append: every batch row as ``+A``, stably sorted by event time."""
    from pyspark.sql import functions as F

    _check_batch(batch)
    positioned = batch.withColumn(_POS, F.monotonically_increasing_id())
    return _finish(
        positioned, _op_literal(Op.APPEND), batch, [column(EVENT_TIME).asc_nulls_first(), column(_POS)]
    )


def merge_ledger(batch: DataFrame, history: DataFrame | None, primary_key: Sequence[str]) -> DataFrame:
    """Ledger: the batch rows whose key was never seen, first row per key only, as ``+A``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = _check_key(primary_key, batch, "Ledger")
    _check_batch(batch)
    rows = in_one_partition(batch.withColumn(_POS, F.monotonically_increasing_id()))
    if history is not None:
        _check_history_has(history, key)
        seen_names = [f"{_HELPER_PREFIX}seen{i}" for i in range(len(key))]
        seen = history.select(*[column(k).alias(s) for k, s in zip(key, seen_names, strict=True)])
        seen = in_one_partition(seen)
        rows = rows.join(seen, _null_safe_equal(key, seen_names), "left_anti")
    first = Window.partitionBy(*[column(k) for k in key]).orderBy(
        column(EVENT_TIME).asc_nulls_first(), column(_POS)
    )
    rows = rows.withColumn(_RANK, F.row_number().over(first)).where(column(_RANK) == 1)
    return _finish(rows, _op_literal(Op.APPEND), batch, [column(EVENT_TIME).asc_nulls_first(), column(_POS)])


#: At most this many rows a Ledger drops are gathered to the driver by :func:`ledger_in_batch_order`.
LEDGER_DROPS_LIMIT = 100_000


def ledger_in_batch_order(
    batch: DataFrame,
    history: DataFrame | None,
    primary_key: Sequence[str],
    *,
    limit: int = LEDGER_DROPS_LIMIT,
) -> DataFrame | None:
    """Ledger for a scanned batch whose rows share one event time: the batch without the rows it drops.

    With one event time, :func:`merge_ledger`'s order is the batch's own, so instead of moving every
    row by key and sorting them back, only the key columns are aggregated (and matched against
    ``history``), the positions of the dropped rows (a key's later rows, and rows whose key was seen)
    come to the driver, and the batch is filtered by a broadcast anti-join on its position, which keeps
    its partitions and order. ``batch`` must be a scan (every computation gives the same rows in the
    same partitions and order: the position is ``monotonically_increasing_id()`` over it). The caller
    adds ``op``. ``None`` when more than ``limit`` rows are dropped: then use :func:`merge_ledger`.
    """
    from pyspark.sql import functions as F

    key = _check_key(primary_key, batch, "Ledger")
    _check_batch(batch)
    positioned = batch.select(*[column(k) for k in key], F.monotonically_increasing_id().alias(_POS))
    count, lowest, highest = (_HELPER_PREFIX + n for n in ("count", "lowest", "highest"))
    repeated = (
        positioned.groupBy(*[column(k) for k in key])
        .agg(F.count(F.lit(1)).alias(count), F.min(_POS).alias(lowest), F.max(_POS).alias(highest))
        .where(column(count) > 1)
        .limit(limit + 1)
        .collect()
    )
    if sum(row[count] - 1 for row in repeated) > limit:
        return None
    dropped = {row[highest] for row in repeated if row[count] == 2}
    many = [row for row in repeated if row[count] > 2]
    if many:  # a key's rows between its first and last: find them by those few keys
        keys = batch.sparkSession.createDataFrame(
            [tuple(row[k] for k in key) for row in many], positioned.select(*key).schema
        )
        names = [f"{_HELPER_PREFIX}k{i}" for i in range(len(key))]
        keys = keys.toDF(*names)
        rows = positioned.join(F.broadcast(keys), _null_safe_equal(key, names), "left_semi").collect()
        firsts = {tuple(row[k] for k in key): row[lowest] for row in many}
        dropped |= {row[_POS] for row in rows if row[_POS] != firsts[tuple(row[k] for k in key)]}
    if history is not None:
        _check_history_has(history, key)
        names = [f"{_HELPER_PREFIX}seen{i}" for i in range(len(key))]
        seen = history.select(*[column(k).alias(n) for k, n in zip(key, names, strict=True)])
        known = positioned.join(seen, _null_safe_equal(key, names), "left_semi").select(_POS)
        found = known.limit(limit + 1).collect()
        dropped |= {row[_POS] for row in found}
        if len(found) > limit or len(dropped) > limit:
            return None
    if not dropped:
        return batch
    drops = batch.sparkSession.createDataFrame([(p,) for p in sorted(dropped)], f"{_POS} long")
    kept = batch.withColumn(_POS, F.monotonically_increasing_id())
    return kept.join(F.broadcast(drops), _POS, "left_anti").drop(_POS)


def merge_snapshot(
    batch: DataFrame,
    history: DataFrame | None,
    primary_key: Sequence[str],
    compare_columns: Sequence[str] | None = None,
    *,
    compare_event_time: bool = False,
    state: DataFrame | None = None,
    check_unique: bool = True,
) -> DataFrame:
    """Snapshot: change data capture of ``batch`` (a full snapshot) against the current state of ``history``.

    ``state`` is that current state when the caller already has it (one row per live key, ``event_time``
    and the user columns, as :func:`current_state` returns): the ingest pipeline reads it through the
    state index instead of re-reading the whole history. ``history`` is then ignored.

    ``+A`` for a key seen for the first time (or again after a ``-R``), ``-R`` with the old row for a
    key that vanished, ``-C`` (old row) then ``+C`` (new row) for a changed row, nothing for an
    unchanged one. ``compare_columns`` is the strategy's ``compareColumns``; ``compare_event_time``
    adds ``event_time`` to the compared columns when ``compare_columns`` is not given (use it when the
    event time is real row data rather than the snapshot's time). ``check_unique=False`` leaves the
    check of a first snapshot's keys to the caller (:func:`sorted_keys_repeat`); against a state it is
    always made here, since a repeated key there may leave no trace in the records.
    """
    from pyspark.sql import functions as F

    key = _check_key(primary_key, batch, "Snapshot")
    _check_batch(batch)
    compared = _compared_columns(batch, key, compare_columns, compare_event_time)
    if check_unique or state is not None or history is not None:
        check_unique_keys(batch, key)
    order = [*(column(k).asc_nulls_first() for k in key), column(OP)]

    if state is None and history is None:
        return first_snapshot_records(batch).orderBy(*order)
    if state is None:
        assert history is not None
        _check_history_has(history, key)
        _check_same_columns(batch, state_columns(history))
        state = current_state(history, key)
    else:
        _check_same_columns(batch, state.columns)

    names = batch.columns
    old_names = [f"{_HELPER_PREFIX}o{i}" for i in range(len(names))]
    new_names = [f"{_HELPER_PREFIX}n{i}" for i in range(len(names))]
    old_of = dict(zip(names, old_names, strict=True))
    new_of = dict(zip(names, new_names, strict=True))
    old = state.select(*[column(c).alias(old_of[c]) for c in names], F.lit(True).alias(_OLD_PRESENT))
    new = batch.select(*[column(c).alias(new_of[c]) for c in names], F.lit(True).alias(_NEW_PRESENT))
    old, new = in_one_partition(old), in_one_partition(new)
    joined = old.join(new, _null_safe_equal([old_of[k] for k in key], [new_of[k] for k in key]), "full_outer")

    types = dict(batch.dtypes)
    changed = reduce(
        lambda a, b: a | b,
        [
            ~_comparable(column(old_of[c]), types[c]).eqNullSafe(_comparable(column(new_of[c]), types[c]))
            for c in compared
        ],
        F.lit(False),
    )
    appeared, vanished = column(_OLD_PRESENT).isNull(), column(_NEW_PRESENT).isNull()
    ops = (
        F.when(appeared, F.array(F.lit(int(Op.APPEND))))
        .when(vanished, F.array(F.lit(int(Op.RETRACT))))
        .otherwise(F.array(F.lit(int(Op.CORRECT_FROM)), F.lit(int(Op.CORRECT_TO))))
    )
    diff = joined.where(appeared | vanished | changed).select(
        *[column(n) for n in (*old_names, *new_names)], F.explode(ops).alias(OP)
    )
    carries_old = column(OP).isin(int(Op.RETRACT), int(Op.CORRECT_FROM))
    records = diff.select(
        column(OP).cast("int").alias(OP),
        *[F.when(carries_old, column(old_of[c])).otherwise(column(new_of[c])).alias(c) for c in names],
    )
    return _finish(records, column(OP), batch, order)


def first_snapshot_records(batch: DataFrame) -> DataFrame:
    """A first snapshot's records (every row ``+A``) in the batch's order: :func:`merge_snapshot`'s before its sort.

    For a caller that sorts them by key its own way (:mod:`odfproj.ingest.key_order`), after
    :func:`merge_snapshot` has checked the batch and the strategy.
    """
    user = [c for c in batch.columns if c != EVENT_TIME]
    return batch.select(_op_literal(Op.APPEND).alias(OP), column(EVENT_TIME), *[column(c) for c in user])


# --- helpers -------------------------------------------------------------------------------------


def _op_literal(op: Op) -> Column:
    from pyspark.sql import functions as F

    return F.lit(int(op)).cast("int")


def _finish(rows: DataFrame, op: Column, batch: DataFrame, order: list[Column]) -> DataFrame:
    """Sorted by ``order`` across partitions (a range-partitioned sort), then op, event_time, user columns."""
    user = [c for c in batch.columns if c != EVENT_TIME]
    sorted_rows = rows.orderBy(*order)
    return sorted_rows.select(op.alias(OP), column(EVENT_TIME), *[column(c) for c in user])


def _check_batch(batch: DataFrame) -> None:
    columns = batch.columns
    clashing = [c for c in columns if c in (OFFSET, OP, SYSTEM_TIME)]
    if clashing:
        raise MergeError(
            f"the new data has a column named like a system column ({', '.join(map(repr, clashing))}); "
            "rename it in the preprocess step"
        )
    if EVENT_TIME not in columns:
        raise MergeError(f"the new data has no {EVENT_TIME!r} column")
    helpers = [c for c in columns if c.startswith(_HELPER_PREFIX)]
    if helpers:
        raise MergeError(f"column names starting with {_HELPER_PREFIX!r} are reserved: {', '.join(helpers)}")
    if len(set(columns)) != len(columns):
        raise MergeError(f"the new data has duplicate column names: {', '.join(columns)}")


def _check_key(primary_key: Sequence[str], batch: DataFrame, strategy: str) -> list[str]:
    from pyspark.sql.types import MapType

    key = list(primary_key)
    if not key:
        raise MergeError(f"the {strategy} merge strategy needs a primaryKey with at least one column")
    if len(set(key)) != len(key):
        raise MergeError(f"primaryKey names a column twice: {', '.join(key)}")
    missing = [k for k in key if k not in batch.columns]
    if missing:
        raise MergeError(
            f"primaryKey column {', '.join(map(repr, missing))} is not in the new data "
            f"(columns: {', '.join(batch.columns)})"
        )
    fields = {f.name: f.dataType for f in batch.schema.fields}
    maps = [k for k in key if isinstance(fields[k], MapType)]
    if maps:
        raise MergeError(f"primaryKey column {', '.join(map(repr, maps))} is a map, which cannot be a key")
    return key


def _check_history_has(history: DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in (OFFSET, OP, *columns) if c not in history.columns]
    if missing:
        raise MergeError(f"the dataset's existing data has no column {', '.join(map(repr, missing))}")


def _check_same_columns(batch: DataFrame, existing: Sequence[str]) -> None:
    new_only = [c for c in batch.columns if c not in existing]
    old_only = [c for c in existing if c not in batch.columns]
    if new_only or old_only:
        parts = []
        if new_only:
            parts.append(f"new columns {', '.join(new_only)}")
        if old_only:
            parts.append(f"missing columns {', '.join(old_only)}")
        raise MergeError(
            f"the new snapshot's columns differ from the dataset's ({'; '.join(parts)}); "
            "a Snapshot merge compares rows column by column and needs the same columns"
        )


def _compared_columns(
    batch: DataFrame, key: list[str], compare_columns: Sequence[str] | None, compare_event_time: bool
) -> list[str]:
    if compare_columns is not None:
        compared = list(compare_columns)
        if not compared:
            raise MergeError("compareColumns is empty: name at least one column, or leave it out")
        unknown = [c for c in compared if c not in batch.columns]
        if unknown:
            raise MergeError(
                f"compareColumns names {', '.join(map(repr, unknown))}, which the new data does not have "
                f"(columns: {', '.join(batch.columns)})"
            )
        return compared
    compared = [c for c in batch.columns if c not in key and c != EVENT_TIME]
    if compare_event_time and EVENT_TIME not in key:
        compared.append(EVENT_TIME)
    return compared


def _comparable(value: Column, type_name: str) -> Column:
    """Maps have no equality in Spark: compare their entries, sorted by key."""
    from pyspark.sql import functions as F

    if type_name.startswith("map<"):
        return F.array_sort(F.map_entries(value))
    return value


def _null_safe_equal(left: Sequence[str], right: Sequence[str]) -> Column:
    pairs = [column(a).eqNullSafe(column(b)) for a, b in zip(left, right, strict=True)]
    return reduce(lambda a, b: a & b, pairs)


def check_unique_keys(batch: DataFrame, key: Sequence[str]) -> None:
    """Raise ``MergeError`` naming the first repeated keys of a snapshot (one aggregation over ``batch``)."""
    from pyspark.sql import functions as F

    count = _HELPER_PREFIX + "count"
    duplicates = (
        batch.groupBy(*[column(k) for k in key])
        .agg(F.count(F.lit(1)).alias(count))
        .where(column(count) > 1)
        .orderBy(*[column(k).asc_nulls_first() for k in key])
        .limit(3)
        .collect()
    )
    if duplicates:
        described = "; ".join(f"{_describe_key(row, key)} ({row[count]} rows)" for row in duplicates)
        raise MergeError(
            f"the snapshot has more than one row for primary key {described}: a snapshot must hold at most "
            "one row per key (check the primaryKey or the source data)"
        )


def _describe_key(row: object, key: list[str]) -> str:
    values = [row[k] for k in key]  # type: ignore[index]
    return ", ".join(f"{k}={'null' if v is None else repr(v)}" for k, v in zip(key, values, strict=True))


def sorted_keys_repeat(files: Sequence[Path], key: Sequence[str]) -> bool | None:
    """Whether two neighbouring records of ``files`` (in order, sorted by ``key``) have the same key.

    Keys compare null-safely, as the merge matches them. Only the key columns are read, one file at a
    time. ``None`` when pyarrow cannot decide it as Spark would (floating-point keys, where Spark takes
    every NaN as one value, and nested types): the caller then checks the batch in Spark.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    previous = None
    for path in files:
        table = pq.read_table(path, columns=list(key))
        if any(pa.types.is_floating(f.type) or pa.types.is_nested(f.type) for f in table.schema):
            return None
        if previous is not None:
            table = pa.concat_tables([previous, table])
        same = None
        for name in key:
            values = table.column(name).combine_chunks()
            left, right = values.slice(0, len(values) - 1), values.slice(1)
            equal = pc.or_(
                pc.fill_null(pc.equal(left, right), False), pc.and_(pc.is_null(left), pc.is_null(right))
            )
            same = equal if same is None else pc.and_(same, equal)
        if same is not None and pc.any(same).as_py():
            return True
        if table.num_rows:
            previous = table.slice(table.num_rows - 1)
    return False


__all__ = [
    "MergeError",
    "check_unique_keys",
    "current_state",
    "first_snapshot_records",
    "ledger_in_batch_order",
    "merge_append",
    "merge_ledger",
    "merge_snapshot",
    "sorted_keys_repeat",
]
