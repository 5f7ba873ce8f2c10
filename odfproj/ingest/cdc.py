"""The change-data-capture merge strategies of ODF 0.37: ``ChangelogStream`` and ``UpsertStream``.

Both read a batch whose rows say themselves what happened, in an ``op`` column (the ``SetVocab``
name, renamed to ``op`` by the caller) holding an operation type as its number (0-3) or its short code
(``+A``, ``-R``, ``-C``, ``+C``). Everything else is as in :mod:`odfproj.ingest.merge`: the batch holds
the user columns and ``event_time``; the output is ``op``, ``event_time``, then the user columns,
sorted in offset order across partitions; ``state`` is the dataset's current state (one row per live
key, as the state index or :func:`odfproj.state.projections.current_state` gives it), ``None`` before
the first data.

* **ChangelogStream** is ODF's own changelog: the rows are appended as they are, after checking that
  they are a valid continuation of the dataset, key by key, in the batch's order: ``+A`` only for a
  key with no current row; ``-R`` and ``-C`` only for a key with one, carrying exactly its values
  (the spec: "the same exact data fields as the event being retracted"; the event time too when the
  rows carry their own, else the record is given the retracted row's); every
  ``-C`` immediately followed, within its key, by its ``+C``. The reference implementation appends
  such a batch unchecked; a broken changelog would make every reader's state wrong, so odfproj
  refuses it, naming the record (its 1-based position in the batch, which for a line-per-record
  format is its data line) and the key.
* **UpsertStream** rows only carry new values: ``+A`` and ``+C`` are upserts, ``-R`` a deletion.
  The last row per key in the batch wins (intermediate updates fold away, as in the reference
  implementation), and the result is a Snapshot merge of those rows against the current state of
  the keys the batch touches: ``+A`` for a new key, ``-C``/``+C`` for a changed row, ``-R`` (with the
  stored values) for a deletion, nothing for an unchanged upsert or the deletion of an absent key
  (deletions are idempotent, as CDC sources replay them). One rule for "what changed", shared with
  Snapshot. A ``-C`` has no meaning in an upsert stream and is refused. Without an ``op`` column
  every row is an upsert.

Order: ChangelogStream by key (ascending, nulls first), then the batch's order within a key, which
keeps each key's sequence and each ``-C``/``+C`` pair together; UpsertStream as Snapshot (key, then
op). Both are deterministic whenever the batch is, as for Append.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

from odfproj.engine.columns import column
from odfproj.engine.session import in_one_partition
from odfproj.ingest.merge import (
    _HELPER_PREFIX,
    MergeError,
    _check_batch,
    _check_key,
    _check_same_columns,
    _comparable,
    _describe_key,
    _finish,
    _null_safe_equal,
    merge_snapshot,
)
from odfproj.odf.data_schema import EVENT_TIME, OP, Op

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_POS = _HELPER_PREFIX + "cdc_pos"
_RAW = _HELPER_PREFIX + "cdc_raw"
_PROBLEM = _HELPER_PREFIX + "cdc_problem"
_LIVE = _HELPER_PREFIX + "cdc_live"
_RANK = _HELPER_PREFIX + "cdc_rank"
#: How many refused records an error names (the first ones in the batch's order).
_SHOWN = 3


def merge_changelog_stream(
    batch: DataFrame, state: DataFrame | None, primary_key: Sequence[str], *, compare_event_time: bool = True
) -> DataFrame:
    """ChangelogStream: ``batch``'s own records, checked against ``state`` key by key (module doc).

    ``compare_event_time=False`` when the rows' event time is not theirs (it came from the fetch step or
    the ingest's time, not from the data): a ``-R`` or ``-C`` then cannot carry the event time of the
    row it retracts, so it is not compared, and the record gets the retracted row's own, as the spec
    wants a retraction to carry it.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = _check_key(primary_key, batch, "ChangelogStream")
    rows = _with_decoded_ops(batch, "ChangelogStream", allowed=tuple(Op))
    types = {c: t for c, t in batch.dtypes if c != OP}
    data = list(types)
    rows = in_one_partition(rows)
    if state is not None:
        _check_same_columns(batch.drop(OP), state.columns)
        stored = [f"{_HELPER_PREFIX}s{i}" for i in range(len(data))]
        current = state.select(
            *[column(c).alias(s) for c, s in zip(data, stored, strict=True)], F.lit(True).alias(_LIVE)
        )
        rows = rows.join(
            in_one_partition(current), _null_safe_equal(key, [stored[data.index(k)] for k in key]), "left"
        )
        live_at_start = column(_LIVE).isNotNull()
    else:
        live_at_start = F.lit(False)

    in_key = Window.partitionBy(*[column(k) for k in key]).orderBy(column(_POS))
    op = column(OP)
    before, after = F.lag(op).over(in_key), F.lead(op).over(in_key)
    compared = [c for c in data if compare_event_time or c != EVENT_TIME]
    values = F.struct(*[_comparable(column(c), types[c]).alias(c) for c in compared])
    if state is not None:
        stored_of = dict(zip(data, stored, strict=True))
        stored_values = F.struct(*[_comparable(column(stored_of[c]), types[c]).alias(c) for c in compared])
        stored_event_time = column(stored_of[EVENT_TIME])
    else:
        stored_values, stored_event_time = F.lit(None), F.lit(None)
    previous_values = F.when(before.isNull(), stored_values).otherwise(F.lag(values).over(in_key))
    previous_event_time = F.when(before.isNull(), stored_event_time).otherwise(
        F.lag(column(EVENT_TIME)).over(in_key)
    )
    live = F.when(before.isNull(), live_at_start).otherwise(before.isin(int(Op.APPEND), int(Op.CORRECT_TO)))
    asserting_old = op.isin(int(Op.RETRACT), int(Op.CORRECT_FROM))
    problem = (
        F.when(column(_RAW).isNull(), F.lit("a record without an op"))
        .when(op.isNull(), F.concat(F.lit("unknown op "), column(_RAW)))
        .when(
            (op == int(Op.CORRECT_TO)) & (F.coalesce(before, F.lit(-1)) != int(Op.CORRECT_FROM)),
            F.lit("+C without the -C before it (a correction is a -C with the old values, then its +C)"),
        )
        .when(
            (op == int(Op.CORRECT_FROM)) & (F.coalesce(after, F.lit(-1)) != int(Op.CORRECT_TO)),
            F.lit("-C without its +C right after it (a correction is a -C with the old values, then its +C)"),
        )
        .when((op == int(Op.APPEND)) & live, F.lit("+A of a key that already has a current row (use -C/+C)"))
        .when(asserting_old & ~live, F.concat(_code(op), F.lit(" of a key with no current row")))
        .when(
            asserting_old & ~values.eqNullSafe(previous_values),
            F.concat(
                _code(op),
                F.lit(" carries values other than the key's current row (it must carry them exactly)"),
            ),
        )
    )
    checked = rows.withColumn(_PROBLEM, problem)
    _refuse(checked, rows, key)
    if not compare_event_time:
        retracted_time = F.when(asserting_old, previous_event_time).otherwise(column(EVENT_TIME))
        checked = checked.withColumn(EVENT_TIME, retracted_time)
    order = [*(column(k).asc_nulls_first() for k in key), column(_POS)]
    return _finish(checked, op, batch.drop(OP), order)


