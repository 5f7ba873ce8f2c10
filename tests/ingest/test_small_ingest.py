"""A small ingest's records go through the driver (one Spark job): the same blocks as Spark's writer.

The driver path (``ingest.pipeline._collected``) must write the records the Spark path writes: same
offsets, values, Arrow types and logical hashes, same watermarks and the same refusals, for every merge
strategy. Each case ingests the same files into two workspaces, one with the driver path switched off.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.driver_slices import CODEC_KEY, driver_codec
from odfproj.engine.spark import SparkEngine
from odfproj.ingest import pipeline
from odfproj.ingest.errors import IngestError
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf import model
from odfproj.odf.arrow_schema import encode_arrow_schema
from odfproj.storage.dataset import Dataset
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.spark_helpers import RecordingHolder
from tests.transform.helpers import COMMON_FIELDS

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = (
    "event_time TIMESTAMP",
    "id BIGINT",
    "name STRING",
    "value DOUBLE",
    "price DECIMAL(9,2)",
    "day DATE",
    "flag BOOLEAN",
    "n INT",
)
FILES = {
    "part-1.csv": (
        "event_time,id,name,value,price,day,flag,n\n"
        "2026-01-02T10:00:00.123456Z,1,one,1.5,10.25,2026-01-02,true,1\n"
        "2026-01-01T09:00:00Z,2,,-0.0,0.10,2026-01-01,false,\n"
        "2026-01-01T09:00:00Z,3,three,NaN,,2025-12-31,,3\n"
    ),
    "part-2.csv": (
        "event_time,id,name,value,price,day,flag,n\n"
        "2026-01-03T00:00:00Z,1,ONE,1.5,10.25,2026-01-03,true,1\n"
        "2026-01-03T00:00:00Z,4,four,4.0,4.40,2026-01-03,false,4\n"
    ),
}
MERGES = {
    "append": model.MergeStrategyAppend(),
    "ledger": model.MergeStrategyLedger(primary_key=("id",)),
    "snapshot": model.MergeStrategySnapshot(primary_key=("id",)),
}


def _ingest_all(
    spark,
    tmp_path: Path,
    merge: model.MergeStrategy,
    *,
    driver: bool,
    text=FILES,
    schema=None,
    read_schema=SCHEMA,
) -> Dataset:
    project = tmp_path / ("driver" if driver else "spark")
    (project / "data").mkdir(parents=True)
    for name, content in text.items():
        (project / "data" / name).write_text(content)
    ws = Workspace(project / ".odf")
    source = model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path="data/part-*.csv"),
        read=model.ReadStepCsv(header=True, schema=read_schema),
        merge=merge,
    )
    declared = [] if schema is None else [model.SetDataSchema(schema=encode_arrow_schema(schema))]
    dataset = ws.create("r", model.DatasetKind.Root, events=[*declared, source], system_time=T0)
    engine = SparkEngine(RecordingHolder(spark))  # type: ignore[arg-type]
    ingest_polling(dataset, engine, project_root=project, system_time=T0.replace(hour=1))
    return dataset


def _added(dataset: Dataset) -> list[model.AddData]:
    return [b.event for _, b in dataset.iter_blocks() if isinstance(b.event, model.AddData)][::-1]


@pytest.fixture
def driver_calls(monkeypatch) -> list[bool]:
    """Each commit's choice: True when the driver path wrote (or found nothing to write)."""
    calls: list[bool] = []
    original = pipeline._collected

    def spy(*args, **kwargs):
        table = original(*args, **kwargs)
        calls.append(table is not None)
        return table

    monkeypatch.setattr(pipeline, "_collected", spy)
    return calls


@pytest.mark.parametrize("merge", list(MERGES), ids=list(MERGES))
def test_the_driver_writes_the_blocks_the_spark_writer_writes(
    spark, tmp_path, monkeypatch, driver_calls, merge
) -> None:
    by_driver = _ingest_all(spark, tmp_path, MERGES[merge], driver=True)
    assert driver_calls and all(driver_calls)  # every commit took the driver path
    monkeypatch.setattr(pipeline, "_collected", lambda *args, **kwargs: None)
    by_spark = _ingest_all(spark, tmp_path, MERGES[merge], driver=False)

    ours, theirs = _added(by_driver), _added(by_spark)
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs, strict=True):
        assert (a.new_data is None) == (b.new_data is None)
        assert a.new_watermark == b.new_watermark
        if a.new_data is None:
            continue
        assert a.new_data.offset_interval == b.new_data.offset_interval
        assert a.new_data.logical_hash == b.new_data.logical_hash
        mine = pq.read_table(by_driver.layout.data_path(a.new_data.physical_hash))
        spark_file = pq.read_table(by_spark.layout.data_path(b.new_data.physical_hash))
        assert mine.schema == spark_file.schema
        assert _rows(mine) == _rows(spark_file)
    assert by_driver.projection().arrow_schema == by_spark.projection().arrow_schema
    assert verify_dataset(by_driver) == []


