"""Datasets as SQL views: the projections ``odfproj sql`` offers, and the one derivative queries see.

Projections, by view name (names hold dots, so a query quotes them with backticks):

- ``` `NAME` ``` is the dataset's **state**: the rows currently valid, with ``event_time`` and the user
  columns. A dataset with a primary key is read through its state index (latest valid row per key,
  Opal-style: valid rows are picked by bitmap, nothing is sort-merged); any other dataset as the
  multiset of its records not retracted (``+A``/``+C`` add a row, ``-R``/``-C`` take one away). This is
  exactly what a derivative query sees of an input, so a query tried here behaves the same in a manifest.
- ``` `NAME$changelog` ``` is every record as stored, with ``offset``, ``op`` and ``system_time``.
- With ``as_at`` every state and changelog view is the dataset as it was known at that system time: the
  index's as-at bitmap for keyed datasets, the records with ``system_time <= as_at`` for the others.

Derivative queries get only the current state: a changelog or as-at view would make a derivative depend
on how and when its inputs were ingested, which the spec forbids (results must not depend on batching).

Only the datasets a query mentions are read, so a query over one dataset costs one dataset.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.spark import SparkEngine, frame_from_arrow, translating_errors
from odfproj.errors import OdfprojError
from odfproj.odf import model
from odfproj.odf.data_schema import Vocab
from odfproj.odf.timestamps import to_utc
from odfproj.state.dataset_index import primary_key_of
from odfproj.state.frames import changelog_as_of, read_changelog_frame
from odfproj.state.projections import query_state
from odfproj.state.read import read_state
from odfproj.storage.dataset import Dataset
from odfproj.storage.workspace import Workspace

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHANGELOG_SUFFIX", "DatasetView", "changelog_frame", "referenced_views", "run_sql", "state_frame"]

#: Appended to a dataset's name for its changelog view.
CHANGELOG_SUFFIX = "$changelog"


@dataclass(frozen=True)
class DatasetView:
    """One view a query may use: its name, the dataset behind it and which projection of it."""

    name: str
    dataset: str
    changelog: bool


def referenced_views(sql: str, datasets: Iterable[str]) -> list[DatasetView]:
    """The views whose names occur in ``sql`` (case-insensitively); extra ones are harmless, none missed."""
    text = sql.lower()
    views = []
    for name in datasets:
        if name.lower() + CHANGELOG_SUFFIX in text:
            views.append(DatasetView(name + CHANGELOG_SUFFIX, name, True))
        if name.lower() in text.replace(name.lower() + CHANGELOG_SUFFIX, ""):
            views.append(DatasetView(name, name, False))
    return views


def state_frame(
    session: SparkSession, dataset: Dataset, scratch: Path, as_at: datetime | None = None
) -> DataFrame:
    """The dataset's state (see the module doc) as a DataFrame of ``event_time`` and the user columns.

    A keyed dataset's rows, picked through the index, reach Spark as a Parquet file in ``scratch``
    (which must outlive the DataFrame; see ``engine.spark.frame_from_arrow``).
    """
    projection = dataset.projection()
    if projection.arrow_schema is None:
        raise OdfprojError(f"dataset {dataset.name} has no data yet, so it has no state to query")
    if not primary_key_of(projection):
        return query_state(changelog_frame(session, dataset, as_at), Vocab.of(projection.set_vocab))
    table = read_state(dataset, as_at=to_utc(as_at) if as_at is not None else None)
    return frame_from_arrow(session, table.drop_columns([table.column_names[0]]), scratch)  # no offset


def changelog_frame(session: SparkSession, dataset: Dataset, as_at: datetime | None = None) -> DataFrame:
    """Every record of the dataset (optionally those known at ``as_at``) under its current data schema."""
    from pyspark.sql import functions as F

    projection = dataset.projection()
    if projection.arrow_schema is None:
        raise OdfprojError(f"dataset {dataset.name} has no data yet, so it has no records to query")
    history = read_changelog_frame(
        session, changelog_as_of(dataset, projection.head, projection.last_offset), projection.arrow_schema
    )
    if as_at is not None:
        system_time = Vocab.of(projection.set_vocab).system_time
        history = history.where(F.col(f"`{system_time}`") <= F.lit(to_utc(as_at)))
    return history


def run_sql(
    engine: SparkEngine,
    workspace: Workspace,
    sql: str,
    *,
    as_at: datetime | None = None,
    limit: int | None = None,
) -> pa.Table:
    """Run one Spark SQL query over the workspace's datasets as views; at most ``limit`` rows come back.

    The query goes through the same checks as a derivative's (a single query, deterministic, no file or
    JVM access), so ``InvalidQueryError`` says what to change.
    """
    names: Sequence[str] = workspace.list_datasets()
    views = referenced_views(sql, names)
    with (
        tempfile.TemporaryDirectory(prefix="odfproj-sql-") as scratch,
        translating_errors("query"),
        engine.scope() as scope,
    ):
        for view in views:
            dataset = workspace.open(view.dataset, recover=False)
            if view.changelog:
                frame = changelog_frame(scope.session, dataset, as_at)
            else:
                frame = state_frame(scope.session, dataset, Path(scratch), as_at)
            scope.register(view.name, frame)
        try:
            result = scope.run(model.TransformSql(engine="spark", query=sql))
        except InvalidQueryError as e:
            if "TABLE_OR_VIEW_NOT_FOUND" not in str(e):
                raise
            raise InvalidQueryError(
                f"{e} Datasets are views named after them, quoted with backticks "
                f"(`{names[0] if names else 'org.example.dataset'}`, or `NAME{CHANGELOG_SUFFIX}` for the "
                f"changelog); this workspace has {len(names)} dataset(s)."
            ) from None
        if limit is not None:
            result = result.limit(limit)
        return result.toArrow()
