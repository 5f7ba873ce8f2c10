"""An Append of a CSV read line by line is numbered from the records the read phase counted: no count job.

The counts are a prediction of how Spark splits the file (``engine.file_splits``, ``ingest.csv_lines``).
A right one must give the blocks the count job gives; a wrong one must be found before anything is
committed, whichever writer wrote the files, and the batch then counted by Spark, with the same result.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.ingest import pipeline, read
from odfproj.ingest.csv_lines import LineScan
from odfproj.odf import model
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.ingest.test_sliced_batches import data_blocks, records
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROWS = 60


def _source(merge: model.MergeStrategy) -> model.SetPollingSource:
    return model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path="data/rows.csv"),
        read=model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING")),
        merge=merge,
    )


class _Counted:
    """``number_rows`` as the pipeline calls it, counting the calls (each is a count job)."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = pipeline.number_rows

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self._real(*args, **kwargs)


def _ingest(
    spark,
    project: Path,
    ws: Workspace,
    name: str,
    merge: model.MergeStrategy,
    *,
    rows_per_file: int,
    holder: RecordingHolder | None = None,
):
    dataset = ws.create(name, model.DatasetKind.Root, events=[_source(merge)], system_time=T0)
    holder = holder or RecordingHolder(spark)
    engine = SparkEngine(holder, rows_per_file=rows_per_file)  # type: ignore[arg-type]
    result = pipeline.ingest_polling(dataset, engine, project_root=project, system_time=T0.replace(minute=1))
    assert result.records_added == ROWS and verify_dataset(dataset) == []
    table = records(dataset)
    assert table.column("offset").to_pylist() == table.column("id").to_pylist() == list(range(ROWS))
    # The watermark too: Spark's count job takes the latest event time from the records, a prediction from
    # the driver's own fallback event time.
    return [
        (b.event.new_data.offset_interval, b.event.new_data.logical_hash, b.event.new_watermark)
        for b in data_blocks(dataset)
    ]


@pytest.fixture
def many_splits(spark, project: Path, monkeypatch):
    """A CSV of 60 rows (with a blank line and CR LF line ends) that Spark reads in 200-byte splits,
    as large work (small work reads in a session of its own, whose files are one split)."""
    monkeypatch.setattr(pipeline, "small_ingest", lambda *args: False)
    lines = [f"{i},name-{i}" for i in range(ROWS)]
    lines.insert(30, "   ")
    (project / "data" / "rows.csv").write_bytes(("id,name\r\n" + "\r\n".join(lines) + "\r\n").encode())
    spark.conf.set("spark.sql.files.maxPartitionBytes", "200")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


@pytest.mark.parametrize(
    "merge",
    [model.MergeStrategyAppend(), model.MergeStrategyLedger(primary_key=("id",))],
    ids=["append", "ledger"],
)
def test_the_read_phase_counts_give_the_count_jobs_blocks(
    spark, project, ws, many_splits, monkeypatch, merge
):
    counted = _Counted()
    monkeypatch.setattr(pipeline, "number_rows", counted)
    scans: dict[str, LineScan] = {}
    real_scan = read.scan_lines

    def scan(*args, **kwargs) -> LineScan:
        scans[threading.current_thread().name] = real_scan(*args, **kwargs)
        return scans[threading.current_thread().name]

    monkeypatch.setattr(read, "scan_lines", scan)
    predicted = _ingest(spark, project, ws, "predicted", merge, rows_per_file=7)
    assert counted.calls == 0  # no count job
    # The pass ahead of the session (the target's settings: 128 MiB splits) missed this session's 200-byte
    # splits (stopped, or done in vain), so the read passed again with them.
    own = scans.pop(threading.current_thread().name)
    assert own.split_records is not None and len(own.split_records) == 4
    assert list(scans) == ["csv-lines-ahead"]

    monkeypatch.setattr(read, "scan_lines", lambda *a, **k: LineScan(real_scan(*a, **k).records_are_lines))
    assert _ingest(spark, project, ws, "counted", merge, rows_per_file=7) == predicted
    assert counted.calls == 1


