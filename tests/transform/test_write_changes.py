"""``write_changes`` through the driver (small updates) and through Spark tasks write the same file.

The two writers must agree to the logical hash on every column type a derivative can output: the driver
writer (pyarrow) for the flat types it handles, the Spark writer for the rest (the driver refuses them).
Which writer wrote a file is read from its footer (``created_by``), so the routing is checked too.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odfproj.odf.data_schema import Op
from odfproj.storage.hashing import logical_digest_parquet
from odfproj.transform.execute import write_changes

pytestmark = pytest.mark.spark

SYSTEM_TIME = datetime(2026, 11, 26, 12, 0, 0, 123456, tzinfo=UTC)

#: Every flat type a query can output, with values that stress the conversion (nulls, pre-1970
#: instants with sub-millisecond digits that must be floored as Spark's TIMESTAMP_MILLIS writer does).
FLAT = """
    CAST(op AS INT) AS op,
    event_time,
    CAST(i AS TINYINT) AS b8, CAST(i * 300 AS SMALLINT) AS s16, CAST(i AS INT) AS i32, CAST(i AS BIGINT) AS i64,
    CAST(i / 3 AS FLOAT) AS f32, CAST(i / 7 AS DOUBLE) AS f64, CAST(i / 7 AS DECIMAL(9, 2)) AS d9,
    CAST(i * 1000000007 AS DECIMAL(38, 4)) AS d38, i % 2 = 0 AS flag, CONCAT('név-', i) AS text,
    CAST(CONCAT('b', i) AS BINARY) AS raw, DATE_ADD(DATE'1969-12-30', CAST(i AS INT)) AS day,
    TIMESTAMP_MICROS(i * 1234567 - 5000001) AS instant
"""
#: Types the driver leaves to Spark (maps have no logical hash, so no derivative stores one).
NESTED = """
    CAST(op AS INT) AS op, event_time, ARRAY(i, NULL) AS list, NAMED_STRUCT('a', i, 'b', CONCAT('x', i)) AS rec,
    CAST(TIMESTAMP_MICROS(i * 1234567 - 5000001) AS TIMESTAMP_NTZ) AS local
"""


def changes(spark, columns: str, rows: int):
    """``rows`` changes (a few retractions, null rows among them) with ``columns`` computed from ``i``."""
    spark.range(rows).selectExpr(
        f"CASE WHEN id % 5 = 0 THEN {int(Op.RETRACT)} ELSE {int(Op.APPEND)} END AS op",
        "TIMESTAMP_MICROS(1767225600000000 + (id % 4) * 1001) AS event_time",
        "CASE WHEN id % 6 = 3 THEN NULL ELSE id - 4 END AS i",
    ).repartition(3).createOrReplaceTempView("raw_changes")
    return spark.sql(f"SELECT {columns} FROM raw_changes")


def writer_of(path: Path) -> str:
    return pq.ParquetFile(path).metadata.created_by


def both(spark, tmp_path: Path, columns: str, rows: int, collect_below: int, declared=None):
    frame = changes(spark, columns, rows)
    by_spark = write_changes(frame, 7, SYSTEM_TIME, tmp_path / "spark.parquet", declared)
    by_driver = write_changes(
        frame, 7, SYSTEM_TIME, tmp_path / "driver.parquet", declared, collect_below=collect_below
    )
    return by_spark, by_driver


@pytest.mark.parametrize("columns", [FLAT, NESTED], ids=["flat", "nested"])
def test_both_writers_give_the_same_file(spark, tmp_path, columns) -> None:
    by_spark, by_driver = both(spark, tmp_path, columns, 40, collect_below=1000)
    assert by_spark == by_driver and by_spark.count == 40
    spark_file, driver_file = tmp_path / "spark.parquet", tmp_path / "driver.parquet"
    assert "parquet-mr" in writer_of(spark_file)
    assert ("parquet-mr" in writer_of(driver_file)) == (columns is NESTED)  # nested: the Spark writer
    left, right = pq.read_table(spark_file), pq.read_table(driver_file)
    assert left.schema == right.schema
    if columns is FLAT:  # (Spark writes TIMESTAMP_NTZ in microseconds whatever the declared unit)
        assert left.schema.equals(by_spark.schema)
    assert left.to_pylist() == right.to_pylist()
    assert left.column("offset").to_pylist() == list(range(7, 47))
    assert logical_digest_parquet(spark_file) == logical_digest_parquet(driver_file)
    # A second batch against the stored schema (its nullability wins) agrees too.
    declared = by_spark.schema
    for f in tmp_path.glob("*.parquet"):
        f.unlink()
    again_spark, again_driver = both(spark, tmp_path, columns, 12, collect_below=1000, declared=declared)
    assert again_spark == again_driver and again_spark.schema.equals(declared)
    assert ("parquet-mr" in writer_of(tmp_path / "driver.parquet")) == (columns is NESTED)
    assert logical_digest_parquet(tmp_path / "spark.parquet") == logical_digest_parquet(
        tmp_path / "driver.parquet"
    )


def test_more_changes_than_the_limit_fall_back_to_the_spark_writer(spark, tmp_path) -> None:
    by_spark, by_driver = both(spark, tmp_path, FLAT, 30, collect_below=29)
    assert by_spark == by_driver
    assert "parquet-mr" in writer_of(tmp_path / "driver.parquet")
    assert logical_digest_parquet(tmp_path / "spark.parquet") == logical_digest_parquet(
        tmp_path / "driver.parquet"
    )


def test_no_changes_write_nothing(spark, tmp_path) -> None:
    frame = changes(spark, FLAT, 0)
    written = write_changes(frame, 0, SYSTEM_TIME, tmp_path / "none.parquet", None, collect_below=10)
    assert written.count == 0 and written.schema is None and not (tmp_path / "none.parquet").exists()


def test_values_survive_as_spark_writes_them(spark, tmp_path) -> None:
    """Spot checks against hand-computed values: flooring of instants before 1970, dates, decimals."""
    both(spark, tmp_path, FLAT, 6, collect_below=100)
    rows = pq.read_table(tmp_path / "driver.parquet").to_pylist()
    by_i = {r["i64"]: r for r in rows}
    # i = -4: -4 * 1234567 - 5000001 = -9938269 us -> floored to -9939 ms
    assert by_i[-4]["instant"] == datetime(1969, 12, 31, 23, 59, 50, 61000, tzinfo=UTC)
    assert by_i[-4]["day"] == date(1969, 12, 26) and by_i[-4]["d9"] == Decimal("-0.57")
    assert rows[0]["op"] == int(Op.RETRACT) and rows[0]["system_time"] == datetime(
        2026, 11, 26, 12, 0, 0, 123000, tzinfo=UTC
    )
