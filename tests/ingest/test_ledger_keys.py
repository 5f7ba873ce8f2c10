"""A Ledger batch for an empty dataset is written whole and its keys checked in the files; a repeat redoes it.

``keys_may_repeat`` must never miss a key Spark's grouping takes as repeated (nulls, NaN, -0.0, keys of
several columns, hashes spilled in buckets); the ingest must give the same blocks either way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.ingest import ledger_keys
from odfproj.ingest.fetch import POLLING_SOURCE_NAME
from odfproj.ingest.ledger_keys import keys_may_repeat
from odfproj.ingest.pipeline import commit_batch
from odfproj.ingest.read import read_files
from odfproj.odf import model
from odfproj.storage.dataset import Dataset
from tests.spark_helpers import RecordingHolder


def _files(tmp_path: Path, *tables: pa.Table) -> list[Path]:
    paths = []
    for i, table in enumerate(tables):
        paths.append(tmp_path / f"{i}.parquet")
        pq.write_table(table, paths[-1])
    return paths


@pytest.mark.parametrize(
    ("values", "repeats"),
    [
        ([[1, 2, 3], [4, 5]], False),
        ([[1, 2, 3], [4, 2]], True),  # across files
        ([[1, 2, 1]], True),  # within a file
        ([[None, 1], [2]], False),
        ([[None, 1], [None]], True),  # a null is a key value
        ([[0.0, float("nan")], [-0.0]], True),  # Spark groups -0.0 with 0.0
        ([[float("nan"), 1.5], [float("nan")]], True),  # and every NaN as one value
        ([["a", "b"], ["ab", ""]], False),
        ([["a", None], ["", "a"]], True),
        ([[], [7]], False),
    ],
)
def test_one_column_keys(tmp_path: Path, values, repeats: bool) -> None:
    kind = pa.float64() if any(isinstance(v, float) for part in values for v in part) else None
    tables = [pa.table({"k": pa.array(part, kind), "x": pa.array(range(len(part)))}) for part in values]
    assert keys_may_repeat(_files(tmp_path, *tables), ["k"], tmp_path) is repeats


def test_keys_of_several_columns(tmp_path: Path) -> None:
    first = pa.table({"a": [1, 1, None], "b": ["x", "y", "x"]})
    assert (
        keys_may_repeat(_files(tmp_path, first, pa.table({"a": [2], "b": ["x"]})), ["a", "b"], tmp_path)
        is False
    )
    assert keys_may_repeat(_files(tmp_path, first, pa.table({"a": [None], "b": ["x"]})), ["a", "b"], tmp_path)


def test_spilled_buckets_find_the_same_repeats(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ledger_keys, "_BUCKET_ROWS", 8)  # 300 keys: spilled over 64 buckets
    unique = [pa.table({"k": pa.array(range(i, 300, 3), pa.int64())}) for i in range(3)]
    assert keys_may_repeat(_files(tmp_path, *unique), ["k"], tmp_path) is False
    repeated = [*unique[:2], pa.table({"k": pa.array([1000, 5, 298], pa.int64())})]  # 298: in the second file
    assert keys_may_repeat(_files(tmp_path, *repeated), ["k"], tmp_path) is True
    assert list(tmp_path.glob("ledger-keys-*")) == []  # the spilled hashes are removed


def test_nested_keys_are_left_to_spark(tmp_path: Path) -> None:
    table = pa.table({"k": pa.array([[1], [2]])})
    assert keys_may_repeat(_files(tmp_path, table), ["k"], tmp_path) is True


T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEDGER = model.SetPollingSource(
    fetch=model.FetchStepFilesGlob(path="data/rows.csv"),
    read=model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING")),
    merge=model.MergeStrategyLedger(primary_key=("id",)),
)


def _ingest(spark, ws, name: str, csv: Path, work: Path, *, exact: bool) -> Dataset:
    dataset = ws.create(name, model.DatasetKind.Root, events=[LEDGER], system_time=T0)
    engine = SparkEngine(RecordingHolder(spark), rows_per_file=7)  # type: ignore[arg-type]
    batch = read_files(spark, LEDGER.read, [csv], materialize=False)
    work.mkdir(exist_ok=True)
    commit_batch(
        dataset,
        engine,
        batch,
        merge_strategy=LEDGER.merge,
        display_name="rows.csv",
        source=POLLING_SOURCE_NAME,
        event_time=T0,
        source_state=None,
        system_time=T0.replace(minute=1),
        work_dir=work,
        scanned=True,
        exact_ledger=exact,
    )
    assert list(work.iterdir()) == []  # no written file is left behind, redo or not
    return dataset


def _blocks(dataset: Dataset) -> list[tuple]:
    return [
        (b.event.new_data.offset_interval, b.event.new_data.logical_hash)
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData)
    ][::-1]


def _ids(dataset: Dataset) -> list[int | None]:
    files = [
        dataset.layout.data_path(b.event.new_data.physical_hash)
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData)
    ]
    return pa.concat_tables([pq.read_table(f) for f in files]).sort_by("offset").column("id").to_pylist()


@pytest.mark.spark
@pytest.mark.parametrize("repeated", [False, True])
def test_written_whole_or_merged_first_the_blocks_are_the_same(spark, ws, tmp_path, repeated: bool) -> None:
    ids = list(range(60))
    if repeated:
        ids[40] = ids[50] = 3  # two later rows of key 3, in other partitions and files
        ids[55] = None
        ids[58] = None
    csv = tmp_path / "rows.csv"
    csv.write_text("id,name\n" + "".join(f"{'' if i is None else i},name-{n}\n" for n, i in enumerate(ids)))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "200")  # many partitions: cells shared by tasks
    try:
        checked = _ingest(spark, ws, "checked", csv, tmp_path / "w1", exact=False)
        exact = _ingest(spark, ws, "exact", csv, tmp_path / "w2", exact=True)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert _blocks(checked) == _blocks(exact)
    kept = [i for n, i in enumerate(ids) if i not in ids[:n]]
    assert _ids(checked) == kept and len(kept) == (57 if repeated else 60)
