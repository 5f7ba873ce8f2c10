"""A Ledger of one event time keeps its scan's order and drops rows by position: the same records as the sort."""

from __future__ import annotations

import pytest

from odfproj.ingest.merge import ledger_in_batch_order, merge_ledger
from odfproj.ingest.read import read_files
from odfproj.odf import model

pytestmark = pytest.mark.spark

READ = model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING"))


def scan(spark, path):
    from pyspark.sql import functions as F

    batch = read_files(spark, READ, [path], materialize=False)
    return batch.select(F.lit("2026-01-01 00:00:00").cast("timestamp").alias("event_time"), *batch.columns)


def rows(frame) -> list[tuple]:
    return [(r["id"], r["name"]) for r in frame.collect()]


def test_the_rows_kept_and_their_order_are_the_sorting_merges(spark, tmp_path) -> None:

    csv = tmp_path / "l.csv"
    lines = ["5,a", "3,b", "5,c", ",d", "7,e", "3,f", "3,g", "8,h", ",i", "3,j", "9,k", "1,l"]
    csv.write_text("id,name\n" + "\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "24")  # a scan of several partitions
    try:
        batch = scan(spark, csv)
        history = spark.createDataFrame([(0, 0, 9, "old")], "offset long, op int, id long, name string")
        for known in (None, history):
            expected = rows(merge_ledger(batch, known, ["id"]))
            kept = ledger_in_batch_order(batch, known, ["id"])
            assert kept is not None
            assert rows(kept) == expected
        assert expected == [(5, "a"), (3, "b"), (None, "d"), (7, "e"), (8, "h"), (1, "l")]
        # More dropped rows than the limit: the caller sorts as before.
        assert ledger_in_batch_order(batch, None, ["id"], limit=3) is None
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