def _rows(table) -> list[tuple]:
    """The table's rows in order, NaN written as text (Python's == says NaN differs from itself)."""
    return [
        tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row.values())
        for row in table.to_pylist()
    ]


def test_columns_named_like_the_batch_aggregates_are_the_users_own(spark, tmp_path, monkeypatch) -> None:
    """The driver collects each record's watermark value beside its columns: a user column named
    ``latest`` (or ``nulls:x``) must neither clash with it nor be taken for it."""
    text = {
        "part-1.csv": 'event_time,id,latest,"nulls:x"\n2026-01-02T00:00:00Z,1,7,\n2026-01-01T00:00:00Z,2,,b\n'
    }
    schema = ("event_time TIMESTAMP", "id BIGINT", "latest INT", "`nulls:x` STRING")
    by_driver = _ingest_all(spark, tmp_path, MERGES["append"], driver=True, text=text, read_schema=schema)
    monkeypatch.setattr(pipeline, "_collected", lambda *args, **kwargs: None)
    by_spark = _ingest_all(spark, tmp_path, MERGES["append"], driver=False, text=text, read_schema=schema)
    (ours,), (theirs,) = _added(by_driver), _added(by_spark)
    assert ours.new_watermark == theirs.new_watermark == T0.replace(day=2)
    assert ours.new_data is not None and theirs.new_data is not None
    assert ours.new_data.logical_hash == theirs.new_data.logical_hash
    mine = pq.read_table(by_driver.layout.data_path(ours.new_data.physical_hash))
    assert [(r["id"], r["latest"], r["nulls:x"]) for r in mine.to_pylist()] == [(2, None, "b"), (1, 7, None)]


def test_a_null_in_a_not_null_column_is_refused_as_by_spark(spark, tmp_path, monkeypatch) -> None:
    text = {"part-1.csv": "event_time,id,name,value,price,day,flag,n\n2026-01-01T00:00:00Z,1,,1,1,,true,1\n"}
    declared = pa.schema([*COMMON_FIELDS, pa.field("id", pa.int64()), pa.field("name", pa.string(), False)])
    merge = MERGES["append"]
    with pytest.raises(IngestError, match="column 'name' is NOT NULL") as by_driver:
        _ingest_all(spark, tmp_path, merge, driver=True, text=text, schema=declared)
    monkeypatch.setattr(pipeline, "_collected", lambda *args, **kwargs: None)
    with pytest.raises(IngestError, match="column 'name' is NOT NULL") as by_spark:
        _ingest_all(spark, tmp_path, merge, driver=False, text=text, schema=declared)
    assert str(by_driver.value) == str(by_spark.value)


def test_more_records_than_a_file_holds_go_to_the_spark_writer(
    spark, tmp_path, monkeypatch, driver_calls
) -> None:
    monkeypatch.setattr(SparkEngine, "rows_per_file", property(lambda self: 2))
    dataset = _ingest_all(spark, tmp_path, MERGES["append"], driver=True)
    assert driver_calls[0] is False  # 3 records, 2 per file: the Spark writer cuts them
    cut = [(a.new_data.offset_interval.start, a.new_data.offset_interval.end) for a in _added(dataset)]
    assert cut[:2] == [(0, 1), (2, 2)]
    assert verify_dataset(dataset) == []


def test_the_driver_writes_with_the_targets_codec_or_leaves_the_file_to_spark(spark) -> None:
    session = spark.newSession()
    frame = session.range(1)
    assert driver_codec(frame) == "SNAPPY"  # Spark's default, and pyarrow's
    for spark_name, pyarrow_name in (("gzip", "GZIP"), ("ZSTD", "ZSTD"), ("uncompressed", "NONE")):
        session.conf.set(CODEC_KEY, spark_name)
        assert driver_codec(frame) == pyarrow_name
    session.conf.set(CODEC_KEY, "lz4")  # Hadoop's LZ4 framing: pyarrow does not write it
    assert driver_codec(frame) is None