def test_the_pass_made_while_the_session_starts_is_the_one_taken(
    spark, project, ws, many_splits, monkeypatch
):
    """With the target's settings the session's (200-byte splits), one pass, before Spark is asked for."""
    holder = RecordingHolder(spark)
    holder.settings = replace(
        holder.settings, conf={**holder.settings.conf, "spark.sql.files.maxPartitionBytes": "200"}
    )
    passes = []
    real_scan = read.scan_lines

    def scan(*args, **kwargs) -> LineScan:
        passes.append((threading.current_thread().name, holder.created))
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(read, "scan_lines", scan)
    counted = _Counted()
    monkeypatch.setattr(pipeline, "number_rows", counted)
    ahead = _ingest(spark, project, ws, "ahead", model.MergeStrategyAppend(), rows_per_file=7, holder=holder)
    assert passes == [("csv-lines-ahead", False)] and counted.calls == 0
    monkeypatch.setattr(read, "scan_lines", lambda *a, **k: LineScan(real_scan(*a, **k).records_are_lines))
    assert _ingest(spark, project, ws, "counted", model.MergeStrategyAppend(), rows_per_file=7) == ahead


@pytest.mark.parametrize(
    ("writer", "rows_per_file", "conf"),
    [
        ("one file", 1000, {}),
        ("cells joined by the driver", 7, {}),
        ("the older writer", 7, {"spark.sql.parquet.compression.codec": "lz4"}),
    ],
)
def test_a_wrong_count_is_found_before_the_commit_and_the_batch_counted(
    spark, project, ws, many_splits, monkeypatch, caplog, writer, rows_per_file, conf
):
    """One record moved from the first split's count to the second's: the total and every file's ends
    stay right (a footer cannot tell), but two records share an offset and one offset is missing."""
    expected = _ingest(
        spark, project, ws, "expected", model.MergeStrategyAppend(), rows_per_file=rows_per_file
    )
    real_scan = read.scan_lines

    def wrong(*args, **kwargs) -> LineScan:
        scan = real_scan(*args, **kwargs)
        assert scan.split_records is not None and scan.split_records[0] > 0
        first, second, *rest = scan.split_records
        return LineScan(True, (first - 1, second + 1, *rest))

    monkeypatch.setattr(read, "scan_lines", wrong)
    counted = _Counted()
    monkeypatch.setattr(pipeline, "number_rows", counted)
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        with caplog.at_level(logging.WARNING, logger=pipeline.__name__):
            blocks = _ingest(
                spark, project, ws, "recounted", model.MergeStrategyAppend(), rows_per_file=rows_per_file
            )
    finally:
        for key in conf:
            spark.conf.unset(key)
    assert blocks == expected
    assert counted.calls == 1
    assert any("did not match the records counted before it" in m for m in caplog.messages), writer


def test_a_ledger_that_drops_seen_keys_is_counted_not_predicted(spark, project, ws, monkeypatch, caplog):
    """Its records are the scan less the keys seen before: the scan's counts are not theirs."""
    monkeypatch.setattr(pipeline, "small_ingest", lambda *args: False)
    source = model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path="data/part-*.csv"),
        read=model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING")),
        merge=model.MergeStrategyLedger(primary_key=("id",)),
    )
    dataset = ws.create("ledger", model.DatasetKind.Root, events=[source], system_time=T0)
    engine = SparkEngine(RecordingHolder(spark), rows_per_file=7)  # type: ignore[arg-type]
    for part, ids in enumerate((range(0, 30), range(20, 50)), start=1):
        (project / "data" / f"part-{part}.csv").write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in ids))
        counted = _Counted()
        monkeypatch.setattr(pipeline, "number_rows", counted)
        with caplog.at_level(logging.WARNING, logger=pipeline.__name__):
            pipeline.ingest_polling(
                dataset, engine, project_root=project, system_time=T0.replace(minute=part)
            )
        assert counted.calls == (0 if part == 1 else 1)  # the first is the scan whole, the second is not
    assert not any("did not match" in m for m in caplog.messages)
    table = records(dataset)
    assert table.column("id").to_pylist() == table.column("offset").to_pylist() == list(range(50))
    assert verify_dataset(dataset) == []
