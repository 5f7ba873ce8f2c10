"""What differs between two states of a dataset: schema, row counts, and rows added, removed and changed.

The question a reviewer asks of a change before it becomes history (issue 32's preview environments,
``odfproj diff``): not "which records were appended" but "how does the table differ". So both sides are
*states* (``state.views.state_frame``: the rows valid at a head or a time), compared:

- **by primary key** where the dataset has one: a key only before is removed, only after is added,
  on both sides with any compared value different is changed (and which columns differ is told);
- **as multisets** otherwise: a row counts as added as many times as it occurs more often after than
  before, and as removed the other way round; "changed" has no meaning without a key.

Rows are compared on the columns both sides have (``event_time`` included: it is data); a column only
one side has, or whose type differs, is a schema change, and a type change compares the values as
text. Nulls are equal to nulls. Counts are exact; the samples are the first rows by key (or by all
columns), at most ``sample`` of each kind, so the result is the same on every run.

All work is Spark joins and aggregations; only the counts and the samples reach the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from odfproj.engine.columns import column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["ChangedRow", "DataDiff", "SchemaChange", "diff_states"]

_PREFIX = "__odfproj_diff_"
_BEFORE, _AFTER = _PREFIX + "before", _PREFIX + "after"


@dataclass(frozen=True)
class SchemaChange:
    """A column added (``before`` None), dropped (``after`` None) or retyped; types in Spark's SQL spelling."""

    column: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class ChangedRow:
    """One key whose row differs: the values before and after (compared columns) and which of them differ."""

    key: Mapping[str, Any]
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class DataDiff:
    """How one dataset's state differs between two points (see the module doc)."""

    key: tuple[str, ...]
    schema_changes: tuple[SchemaChange, ...]
    rows_before: int
    rows_after: int
    added: int
    removed: int
    changed: int
    added_sample: tuple[Mapping[str, Any], ...]
    removed_sample: tuple[Mapping[str, Any], ...]
    changed_sample: tuple[ChangedRow, ...]

    @property
    def differs(self) -> bool:
        return bool(self.schema_changes or self.added or self.removed or self.changed)


def diff_states(
    before: DataFrame | None, after: DataFrame | None, key: Sequence[str] = (), *, sample: int = 5
) -> DataDiff:
    """Compare two states (``None``: the dataset had no data there). ``key``: empty for multisets."""
    if before is None and after is None:
        return DataDiff(tuple(key), (), 0, 0, 0, 0, 0, (), (), ())
    present = after if after is not None else before
    assert present is not None
    if before is None or after is None:
        # One side has no state: every row of the other is added (or removed), no schema to compare.
        rows = present.count()
        shown = tuple(_as_dict(r) for r in _first(present, list(key) or present.columns, sample))
        return DataDiff(
            tuple(key), (), 0 if before is None else rows, rows if before is None else 0,
            rows if before is None else 0, 0 if before is None else rows, 0,
            shown if before is None else (), () if before is None else shown, (),
        )  # fmt: skip
    changes = _schema_changes(before, after)
    compared = [c for c in after.columns if c in before.columns]
    retyped = {c.column for c in changes if c.before is not None and c.after is not None}
    missing_key = [k for k in key if k not in compared]
    if missing_key:
        key = ()  # the key itself changed: compare as multisets rather than guess
    left = before.select(*[_value(c, c in retyped) for c in compared])
    right = after.select(*[_value(c, c in retyped) for c in compared])
    if key:
        return _by_key(left, right, list(key), compared, changes, sample)
    return _as_multisets(left, right, compared, changes, sample)


