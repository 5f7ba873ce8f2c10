"""The driver's count of each split's records is what Spark's scan gives each partition, file after file.

Random small CSV files (LF, CR LF and lone CR line ends, blank and whitespace-only lines, a line that
starts with a space, with and without a header and a last line break), each read by Spark under a
random split size and open cost: ``split_bytes`` plus ``scan_lines`` must give, partition by
partition, the records Spark's scan counts. A session of its own keeps the settings from other tests.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from odfproj.engine.file_splits import _bytes, _local_cores, split_bytes, split_bytes_before_start
from odfproj.ingest import csv_lines
from odfproj.ingest.csv_lines import scan_lines

_ENDS = (b"\n", b"\r\n", b"\r")


def _random_csv(rng: random.Random, header: bool) -> bytes:
    lines = []
    for i in range(rng.randint(0, 30)):
        kind = rng.random()
        if kind < 0.1:
            body = b""
        elif kind < 0.15:
            body = rng.choice([b" ", b"\t", b"  \t "])
        elif kind < 0.2:
            body = f" {i},y".encode()
        else:
            body = f"{i},{'x' * rng.randint(0, 12)}".encode()
        lines.append(body + rng.choice(_ENDS))
    data = b"".join(lines)
    if data and rng.random() < 0.3:
        data = data.rstrip(b"\r\n")  # no last line break
    return (b"id,name" + rng.choice(_ENDS) + data) if header else data


@pytest.mark.spark
def test_the_counts_are_the_records_of_sparks_partitions(spark, tmp_path: Path, monkeypatch) -> None:
    from pyspark.sql import functions as F

    session = spark.newSession()
    rng = random.Random(26)
    for trial in range(40):
        header = rng.random() < 0.5
        data = _random_csv(rng, header)
        path = tmp_path / f"f{trial}.csv"
        path.write_bytes(data)
        session.conf.set("spark.sql.files.maxPartitionBytes", str(rng.choice([7, 13, 37, 64, 1000])))
        session.conf.set("spark.sql.files.openCostInBytes", str(rng.choice([1, 5])))
        monkeypatch.setattr(csv_lines, "_CHUNK", rng.choice([3, 8, 1 << 20]))  # pieces cut anywhere
        size = split_bytes(session, len(data))
        assert size is not None
        scan = scan_lines(
            str(path), separator=",", quote='"', escape="\\", charset="utf-8", split_bytes=size, header=header
        )
        frame = (
            session.read.options(header=str(header).lower(), mode="FAILFAST", multiLine="false")
            .schema("id STRING, name STRING")
            .csv(str(path))
        )
        counts = {
            r["p"]: r["n"]
            for r in frame.groupBy(F.spark_partition_id().alias("p")).agg(F.count("*").alias("n")).collect()
        }
        actual = tuple(counts.get(p, 0) for p in range(frame.rdd.getNumPartitions()))
        assert scan.split_records == actual, (trial, size, header, data)


@pytest.mark.spark
def test_the_split_size_follows_the_sessions_settings(spark) -> None:
    session = spark.newSession()
    parallelism = spark.sparkContext.defaultParallelism
    assert split_bytes(session, 10 << 30) == 128 << 20  # big: the most a partition takes
    assert split_bytes(session, 1000) == 4 << 20  # small: the open cost
    assert split_bytes(session, 40 << 20) == ((40 << 20) + (4 << 20)) // parallelism
    session.conf.set("spark.sql.files.minPartitionNum", "4")
    session.conf.set("spark.sql.files.openCostInBytes", "1k")
    assert split_bytes(session, 40 << 20) == ((40 << 20) + 1024) // 4
    session.conf.set("spark.sql.files.maxPartitionNum", "3")
    assert split_bytes(session, 40 << 20) is None  # Spark may merge the partitions: no prediction


@pytest.mark.spark
def test_the_split_size_told_before_the_session_starts_is_the_sessions(spark) -> None:
    """From the master and settings a session is started with, what that session says once it is up."""
    from tests.conftest import _test_spark_settings

    settings = _test_spark_settings()
    conf = settings.effective_conf()
    for size in (1000, 40 << 20, (40 << 20) + 12345, 10 << 30):
        assert split_bytes_before_start(settings.master, conf, size) == split_bytes(spark, size), size
    session = spark.newSession()
    for key, value in {
        "spark.sql.files.minPartitionNum": "3",
        "spark.sql.files.openCostInBytes": "1k",
    }.items():
        session.conf.set(key, value)
        conf[key] = value
        assert split_bytes_before_start(settings.master, conf, 40 << 20) == split_bytes(session, 40 << 20)


def test_a_local_masters_cores_and_no_prediction_for_others(monkeypatch) -> None:
    """No JVM needed: a cluster's default parallelism is its executors' cores, known once they register."""
    import os

    assert _local_cores("local") == 1
    assert _local_cores("local[3]") == 3
    assert _local_cores("local[2, 4]") == 2  # with task retries
    assert _local_cores("local[*]") == _local_cores("local[*,2]") == len(os.sched_getaffinity(0))
    with monkeypatch.context() as patched:  # macOS has no sched_getaffinity: the machine's cores
        patched.delattr(os, "sched_getaffinity")
        assert _local_cores("local[*]") == os.cpu_count()
    for master in ("spark://host:7077", "sc://host:15002", "yarn", "local-cluster[2,1,1024]"):
        assert _local_cores(master) is None
        assert split_bytes_before_start(master, {}, 40 << 20) is None
    assert split_bytes_before_start("local[4]", {}, 40 << 20) == ((40 << 20) + (4 << 20)) // 4
    assert (
        split_bytes_before_start("local[4]", {"spark.default.parallelism": "8"}, 40 << 20)
        == ((40 << 20) + (4 << 20)) // 8
    )
    assert split_bytes_before_start("local[4]", {"spark.default.parallelism": "x"}, 40 << 20) is None
    assert split_bytes_before_start("local[4]", {"spark.sql.files.maxPartitionNum": "2"}, 40 << 20) is None


def test_size_settings_as_spark_reads_them() -> None:
    """No JVM needed."""
    assert _bytes("128m", 0) == 128 << 20
    assert _bytes("4194304", 0) == 4 << 20
    assert _bytes(" 1 GB ", 0) == 1 << 30
    assert _bytes("512b", 0) == 512
    assert _bytes(None, 7) == 7
    assert _bytes("1.5g", 0) is None and _bytes("12x", 0) is None
