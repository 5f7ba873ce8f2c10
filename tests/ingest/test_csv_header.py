"""A CSV file that is only a wrong first line is refused, not recorded as ingested with no data."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from odfproj.ingest.csv_header import HeaderOnlyError, check_header_only_files
from odfproj.odf import model

DECLARED = pa.schema([("id", pa.int64()), ("name", pa.string()), ("value", pa.float64())])
WITH_HEADER = model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING", "value DOUBLE"))


def _check(tmp_path: Path, content: bytes, step: model.ReadStepCsv = WITH_HEADER) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(content)
    check_header_only_files(step, [str(path)], DECLARED, "utf-8")


@pytest.mark.parametrize("content", [b"\x01garbage-no-newline", b"garbage\n", b"\n\ngarbage\r\n\n", b"a;b;c"])
def test_a_lone_first_line_of_the_wrong_width_is_refused(tmp_path: Path, content: bytes) -> None:
    with pytest.raises(
        HeaderOnlyError, match=r"in\.csv: the file holds nothing but a first line of 1 field"
    ) as e:
        _check(tmp_path, content)
    assert "declares 3 column(s)" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "content",
    [
        b"id,name,value",  # a real header without a newline: an export with no rows
        b"id,name,value\n",
        b"",  # empty: no records, nothing to doubt
        b"garbage\n1,a,2.0\n",  # has records: Spark's strict reader judges them
    ],
)
def test_files_that_are_left_to_the_reader(tmp_path: Path, content: bytes) -> None:
    _check(tmp_path, content)


def test_only_with_header_true_and_a_declared_schema(tmp_path: Path) -> None:
    _check(tmp_path, b"garbage", model.ReadStepCsv(header=False, schema=WITH_HEADER.schema))
    path = tmp_path / "in.csv"
    path.write_bytes(b"garbage")
    check_header_only_files(WITH_HEADER, [str(path)], None, "utf-8")


def test_the_separator_and_quotes_of_the_step_count_fields(tmp_path: Path) -> None:
    step = model.ReadStepCsv(header=True, separator=";", schema=WITH_HEADER.schema)
    _check(tmp_path, b'id;"name;with;separators";value', step)
    with pytest.raises(HeaderOnlyError, match=r"first line of 1 field"):
        _check(tmp_path, b"id,name,value", step)


@pytest.mark.spark
def test_the_csv_reader_refuses_it_before_spark_reads(spark, tmp_path: Path) -> None:
    from odfproj.ingest.read import read_files

    path = tmp_path / "garbage.csv"
    path.write_bytes(b"\x01garbage-no-newline")
    with pytest.raises(HeaderOnlyError, match=r"garbage\.csv: the file holds nothing but a first line"):
        read_files(spark, WITH_HEADER, [path])
