"""Numbering and writing data slices in Spark tasks (engine.slices): offsets and file cuts never depend on partitioning."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from odfproj.engine.slices import (
    DEFAULT_ROWS_PER_FILE,
    ROWS_PER_FILE_KEY,
    number_rows,
    rows_per_file,
    write_slices,
)
from odfproj.errors import EngineError

pytestmark = pytest.mark.spark


def ordered(spark, rows: int, partitions: int):
    """``rows`` values 0.. in order, split over ``partitions`` range partitions."""
    from pyspark.sql import functions as F

    return spark.range(rows).select((F.col("id") * 10).alias("value")).repartitionByRange(partitions, "value")


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_offsets_follow_the_order_whatever_the_partitioning(spark, partitions) -> None:
    numbered = number_rows(ordered(spark, 50, partitions), "offset", 100)
    rows = numbered.frame.collect()
    assert numbered.count == 50
    assert sorted((r.offset, r.value) for r in rows) == [(100 + i, 10 * i) for i in range(50)]


def test_per_partition_aggregates_come_back_with_the_counts(spark) -> None:
    from pyspark.sql import functions as F

    numbered = number_rows(ordered(spark, 50, 4), "offset", 0, {"top": F.max("value")})
    assert max(row["top"] for row in numbered.per_partition) == 490
    assert len(numbered.per_partition) <= 4


@pytest.mark.parametrize("partitions", [1, 4])
def test_files_are_cut_on_the_limit_grid_whatever_the_partitioning(spark, tmp_path, partitions) -> None:
    numbered = number_rows(ordered(spark, 23, partitions), "offset", 5)
    written = write_slices(numbered, numbered.frame, tmp_path, 10)
    assert [(w.first, w.count) for w in written] == [(5, 10), (15, 10), (25, 3)]
    for w in written:
        table = pq.read_table(w.path)
        assert table.column("offset").to_pylist() == list(range(w.first, w.first + w.count))
        assert table.column("value").to_pylist() == [10 * (o - 5) for o in range(w.first, w.first + w.count)]


def test_a_batch_within_the_limit_is_one_file_and_an_empty_one_none(spark, tmp_path) -> None:
    numbered = number_rows(ordered(spark, 23, 3), "offset", 0)
    (one,) = write_slices(numbered, numbered.frame, tmp_path, 0)
    assert (one.first, one.count) == (0, 23) and pq.ParquetFile(one.path).metadata.num_rows == 23
    empty = number_rows(ordered(spark, 0, 1), "offset", 0)
    assert empty.count == 0 and write_slices(empty, empty.frame, tmp_path, 10) == []


def test_the_limit_setting() -> None:
    assert rows_per_file({}) == DEFAULT_ROWS_PER_FILE
    assert rows_per_file({ROWS_PER_FILE_KEY: "7"}) == 7
    assert rows_per_file({ROWS_PER_FILE_KEY: "0"}) == 0
    with pytest.raises(EngineError, match="not a whole number"):
        rows_per_file({ROWS_PER_FILE_KEY: "many"})
