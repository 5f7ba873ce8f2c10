"""Projections of a changelog (the common data schema's ``op`` stream) onto the state it describes.

A changelog is a DataFrame with the full common data schema: ``offset``, ``op``, ``system_time``,
``event_time`` and the user columns. Reading it record by record in offset order and applying every
operation gives a *state*: ``+A`` and ``+C`` assert a row, ``-R`` and ``-C`` withdraw one (spec:
Representation of Retractions and Corrections). Two projections, both on Spark:

- :func:`current_state`, the latest valid row per primary key (a Ledger's or Snapshot's state when
  the state index is not used: it re-reads the whole history);
- :func:`multiset_state`, the rows left current with their multiplicity, for datasets without a key
  (every derivative: what a query sees of an input, see :func:`query_state`). Every record counts
  ``+1`` (``+A``, ``+C``) or ``-1`` (``-R``, ``-C``) for the row it carries (all state columns,
  ``event_time`` included: a retraction carries the retracted row exactly), and a state holds each
  row as many times as its count. This needs no primary key and does not depend on how the records
  were split into blocks.

The Arrow-side reads through the state index live in :mod:`odfproj.state.read`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from odfproj.engine.columns import column, literal
from odfproj.engine.session import in_one_partition
from odfproj.errors import OdfprojError
from odfproj.odf.data_schema import EVENT_TIME, OFFSET, OP, SYSTEM_TIME, Op, Vocab

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

#: Operations that assert a row; the other two (``-R``, ``-C``) withdraw one.
ASSERTING_OPS = (int(Op.APPEND), int(Op.CORRECT_TO))

_RANK = "__odfproj_rank"
#: The net count of a row in :func:`signed_counts` (a name no user column is expected to take).
COUNT = "__odfproj_count"
_COPY = "__odfproj_copy"


def renamed(frame: DataFrame, renames: Mapping[str, str]) -> DataFrame:
    """``frame`` with the columns ``renames`` names renamed (a ``Vocab``'s mapping), order kept."""
    if not any(c in renames for c in frame.columns):
        return frame
    return frame.select(*[column(c).alias(renames.get(c, c)) for c in frame.columns])


class ChangelogError(OdfprojError):
    """A changelog lacks the columns a projection needs (offset, op, the primary key)."""


def state_columns(history: DataFrame) -> list[str]:
    """The columns a state keeps: every history column but ``offset``, ``op`` and ``system_time``."""
    return [c for c in history.columns if c not in (OFFSET, OP, SYSTEM_TIME)]


def current_state(history: DataFrame, primary_key: Sequence[str]) -> DataFrame:
    """The latest valid row per primary key of ``history``: the state after its last record.

    For every key (key columns compared null-safely: a null is a key value like any other) the record
    with the highest offset decides: if it is ``+A`` or ``+C`` its values are the key's current row;
    if it is ``-R`` or ``-C`` the key has no current row (a ``-C`` whose ``+C`` carries another key
    moved the row to that key). The physical row order of ``history`` does not matter, only offsets.

    Returns the user columns plus ``event_time`` (history's column order, system columns dropped), one
    row per live key, in no particular order. Work is one window over the key (a shuffle and a sort);
    nothing is collected to the driver.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = list(primary_key)
    missing = [c for c in (OFFSET, OP, *key) if c not in history.columns]
    if missing:
        raise ChangelogError(f"the dataset's history has no column {', '.join(map(repr, missing))}")
    if not key:
        raise ChangelogError("a primary key needs at least one column")
    columns = state_columns(history)
    # A window over the key sorted by offset: one shuffle and one sort, faster than a sort-based
    # max_by aggregation of the whole row (measured on 1M rows).
    last_first = Window.partitionBy(*[column(c) for c in key]).orderBy(column(OFFSET).desc())
    ranked = history.select(*[column(c) for c in (OFFSET, OP, *columns)]).withColumn(
        _RANK, F.row_number().over(last_first)
    )
    live = ranked.where((column(_RANK) == 1) & column(OP).isin(*ASSERTING_OPS))
    return live.select(*[column(c) for c in columns])


def signed_counts(history: DataFrame, columns: Sequence[str], factor: int = 1) -> DataFrame:
    """``columns`` + the net count (:data:`COUNT`) of each distinct row of ``history``, times ``factor``."""
    from pyspark.sql import functions as F

    sign = F.when(column(OP).isin(*ASSERTING_OPS), literal(factor)).otherwise(literal(-factor)).cast("long")
    return in_one_partition(history).groupBy(*[column(c) for c in columns]).agg(F.sum(sign).alias(COUNT))


def repeated(counted: DataFrame, columns: Sequence[str], count: Column) -> DataFrame:
    """Every row of ``counted`` repeated ``count`` times (``count`` >= 1); ``op`` kept if present."""
    from pyspark.sql import functions as F

    copies = counted.withColumn(_COPY, F.explode(F.array_repeat(literal(True), count.cast("int"))))
    return copies.select(*[column(c) for c in columns], *[c for c in copies.columns if c == OP])


def grouping_values(frame: DataFrame, columns: Sequence[str]) -> list[Column] | None:
    """``columns`` of ``frame`` with the values a grouping by them gives back, or ``None`` if that takes one.

    Spark's grouping normalises floating-point keys: ``-0.0`` becomes ``0.0`` and every NaN the one
    canonical NaN. Every state a query sees, and every result the full path writes, passes through such
    a grouping (:func:`signed_counts`, ``net_counts``), so a path that skips it for rows it knows to be
    plain appends must normalise them the same way, or a ``-0.0`` would reach a query (``CAST(x AS
    STRING)`` tells them apart) or a file only on that path. Top-level ``FLOAT``/``DOUBLE`` columns are
    normalised here, one ``CASE`` each; a float nested in a struct, array or map is not, and ``None``
    then says the caller must group.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    values = []
    for name in columns:
        data_type = frame.schema[name].dataType
        if isinstance(data_type, T.FloatType | T.DoubleType):
            kind = data_type.simpleString()
            value, zero = column(name), literal(0.0).cast(kind)
            nan = literal("NaN").cast(kind)
            values.append(F.when(F.isnan(value), nan).when(value == zero, zero).otherwise(value).alias(name))
        elif _holds_float(data_type):
            return None
        else:
            values.append(column(name))
    return values


def _holds_float(data_type: DataType) -> bool:
    from pyspark.sql import types as T

    if isinstance(data_type, T.FloatType | T.DoubleType):
        return True
    if isinstance(data_type, T.StructType):
        return any(_holds_float(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _holds_float(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _holds_float(data_type.keyType) or _holds_float(data_type.valueType)
    return False


def multiset_state(history: DataFrame) -> DataFrame:
    """The rows ``history`` (a changelog in the common data schema) leaves current, with multiplicity."""
    columns = state_columns(history)
    counted = signed_counts(history, columns).where(column(COUNT) > 0)
    return repeated(counted, columns, column(COUNT))


def query_state(history: DataFrame, vocab: Vocab, *, appends_only: bool = False) -> DataFrame:
    """What a query sees of an input: its state, the event time under the input's own vocabulary.

    ``history`` is the input's changelog as its files name the columns (``vocab``). ``appends_only``
    says that every record of it is ``+A`` (:func:`odfproj.state.frames.only_appends`): its state is
    then its rows as they are, normalised as the grouping would (:func:`grouping_values`), no shuffle.
    """
    standard = renamed(history, vocab.to_standard())
    values = grouping_values(standard, state_columns(standard)) if appends_only else None
    state = standard.select(*values) if values is not None else multiset_state(standard)
    return renamed(state, {EVENT_TIME: vocab.event_time})


def signed_states(history: DataFrame, vocab: Vocab, *, withdraws: bool = True) -> tuple[DataFrame, DataFrame]:
    """What a stateless query sees of an input's new records: the rows they add and the rows they withdraw.

    ``history`` is a slice of the input's changelog (its files' column names, ``vocab``). Each row's
    records are netted first (``+A`` then ``-R`` of the same row in one slice cancel), through the same
    :func:`signed_counts` grouping as :func:`query_state`, so values reach the query normalised exactly
    as the full state's do (Spark's grouping turns ``-0.0`` into ``0.0``). Both parts are multisets with
    the event time under the input's own vocabulary, like :func:`query_state`.

    ``withdraws=False`` says the slice holds appends only (:func:`odfproj.state.frames.only_appends`):
    the withdrawn part is then an empty frame Spark knows to be empty (``limit(0)``), and its optimiser
    drops every branch of a plan that reads it. Nothing nets out then, and the added rows are the
    records' rows as they are, normalised as the grouping would (:func:`grouping_values`): no shuffle.
    """
    standard = renamed(history, vocab.to_standard())
    columns = state_columns(standard)
    back = {EVENT_TIME: vocab.event_time}
    values = None if withdraws else grouping_values(standard, columns)
    if values is not None:
        added = renamed(standard.select(*values), back)
        return added, added.limit(0)
    counted = signed_counts(standard, columns)
    added = renamed(repeated(counted.where(column(COUNT) > 0), columns, column(COUNT)), back)
    if not withdraws:
        return added, added.limit(0)
    withdrawn = repeated(counted.where(column(COUNT) < 0), columns, -column(COUNT))
    return added, renamed(withdrawn, back)


__all__ = [
    "ASSERTING_OPS",
    "COUNT",
    "ChangelogError",
    "current_state",
    "grouping_values",
    "multiset_state",
    "query_state",
    "renamed",
    "repeated",
    "signed_counts",
    "signed_states",
    "state_columns",
]
