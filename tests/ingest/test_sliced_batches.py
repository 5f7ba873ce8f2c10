"""A batch over the records-per-file limit becomes several blocks in one transaction, and nobody can tell.

The same snapshots are ingested twice, once whole and once cut into files of two records: the records
(offsets, ops, system times included), the changelog, the state index's answers and ``verify`` agree.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf import model
from odfproj.state.read import read_changelog, read_state
from odfproj.storage.dataset import Dataset
from odfproj.storage.verify import verify_dataset
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SOURCE = model.SetPollingSource(
    fetch=model.FetchStepFilesGlob(path="data/s-*.csv"),
    read=model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING")),
    merge=model.MergeStrategySnapshot(primary_key=("id",)),
)


def records(dataset: Dataset) -> pa.Table:
    """Every stored record in offset order."""
    files = [
        dataset.layout.data_path(b.event.new_data.physical_hash)
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData) and b.event.new_data is not None
    ]
    return pa.concat_tables([pq.read_table(f) for f in reversed(files)]).sort_by("offset")


def data_blocks(dataset: Dataset) -> list[model.MetadataBlock]:
    return [b for _, b in dataset.iter_blocks() if isinstance(b.event, model.AddData)][::-1]


def test_the_same_snapshots_cut_into_two_record_files_give_the_same_state(spark, project, ws) -> None:
    whole = ws.create("whole", model.DatasetKind.Root, events=[SOURCE], system_time=T0)
    cut = ws.create("cut", model.DatasetKind.Root, events=[SOURCE], system_time=T0)
    snapshots = [
        "id,name\n" + "".join(f"{i},n{i}\n" for i in range(7)),
        "id,name\n" + "".join(f"{i},{'m' if i % 2 else 'n'}{i}\n" for i in range(2, 10)),
    ]
    for minute, text in enumerate(snapshots, start=1):
        (project / "data" / f"s-{minute}.csv").write_text(text)
        at = T0.replace(minute=minute)
        engine = SparkEngine(RecordingHolder(spark))  # type: ignore[arg-type]
        ingest_polling(whole, engine, project_root=project, system_time=at)
        small = SparkEngine(RecordingHolder(spark), rows_per_file=2)  # type: ignore[arg-type]
        result = ingest_polling(cut, small, project_root=project, system_time=at)
        assert result.records_added == records(cut).num_rows - (0 if minute == 1 else 7)
        assert result.blocks_added == 5  # 4 slices and a SetDataSchema, then 5 slices

        assert records(cut).equals(records(whole))
        assert read_changelog(cut).equals(read_changelog(whole))
        assert read_state(cut).sort_by("id").equals(read_state(whole).sort_by("id"))
        assert verify_dataset(cut) == [] and verify_dataset(whole) == []

    # One AddData per snapshot whole; cut, one per two records, each batch in one system time.
    assert len(data_blocks(whole)) == 2
    cut_blocks = data_blocks(cut)
    assert [b.event.new_data.offset_interval.end - b.event.new_data.offset_interval.start + 1 for b in cut_blocks] == [
        2, 2, 2, 1, 2, 2, 2, 2, 1,
    ]  # fmt: skip
    assert {b.system_time for b in cut_blocks[:4]} == {T0.replace(minute=1)}
    assert {b.system_time for b in cut_blocks[4:]} == {T0.replace(minute=2)}
    # Spark wrote every file with the declared schema (cast before writing, nothing rewritten after).
    declared = cut.projection().arrow_schema
    for block in cut_blocks:
        written = pq.read_schema(cut.layout.data_path(block.event.new_data.physical_hash))
        assert written.remove_metadata().equals(declared), (written, declared)
    # Every block of a batch carries the batch's source state, so the glob knows the file was read.
    assert cut_blocks[3].event.new_source_state == data_blocks(whole)[0].event.new_source_state


APPEND = model.SetPollingSource(
    fetch=model.FetchStepFilesGlob(path="data/rows.csv"),
    read=model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING")),
    merge=model.MergeStrategyAppend(),
)


def test_a_scanned_csv_gives_the_same_blocks_however_spark_splits_and_writes_it(spark, project, ws) -> None:
    """An Append of a plain CSV is numbered from its scan (no checkpoint) and cut without a shuffle.

    The same file read as one partition, as many (so that tasks share the cells of seven records,
    whose pieces the driver joins), and through the older writer (a codec only Spark writes: range
    shuffle, one task per file) must give the same offsets and the same logical hashes, block by block.
    """
    (project / "data" / "rows.csv").write_text("id,name\n" + "".join(f"{i},name-{i}\n" for i in range(60)))
    runs = {"one partition": {}, "many partitions": {"spark.sql.files.maxPartitionBytes": "200"}}
    runs["the older writer"] = {**runs["many partitions"], "spark.sql.parquet.compression.codec": "lz4"}
    blocks = {}
    for name, conf in runs.items():
        for key, value in conf.items():
            spark.conf.set(key, value)
        try:
            if name == "many partitions":
                from odfproj.ingest.read import read_files

                scan = read_files(spark, APPEND.read, [project / "data" / "rows.csv"], materialize=False)
                assert scan.rdd.getNumPartitions() > 3
            dataset = ws.create(
                name.replace(" ", "-"), model.DatasetKind.Root, events=[APPEND], system_time=T0
            )
            engine = SparkEngine(RecordingHolder(spark), rows_per_file=7)  # type: ignore[arg-type]
            result = ingest_polling(dataset, engine, project_root=project, system_time=T0.replace(minute=1))
        finally:
            for key in conf:
                spark.conf.unset(key)
        assert result.records_added == 60 and verify_dataset(dataset) == []
        table = records(dataset)
        assert table.column("offset").to_pylist() == list(range(60))
        assert table.column("id").to_pylist() == list(range(60))
        declared = dataset.projection().arrow_schema
        for block in data_blocks(dataset):
            written = pq.read_schema(dataset.layout.data_path(block.event.new_data.physical_hash))
            assert written.remove_metadata().equals(declared), (written, declared)
        blocks[name] = [
            (b.event.new_data.offset_interval, b.event.new_data.logical_hash) for b in data_blocks(dataset)
        ]
    assert len(blocks["one partition"]) == 9  # 8 files of 7 records and one of 4
    assert blocks["many partitions"] == blocks["one partition"] == blocks["the older writer"]