def _by_key(
    before: DataFrame,
    after: DataFrame,
    key: list[str],
    compared: list[str],
    changes: tuple[SchemaChange, ...],
    sample: int,
) -> DataDiff:
    from pyspark.sql import functions as F

    old = [f"{_PREFIX}o{i}" for i in range(len(compared))]
    new = [f"{_PREFIX}n{i}" for i in range(len(compared))]
    old_of, new_of = dict(zip(compared, old, strict=True)), dict(zip(compared, new, strict=True))
    left = before.select(*[column(c).alias(old_of[c]) for c in compared], F.lit(True).alias(_BEFORE))
    right = after.select(*[column(c).alias(new_of[c]) for c in compared], F.lit(True).alias(_AFTER))
    same_key = reduce(lambda a, b: a & b, [column(old_of[k]).eqNullSafe(column(new_of[k])) for k in key])
    joined = left.join(right, same_key, "full_outer").cache()
    try:
        added, removed = column(_BEFORE).isNull(), column(_AFTER).isNull()
        differs = {c: ~column(old_of[c]).eqNullSafe(column(new_of[c])) for c in compared if c not in key}
        changed = ~added & ~removed & reduce(lambda a, b: a | b, differs.values(), F.lit(False))
        counts = joined.agg(
            F.sum(F.when(column(_BEFORE).isNotNull(), 1).otherwise(0)).alias("before"),
            F.sum(F.when(column(_AFTER).isNotNull(), 1).otherwise(0)).alias("after"),
            F.sum(F.when(added, 1).otherwise(0)).alias("added"),
            F.sum(F.when(removed, 1).otherwise(0)).alias("removed"),
            F.sum(F.when(changed, 1).otherwise(0)).alias("changed"),
        ).first()
        assert counts is not None
        old_order = [column(old_of[k]) for k in key]
        new_order = [column(new_of[k]) for k in key]
        added_rows = _first(joined.where(added), new_order, sample)
        removed_rows = _first(joined.where(removed), old_order, sample)
        changed_rows = _first(joined.where(changed), new_order, sample)
    finally:
        joined.unpersist()

    def side(row: Any, names: Mapping[str, str]) -> dict[str, Any]:
        return {c: row[names[c]] for c in compared}

    changed_sample = tuple(
        ChangedRow(
            key={k: row[new_of[k]] for k in key},
            before=side(row, old_of),
            after=side(row, new_of),
            columns=tuple(c for c in compared if c not in key and row[old_of[c]] != row[new_of[c]]),
        )
        for row in changed_rows
    )
    return DataDiff(
        tuple(key),
        changes,
        int(counts["before"] or 0),
        int(counts["after"] or 0),
        int(counts["added"] or 0),
        int(counts["removed"] or 0),
        int(counts["changed"] or 0),
        tuple(side(r, new_of) for r in added_rows),
        tuple(side(r, old_of) for r in removed_rows),
        changed_sample,
    )


def _as_multisets(
    before: DataFrame, after: DataFrame, compared: list[str], changes: tuple[SchemaChange, ...], sample: int
) -> DataDiff:
    added = after.exceptAll(before)
    removed = before.exceptAll(after)
    order = [column(c) for c in compared]
    return DataDiff(
        (),
        changes,
        before.count(),
        after.count(),
        added.count(),
        removed.count(),
        0,
        tuple(_as_dict(r) for r in _first(added, order, sample)),
        tuple(_as_dict(r) for r in _first(removed, order, sample)),
        (),
    )


def _schema_changes(before: DataFrame, after: DataFrame) -> tuple[SchemaChange, ...]:
    old, new = dict(before.dtypes), dict(after.dtypes)
    changes = [SchemaChange(c, old.get(c), t) for c, t in after.dtypes if old.get(c) != t]
    changes += [SchemaChange(c, t, None) for c, t in before.dtypes if c not in new]
    return tuple(changes)


def _value(name: str, as_text: bool) -> Column:
    """A compared column; a retyped one as text, so that both sides compare at all."""
    return column(name).cast("string").alias(name) if as_text else column(name)


def _first(frame: DataFrame, order: Sequence[Column | str], count: int) -> list[Any]:
    if count <= 0:
        return []
    columns = [column(c) if isinstance(c, str) else c for c in order]
    return frame.orderBy(*[c.asc_nulls_first() for c in columns]).limit(count).collect()


def _as_dict(row: Any) -> dict[str, Any]:
    return row.asDict(recursive=False)