def merge_upsert_stream(
    batch: DataFrame, state: DataFrame | None, primary_key: Sequence[str], *, compare_event_time: bool = False
) -> DataFrame:
    """UpsertStream: the batch's last row per key, merged as a Snapshot of the keys it touches (module doc)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = _check_key(primary_key, batch, "UpsertStream")
    if OP in batch.columns:
        rows = _with_decoded_ops(batch, "UpsertStream", allowed=(Op.APPEND, Op.RETRACT, Op.CORRECT_TO))
        _refuse(rows.withColumn(_PROBLEM, _unknown_op(rows, "UpsertStream")), rows, key)
    else:
        _check_batch(batch)
        rows = batch.withColumn(OP, F.lit(int(Op.APPEND))).withColumn(_POS, F.monotonically_increasing_id())
    data = [c for c in batch.columns if c != OP]
    last_first = Window.partitionBy(*[column(k) for k in key]).orderBy(column(_POS).desc())
    latest = (
        in_one_partition(rows).withColumn(_RANK, F.row_number().over(last_first)).where(column(_RANK) == 1)
    )
    upserts = latest.where(column(OP) != int(Op.RETRACT)).select(*[column(c) for c in data])
    if state is None:
        return merge_snapshot(upserts, None, key, compare_event_time=compare_event_time)
    touched_names = [f"{_HELPER_PREFIX}t{i}" for i in range(len(key))]
    touched = latest.select(*[column(k).alias(t) for k, t in zip(key, touched_names, strict=True)])
    touched_state = state.join(in_one_partition(touched), _null_safe_equal(key, touched_names), "left_semi")
    return merge_snapshot(upserts, None, key, compare_event_time=compare_event_time, state=touched_state)


# --- helpers -------------------------------------------------------------------------------------


def _with_decoded_ops(batch: DataFrame, strategy: str, *, allowed: Sequence[Op]) -> DataFrame:
    """``batch`` with ``op`` as an int (null where unknown or not ``allowed``), the raw value, and a position."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    if OP not in batch.columns:
        raise MergeError(
            f"the {strategy} merge strategy needs an {OP!r} column in the new data (its records' operation types)"
        )
    _check_batch(batch.drop(OP))
    raw = column(OP).cast(StringType())
    by_text = {str(int(op)): int(op) for op in allowed} | {op.code: int(op) for op in allowed}
    decoded = reduce(
        lambda acc, item: acc.when(F.trim(raw) == item[0], F.lit(item[1])),
        by_text.items(),
        F.when(F.lit(False), F.lit(0)),
    )
    return (
        batch.withColumn(_RAW, raw)
        .withColumn(OP, decoded.cast("int"))
        .withColumn(_POS, F.monotonically_increasing_id())
    )


