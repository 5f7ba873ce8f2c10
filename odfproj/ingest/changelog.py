"""Projections of a changelog (the common data schema's ``op`` stream) onto the state it describes.

A changelog is a DataFrame with the full common data schema: ``offset``, ``op``, ``system_time``,
``event_time`` and the user columns. Reading it record by record in offset order and applying every
operation gives a *state*: ``+A`` and ``+C`` assert a row, ``-R`` and ``-C`` withdraw one (spec:
Representation of Retractions and Corrections).

``current_state`` is the plain projection: it re-reads the whole history. It is deliberately narrow
(history and primary key in, one row per key out) so the Opal-style state index of ``odfproj/state/``
can replace it later without touching the merge strategies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from odfproj.errors import OdfprojError
from odfproj.odf.data_schema import OFFSET, OP, SYSTEM_TIME, Op

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Operations that assert a row; the other two (``-R``, ``-C``) withdraw one.
ASSERTING_OPS = (int(Op.APPEND), int(Op.CORRECT_TO))

_RANK = "__odfproj_rank"


def column(name: str):
    """A reference to the top-level column ``name``, quoted so dots and backticks in it stay literal."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


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


__all__ = ["ASSERTING_OPS", "ChangelogError", "column", "current_state", "renamed", "state_columns"]
