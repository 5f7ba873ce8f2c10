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
  refuses it, naming the record and its key. Given the batch's :class:`RecordOrigin` (the ingest
  passes one when the batch is the read files' records, no preprocess in between), a record is named
  by its file and the line it starts on there (``data/log/3.csv line 3``); without one, by its
  1-based position in the batch (``record 2``).
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    from pyspark.sql import Column, DataFrame, Row

_POS = _HELPER_PREFIX + "cdc_pos"
_RAW = _HELPER_PREFIX + "cdc_raw"
_PROBLEM = _HELPER_PREFIX + "cdc_problem"
_LIVE = _HELPER_PREFIX + "cdc_live"
_RANK = _HELPER_PREFIX + "cdc_rank"
#: How many refused records an error names (the first ones in the batch's order).
_SHOWN = 3
#: The column of a batch read from several files that holds each record's file (as the reader names it).
RECORD_FILE = _HELPER_PREFIX + "record_file"


@dataclass(frozen=True, slots=True)
class RecordOrigin:
    """Where a batch's records come from, so that a refusal names a record by its file and line.

    Used on refusal only: the happy path carries nothing for it when the batch is one file, and each
    record's file name (:data:`RECORD_FILE`, set by the reader) when it is several.
    """

    #: ``(the record's file: its RECORD_FILE value, None for the one file; 1-based number of the record in
    #: that file, in the file's order)`` -> how a message names it, such as ``data/log/3.csv line 3``.
    locate: Callable[[str | None, int], str]
    #: The batch's :data:`RECORD_FILE` column when it was read from several files; ``None``: one file.
    file_column: str | None = None


def merge_changelog_stream(
    batch: DataFrame,
    state: DataFrame | None,
    primary_key: Sequence[str],
    *,
    compare_event_time: bool = True,
    origin: RecordOrigin | None = None,
) -> DataFrame:
    """ChangelogStream: ``batch``'s own records, checked against ``state`` key by key (module doc).

    ``compare_event_time=False`` when the rows' event time is not theirs (it came from the fetch step or
    the ingest's time, not from the data): a ``-R`` or ``-C`` then cannot carry the event time of the
    row it retracts, so it is not compared, and the record gets the retracted row's own, as the spec
    wants a retraction to carry it. ``origin``: where the records come from, for a refusal's message.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    carried = _carried(batch, origin)
    key = _check_key(primary_key, batch.drop(*carried), "ChangelogStream")
    rows = _with_decoded_ops(batch, "ChangelogStream", allowed=tuple(Op), carried=carried)
    batch = batch.drop(*carried)
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
    _refuse(checked, rows, key, origin)
    if not compare_event_time:
        retracted_time = F.when(asserting_old, previous_event_time).otherwise(column(EVENT_TIME))
        checked = checked.withColumn(EVENT_TIME, retracted_time)
    order = [*(column(k).asc_nulls_first() for k in key), column(_POS)]
    return _finish(checked, op, batch.drop(OP), order)


def merge_upsert_stream(
    batch: DataFrame,
    state: DataFrame | None,
    primary_key: Sequence[str],
    *,
    compare_event_time: bool = False,
    origin: RecordOrigin | None = None,
) -> DataFrame:
    """UpsertStream: the batch's last row per key, merged as a Snapshot of the keys it touches (module doc).

    ``origin``: where the records come from, for a refusal's message.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    carried = _carried(batch, origin)
    key = _check_key(primary_key, batch.drop(*carried), "UpsertStream")
    if OP in batch.columns:
        allowed = (Op.APPEND, Op.RETRACT, Op.CORRECT_TO)
        rows = _with_decoded_ops(batch, "UpsertStream", allowed=allowed, carried=carried)
        _refuse(rows.withColumn(_PROBLEM, _unknown_op(rows, "UpsertStream")), rows, key, origin)
    else:
        _check_batch(batch.drop(*carried))
        rows = batch.withColumn(OP, F.lit(int(Op.APPEND))).withColumn(_POS, F.monotonically_increasing_id())
    data = [c for c in batch.columns if c != OP and c not in carried]
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


def _carried(batch: DataFrame, origin: RecordOrigin | None) -> tuple[str, ...]:
    """The columns of ``batch`` that say where its records come from, not data (:class:`RecordOrigin`)."""
    if origin is None or origin.file_column is None or origin.file_column not in batch.columns:
        return ()
    return (origin.file_column,)


def _with_decoded_ops(
    batch: DataFrame, strategy: str, *, allowed: Sequence[Op], carried: Sequence[str] = ()
) -> DataFrame:
    """``batch`` with ``op`` as an int (null where unknown or not ``allowed``), the raw value, and a position.

    ``carried``: columns of ``batch`` that are not data (:func:`_carried`), kept for :func:`_refuse`.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    if OP not in batch.columns:
        raise MergeError(
            f"the {strategy} merge strategy needs an {OP!r} column in the new data (its records' operation types)"
        )
    _check_batch(batch.drop(OP, *carried))
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


def _refuse(checked: DataFrame, rows: DataFrame, key: list[str], origin: RecordOrigin | None) -> None:
    """Raise naming the first refused records (where they are, :func:`_where`, and their key), if any.

    One job over the batch finds them; only on refusal do a few more count each one's position.
    """
    bad = checked.where(column(_PROBLEM).isNotNull()).orderBy(column(_POS)).limit(_SHOWN).collect()
    if not bad:
        return
    total = checked.where(column(_PROBLEM).isNotNull()).count() if len(bad) == _SHOWN else len(bad)
    described = [f"{_where(row, rows, origin)} ({_describe_key(row, key)}): {row[_PROBLEM]}" for row in bad]
    more = f" (and {total - len(bad)} more)" if total > len(bad) else ""
    raise MergeError(f"refused the new data: {'; '.join(described)}{more}")


def _where(row: Row, rows: DataFrame, origin: RecordOrigin | None) -> str:
    """How a refusal names the record ``row`` of ``rows``: by its file and line when ``origin`` says them.

    Within one file the batch's order (``_POS``, the scan's partitions in order) is the file's, so a
    record's number in its file is one more than the records of that file before it; the origin turns
    it into a line. Without an origin, or a record whose file the reader could not tell, its position
    in the batch.
    """
    from pyspark.sql import functions as F

    before = column(_POS) < F.lit(row[_POS])
    file_column = origin.file_column if origin is not None else None
    if origin is None or (
        file_column is not None and (file_column not in rows.columns or row[file_column] is None)
    ):
        return f"record {rows.where(before).count() + 1}"
    if file_column is None:
        return origin.locate(None, rows.where(before).count() + 1)
    name = str(row[file_column])
    return origin.locate(name, rows.where(before & (column(file_column) == F.lit(name))).count() + 1)


def _code(op: Column) -> Column:
    from pyspark.sql import functions as F

    return F.element_at(F.array(*[F.lit(o.code) for o in Op]), op + 1)


__all__ = ["RECORD_FILE", "RecordOrigin", "merge_changelog_stream", "merge_upsert_stream"]
