"""A first snapshot numbered in key order without pinning its sorted rows: the general way's records, row for row."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow.parquet as pq
import pytest

from odfproj.engine.slices import number_rows, write_slices
from odfproj.engine.spark import SparkEngine
from odfproj.ingest.key_order import number_in_key_order
from odfproj.ingest.merge import MergeError
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf import model
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

SCHEMA = "k1 STRING, k2 INT, d DATE, m DECIMAL(10,2), v DOUBLE"


def frame(spark, rows):
    return spark.createDataFrame(rows, SCHEMA).repartition(3).localCheckpoint()


def general(records, key, first, limit):
    """The general way: range-sorted, pinned, counted (``number_rows``)."""
    from pyspark.sql import functions as F

    ordered = records.orderBy(*[F.col(k).asc_nulls_first() for k in key])
    return number_rows(ordered, "offset", first, {"latest": F.max("v")})


def collected(numbered):
    return [tuple(r) for r in numbered.frame.orderBy("offset").collect()]


def random_rows(n: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    keys = rng.sample([(s, i) for s in (None, "a", "b", "ä", "zz") for i in (None, *range(40))], n)
    return [
        (k1, k2, date(2020, 1, 1 + rng.randrange(28)), Decimal(rng.randrange(10**6)) / 100, rng.random())
        for k1, k2 in keys
    ]


@pytest.mark.parametrize("limit", [1, 2, 7, 50, 1000])
def test_the_records_and_offsets_are_the_general_ways(spark, limit) -> None:
    from pyspark.sql import functions as F

    records = frame(spark, random_rows(150, seed=limit))
    key = ["k1", "k2"]
    numbered = number_in_key_order(records, key, "offset", 10, limit, {"latest": F.max("v")}, carried=["v"])
    assert numbered is not None
    expected = general(records, key, 10, limit)
    assert (numbered.count, numbered.first) == (expected.count, 10)
    assert collected(numbered) == collected(expected)
    assert max(p["latest"] for p in numbered.per_partition) == max(
        p["latest"] for p in expected.per_partition
    )
    # Every file's records lie in one partition: no file is shared by two tasks.
    cells = numbered.frame.select(
        F.floor((F.col("offset") - 10) / limit).alias("cell"), F.spark_partition_id().alias("p")
    )
    assert cells.groupBy("cell").agg(F.countDistinct("p").alias("n")).where("n > 1").count() == 0


def test_dates_and_decimals_are_keys_too(spark, tmp_path) -> None:
    records = frame(
        spark, [(None, i, date(2020, 1, 1 + i % 28), Decimal(i) / 7, float(i)) for i in range(60)]
    )
    for key in (["d", "k2"], ["m"]):
        numbered = number_in_key_order(records, key, "offset", 0, 8)
        assert numbered is not None
        assert collected(numbered) == collected(general(records, key, 0, 8))
        written = write_slices(numbered, numbered.frame, tmp_path, 8)
        assert [(w.first, w.count) for w in written] == [(i, min(8, 60 - i)) for i in range(0, 60, 8)]
        for w in written:
            offsets = pq.read_table(w.path, columns=["offset"]).column("offset").to_pylist()
            assert offsets == list(range(w.first, w.first + w.count))


def test_where_it_does_not_apply_it_says_so_before_moving_records(spark) -> None:
    records = frame(spark, random_rows(30, seed=1))
    assert number_in_key_order(records, ["v"], "offset", 0, 5) is None  # a float key: NaN is Spark's own
    assert number_in_key_order(records, ["k1", "k2"], "offset", 0, 0) is None  # no records-per-file limit
    # A key on both sides of a file's bound: the general way finds and names it.
    repeated = frame(spark, [("a", 1, None, None, 0.0), ("a", 2, None, None, 0.0), ("a", 2, None, None, 1.0)])
    assert number_in_key_order(repeated, ["k1", "k2"], "offset", 0, 2) is None


def source(path: str) -> model.SetPollingSource:
    return model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path=path),
        read=model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING")),
        merge=model.MergeStrategySnapshot(primary_key=("id",)),
    )


def test_a_repeated_key_inside_one_file_is_still_named(spark, project, ws) -> None:
    (project / "data" / "s.csv").write_text("id,name\n4,e\n1,a\n2,b\n1,c\n3,d\n")
    dataset = ws.create("snap", model.DatasetKind.Root, events=[source("data/s.csv")])
    head = dataset.projection().head
    engine = SparkEngine(RecordingHolder(spark), rows_per_file=3)  # type: ignore[arg-type]
    with pytest.raises(MergeError, match=r"primary key id=1 \(2 rows\)"):
        ingest_polling(dataset, engine, project_root=project, system_time=datetime(2026, 1, 1, tzinfo=UTC))
    assert dataset.projection().head == head
