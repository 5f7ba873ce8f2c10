"""The CSV reader on real Spark: every ReadStep::Csv option, schema application and strictness."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from odfproj.ingest.read import ReadError, csv_options, read_files
from odfproj.odf import model

pytestmark = pytest.mark.spark


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def rows(df) -> list[tuple]:
    return [tuple(r) for r in df.collect()]


def test_option_mapping() -> None:
    step = model.ReadStepCsv(
        separator=";",
        encoding="latin1",
        quote="'",
        escape="\\",
        header=True,
        infer_schema=False,
        null_value="NA",
        date_format="dd.MM.yyyy",
        timestamp_format="rfc3339",
    )
    assert csv_options(step) == {
        "mode": "FAILFAST",
        "multiLine": "true",
        "encoding": "iso-8859-1",
        "sep": ";",
        "quote": "'",
        "escape": "\\",
        "nullValue": "NA",
        "header": "true",
        "inferSchema": "false",
        "dateFormat": "dd.MM.yyyy",
    }


def test_schema_separator_header_null_and_formats(spark, tmp_path) -> None:
    path = write(
        tmp_path,
        "data.csv",
        "id;price;day;at;note\n"
        "1;1.50;31.12.2023;2024-01-02 03:04:05;NA\n"
        '2;2.25;01.01.2024;2024-01-03 00:00:00;"multi\nline; quoted"\n',
    )
    step = model.ReadStepCsv(
        schema=("id BIGINT", "price DECIMAL(18,2)", "day DATE", "at TIMESTAMP", "note STRING"),
        separator=";",
        header=True,
        null_value="NA",
        date_format="dd.MM.yyyy",
        timestamp_format="yyyy-MM-dd HH:mm:ss",
    )
    df = read_files(spark, step, [path])
    assert df.columns == ["id", "price", "day", "at", "note"]
    assert dict(df.dtypes) == {
        "id": "bigint",
        "price": "decimal(18,2)",
        "day": "date",
        "at": "timestamp",
        "note": "string",
    }
    got = rows(df.selectExpr("id", "price", "day", "CAST(at AS STRING)", "note").orderBy("id"))
    assert got == [
        (1, Decimal("1.50"), dt.date(2023, 12, 31), "2024-01-02 03:04:05", None),
        (2, Decimal("2.25"), dt.date(2024, 1, 1), "2024-01-03 00:00:00", "multi\nline; quoted"),
    ]


def test_rfc3339_timestamps_by_default(spark, tmp_path) -> None:
    path = write(tmp_path, "t.csv", "2024-01-02T03:04:05Z\n2024-01-02T05:04:05+02:00\n")
    step = model.ReadStepCsv(schema=("at TIMESTAMP",), timestamp_format="rfc3339")
    got = rows(read_files(spark, step, [path]).selectExpr("CAST(at AS STRING)"))
    assert got == [("2024-01-02 03:04:05",), ("2024-01-02 03:04:05",)]


def test_quote_escape_and_quoting_off(spark, tmp_path) -> None:
    path = write(tmp_path, "q.csv", "'a,b',x\n'it\\'s',y\n")
    step = model.ReadStepCsv(quote="'", escape="\\")
    assert rows(read_files(spark, step, [path])) == [("a,b", "x"), ("it's", "y")]

    path = write(tmp_path, "noquote.csv", '"a,b"\n')
    assert rows(read_files(spark, model.ReadStepCsv(quote=""), [path])) == [('"a', 'b"')]


def test_header_off_names_columns_by_position(spark, tmp_path) -> None:
    path = write(tmp_path, "h.csv", "1\tx\n2\ty\n")
    df = read_files(spark, model.ReadStepCsv(separator="\t", header=False), [path])
    assert df.columns == ["_c0", "_c1"]
    declared = read_files(spark, model.ReadStepCsv(separator="\t", schema=("n INT", "s STRING")), [path])
    assert rows(declared) == [(1, "x"), (2, "y")]


def test_infer_schema(spark, tmp_path) -> None:
    path = write(tmp_path, "i.csv", "n,x\n1,2.5\n2,3.5\n")
    inferred = read_files(spark, model.ReadStepCsv(header=True, infer_schema=True), [path])
    assert dict(inferred.dtypes) == {"n": "int", "x": "double"}
    plain = read_files(spark, model.ReadStepCsv(header=True), [path])
    assert dict(plain.dtypes) == {"n": "string", "x": "string"}


def test_encodings(spark, tmp_path) -> None:
    latin = write(tmp_path, "latin.csv", "name\ncafé\n".encode("latin-1"))
    df = read_files(spark, model.ReadStepCsv(header=True, encoding="ISO-8859-1"), [latin])
    assert rows(df) == [("café",)]
    utf16 = write(tmp_path, "u16.csv", "name\nnaïve\n".encode("utf-16-le"))
    df = read_files(spark, model.ReadStepCsv(header=True, encoding="utf-16le"), [utf16])
    assert rows(df) == [("naïve",)]

    with pytest.raises(ReadError, match=r"latin\.csv is not valid utf-8 \(byte offset 8\)"):
        read_files(spark, model.ReadStepCsv(header=True, encoding="utf8"), [latin])
    with pytest.raises(ReadError, match="not valid utf-8"):
        read_files(spark, model.ReadStepCsv(header=True), [latin])
    with pytest.raises(ReadError, match="not supported by the Spark reader"):
        read_files(spark, model.ReadStepCsv(encoding="cp1252"), [latin])
    with pytest.raises(ReadError, match="unknown encoding"):
        read_files(spark, model.ReadStepCsv(encoding="klingon"), [latin])


def test_type_mismatch_names_the_file(spark, tmp_path) -> None:
    path = write(tmp_path, "bad.csv", "id\n1\nx\n")
    with pytest.raises(ReadError) as info:
        read_files(spark, model.ReadStepCsv(header=True, schema=("id INT",)), [path])
    message = str(info.value)
    assert f"{path} line 3: 'x'" in message and "(id INT)" in message
    assert "\n" not in message and "at org.apache" not in message


def test_malformed_row(spark, tmp_path) -> None:
    path = write(tmp_path, "short.csv", "a,b\n1,2\n3\n")
    with pytest.raises(ReadError, match=r"short\.csv line 3: '3'") as info:
        read_files(spark, model.ReadStepCsv(header=True, schema=("a INT", "b INT")), [path])
    assert "\n" not in str(info.value)


def test_malformed_rows_are_named_by_file_and_line_a_few_at_most(spark, tmp_path) -> None:
    rows = [
        "at,id",
        "2024-01-01T00:00:00Z,1",
        "yesterday,2",
        "2024-01-03T00:00:00Z,x",
        "2024-01-04T00:00:00Z,4",
    ]
    rows += [f"bad-{i},{i}" for i in range(5, 40)]
    path = write(tmp_path, "many.csv", "\n".join(rows) + "\n")
    step = model.ReadStepCsv(header=True, schema=("at TIMESTAMP", "id BIGINT"))
    with pytest.raises(ReadError) as info:
        read_files(spark, step, [path])
    message = str(info.value)
    assert (
        "many.csv line 3: 'yesterday,2'; " in message
        and "many.csv line 4: '2024-01-03T00:00:00Z,x'" in message
    )
    assert "line 6: 'bad-5,5'" in message and "line 7" not in message  # the first three only
    assert "at TIMESTAMP, id BIGINT" in message and "\n" not in message
    assert "1704" not in message  # no timestamps as raw microseconds


def test_empty_file(spark, tmp_path) -> None:
    path = write(tmp_path, "empty.csv", "")
    df = read_files(spark, model.ReadStepCsv(header=True, schema=("a INT", "b STRING")), [path])
    assert df.columns == ["a", "b"] and df.count() == 0
    with pytest.raises(ReadError, match="declares no schema"):
        read_files(spark, model.ReadStepCsv(header=True), [path])


def test_several_files_and_missing_file(spark, tmp_path) -> None:
    one = write(tmp_path, "1.csv", "1\n")
    two = write(tmp_path, "2.csv", "2\n")
    df = read_files(spark, model.ReadStepCsv(schema=("n INT",)), [one, two])
    assert sorted(r.n for r in df.collect()) == [1, 2]
    with pytest.raises(ReadError, match="does not exist"):
        read_files(spark, model.ReadStepCsv(), [tmp_path / "nope.csv"])


def test_invalid_schema(spark, tmp_path) -> None:
    path = write(tmp_path, "x.csv", "1\n")
    with pytest.raises(ReadError, match=r"schema is invalid.*unknown type"):
        read_files(spark, model.ReadStepCsv(schema=("n INTEGR",)), [path])


def test_files_without_quoted_line_breaks_are_split_over_tasks(spark, tmp_path) -> None:
    """``multiLine`` makes a file one split; a file whose quoted values hold no line break is cut up."""
    lines = "".join(f'{i},"name, {i}"\n' for i in range(2000))
    step = model.ReadStepCsv(header=True, schema=["id BIGINT", "name STRING"])
    conf = "spark.sql.files.maxPartitionBytes"
    old = spark.conf.get(conf)
    spark.conf.set(conf, "4096")
    try:
        plain = write(tmp_path, "plain.csv", "id,name\n" + lines)
        df = read_files(spark, step, [plain], materialize=False)
        assert df.rdd.getNumPartitions() > 1
        assert sorted(rows(df)) == [(i, f"name, {i}") for i in range(2000)]
        # One quoted line break at the end: the file is read whole, and the value keeps its line break.
        quoted = write(tmp_path, "quoted.csv", "id,name\n" + lines + '2000,"two\nlines"\n')
        df = read_files(spark, step, [quoted], materialize=False)
        assert df.rdd.getNumPartitions() == 1
        assert sorted(rows(df))[-1] == (2000, "two\nlines") and df.count() == 2001
    finally:
        spark.conf.set(conf, old)