def _unknown_op(rows: DataFrame, strategy: str) -> Column:
    from pyspark.sql import functions as F

    hint = " (an upsert stream has +A/+C upserts and -R deletions)" if strategy == "UpsertStream" else ""
    return F.when(
        column(_RAW).isNotNull() & column(OP).isNull(),
        F.concat(F.lit("unknown op "), column(_RAW), F.lit(hint)),
    ).when(column(_RAW).isNull(), F.lit("a record without an op"))


def _refuse(checked: DataFrame, rows: DataFrame, key: list[str]) -> None:
    """Raise naming the first refused records (their position in the batch and their key), if any.

    One job over the batch finds them; only on refusal do a few more count each one's position.
    """
    from pyspark.sql import functions as F

    bad = checked.where(column(_PROBLEM).isNotNull()).orderBy(column(_POS)).limit(_SHOWN).collect()
    if not bad:
        return
    total = checked.where(column(_PROBLEM).isNotNull()).count() if len(bad) == _SHOWN else len(bad)
    described = []
    for row in bad:
        position = rows.where(column(_POS) < F.lit(row[_POS])).count() + 1
        described.append(f"record {position} ({_describe_key(row, key)}): {row[_PROBLEM]}")
    more = f" (and {total - len(bad)} more)" if total > len(bad) else ""
    raise MergeError(f"refused the new data: {'; '.join(described)}{more}")


def _code(op: Column) -> Column:
    from pyspark.sql import functions as F

    return F.element_at(F.array(*[F.lit(o.code) for o in Op]), op + 1)


__all__ = ["merge_changelog_stream", "merge_upsert_stream"]
