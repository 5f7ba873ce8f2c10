"""Each data test as the query whose rows are its failures, or (freshness) a look at the chain.

The queries are ordinary ``odfproj sql`` queries over the datasets' state views (``state.views``), so
a generated query passes the same SQL allowlist as a user's, and a custom ``sql`` test is checked by it
exactly like a derivative's query: nothing a test file names can read files or reach the JVM.
"""

from __future__ import annotations

from datetime import datetime

from odfproj.engine.columns import quoted_name
from odfproj.quality.definitions import DataTest
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import DATA_EVENTS

__all__ = ["failing_rows_query", "freshness_failure", "quote_literal"]


def quote_literal(value: str | int | float) -> str:
    """A string or number as a Spark SQL literal (Spark reads backslash escapes in strings)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def failing_rows_query(test: DataTest) -> str:
    """The query returning the rows that make ``test`` fail (every kind but freshness)."""
    table = quoted_name(test.dataset)
    args = test.args
    if test.kind == "not_null":
        condition = " OR ".join(f"{quoted_name(c)} IS NULL" for c in test.columns)
        return f"SELECT * FROM {table} WHERE {condition}"
    if test.kind == "unique":
        columns = ", ".join(quoted_name(c) for c in test.columns)
        return f"SELECT {columns}, count(*) AS rows FROM {table} GROUP BY {columns} HAVING count(*) > 1"
    if test.kind == "accepted_values":
        column = quoted_name(args["column"])
        values = ", ".join(quote_literal(v) for v in args["values"])
        return f"SELECT * FROM {table} WHERE {column} IS NOT NULL AND {column} NOT IN ({values})"
    if test.kind == "relationships":
        column, key = quoted_name(args["column"]), quoted_name(args["field"])
        return (
            f"SELECT c.* FROM {table} AS c LEFT JOIN (SELECT DISTINCT {key} AS k FROM {quoted_name(args['to'])}) AS p "
            f"ON c.{column} = p.k WHERE c.{column} IS NOT NULL AND p.k IS NULL"
        )
    if test.kind == "row_count":
        bounds = []
        if "min" in args:
            bounds.append(f"count(*) < {int(args['min'])}")
        if "max" in args:
            bounds.append(f"count(*) > {int(args['max'])}")
        return f"SELECT count(*) AS row_count FROM {table} HAVING {' OR '.join(bounds)}"
    if test.kind == "sql":
        return str(args["query"])
    raise ValueError(f"{test.kind} tests are not queries")


def freshness_failure(test: DataTest, dataset: Dataset, now: datetime) -> str | None:
    """Why the dataset is stale at ``now`` (blocks after ``now`` are not yet known), or None if fresh.

    Read from the metadata chain alone: the newest data block's watermark (``of: watermark``) or its
    system time (``of: ingest``, the last time data was added).
    """
    for _, block in dataset.iter_blocks():  # newest first
        if block.system_time > now or not isinstance(block.event, DATA_EVENTS):
            continue
        if test.args["of"] == "ingest":
            if block.event.new_data is None:
                continue
            moment = block.system_time
        else:
            if block.event.new_watermark is None:
                continue
            moment = block.event.new_watermark
        age = now - moment
        if age.total_seconds() <= test.args["seconds"]:
            return None
        return f"the {_what(test)} is {moment.isoformat()}, {_human(age.total_seconds())} old (max_age {test.args['max_age']})"
    return f"the dataset has no {_what(test)} yet"


def _what(test: DataTest) -> str:
    return "last ingest" if test.args["of"] == "ingest" else "watermark"


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"
