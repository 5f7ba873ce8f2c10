"""A first snapshot's keys are checked in the files it wrote (sorted by key), not by an aggregation over the batch."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.ingest.merge import MergeError, sorted_keys_repeat
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf import model
from tests.spark_helpers import RecordingHolder


def files(tmp_path: Path, *tables: dict) -> list[Path]:
    paths = []
    for i, columns in enumerate(tables):
        path = tmp_path / f"slice-{i}.parquet"
        pq.write_table(pa.table(columns), path)
        paths.append(path)
    return paths


def test_neighbours_with_one_key_are_found_within_and_across_files(tmp_path) -> None:
    assert sorted_keys_repeat(files(tmp_path, {"id": [1, 2]}, {"id": [3, 4]}), ["id"]) is False
    assert sorted_keys_repeat(files(tmp_path, {"id": [1, 2]}, {"id": [2, 4]}), ["id"]) is True
    assert sorted_keys_repeat(files(tmp_path, {"id": [1, 2, 2]}), ["id"]) is True
    assert sorted_keys_repeat(files(tmp_path, {"id": [None, None, 1]}), ["id"]) is True  # null is a key value
    assert sorted_keys_repeat(files(tmp_path, {"id": [None, 1]}, {"id": [2]}), ["id"]) is False
    two = files(tmp_path, {"a": ["x", "x", "y"], "b": [1, 2, 1]}, {"a": ["y"], "b": [2]})
    assert sorted_keys_repeat(two, ["a", "b"]) is False
    assert sorted_keys_repeat(two, ["a"]) is True
    # Spark takes every NaN as one key value, pyarrow not: the caller asks Spark.
    assert sorted_keys_repeat(files(tmp_path, {"id": [1.0, float("nan")]}), ["id"]) is None


@pytest.mark.spark
def test_a_first_snapshot_with_a_repeated_key_commits_nothing_and_names_the_key(spark, project, ws) -> None:
    (project / "data" / "s.csv").write_text("id,name\n1,a\n2,b\n3,c\n3,d\n4,e\n")
    source = model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path="data/s.csv"),
        read=model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING")),
        merge=model.MergeStrategySnapshot(primary_key=("id",)),
    )
    dataset = ws.create("snap", model.DatasetKind.Root, events=[source])
    head = dataset.projection().head
    engine = SparkEngine(RecordingHolder(spark), rows_per_file=3)  # type: ignore[arg-type]
    with pytest.raises(MergeError, match=r"^dataset 'snap'.*s\.csv.*primary key id=3 \(2 rows\)"):
        ingest_polling(dataset, engine, project_root=project, system_time=datetime(2026, 1, 1, tzinfo=UTC))
    assert dataset.projection().head == head
