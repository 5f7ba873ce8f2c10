"""Data files joined and described in Spark tasks: the same descriptions as the driver's, and errors named."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.slice_tasks import CellFile, describe_cells_in_tasks, describes_in_tasks
from odfproj.errors import EngineError
from odfproj.storage.objects import describe_data_file

pytestmark = pytest.mark.spark


def _piece(path: Path, first: int, count: int) -> Path:
    table = pa.table(
        {"offset": pa.array(range(first, first + count), pa.int64()), "v": [f"v{i}" for i in range(count)]}
    )
    pq.write_table(table, path)
    return path


def test_tasks_describe_whole_files_and_join_pieces_as_the_driver_does(spark, tmp_path) -> None:
    whole = _piece(tmp_path / "whole.parquet", 0, 5)
    pieces = (_piece(tmp_path / "a.parquet", 5, 3), _piece(tmp_path / "b.parquet", 8, 2))
    files = [CellFile((whole,), whole, "SNAPPY"), CellFile(pieces, tmp_path / "joined.parquet", "SNAPPY")]

    described = describe_cells_in_tasks(spark, files)

    assert [d.path for d in described] == [whole, tmp_path / "joined.parquet"]
    assert described == [describe_data_file(whole), describe_data_file(tmp_path / "joined.parquet")]
    assert pq.read_table(tmp_path / "joined.parquet").column("offset").to_pylist() == list(range(5, 10))


def test_a_file_that_is_no_parquet_fails_the_job_with_one_line_naming_it(spark, tmp_path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    good = _piece(tmp_path / "good.parquet", 0, 2)
    with pytest.raises(EngineError) as caught:
        describe_cells_in_tasks(spark, [CellFile((good,), good, None), CellFile((bad,), bad, None)])
    message = str(caught.value)
    assert "\n" not in message and "bad.parquet" in message and "InvalidValueError" not in message, message


def test_small_batches_and_single_files_stay_in_the_driver(spark, tmp_path) -> None:
    one = _piece(tmp_path / "one.parquet", 0, 2)
    two = _piece(tmp_path / "two.parquet", 2, 2)
    assert not describes_in_tasks(spark, [CellFile((one,), one, None)])
    assert not describes_in_tasks(
        spark, [CellFile((one,), one, None), CellFile((two,), two, None)]
    )  # a few KB
