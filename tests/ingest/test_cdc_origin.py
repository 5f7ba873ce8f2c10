"""A CDC merge's refusal names each refused record by its file and line (issue 34, point 4), also in a push
of several files, where a record's position in the batch is a line of no file.

The lines are found on the error path only (``ingest/record_lines.py``, no Spark): first those rules on
files written by hand, then pushes through Spark's readers, whose order of records the merge counts in.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.ingest.errors import IngestError
from odfproj.ingest.push import ingest_push
from odfproj.ingest.record_lines import record_line
from odfproj.odf import model
from tests.spark_helpers import RecordingHolder

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = ("op STRING", "id BIGINT", "name STRING")


# --- the lines, without Spark ----------------------------------------------------------------------------


def test_a_csv_record_starts_on_its_line_past_the_header_blank_lines_and_quoted_line_breaks(tmp_path) -> None:
    f = tmp_path / "a.csv"
    f.write_text('op,id,name\n+A,1,a\n\n+A,2,"two\nlines"\n   \n+A,3,c\r\n+A,4,d')
    step = model.ReadStepCsv(header=True, schema=SCHEMA)
    assert [record_line(step, str(f), n) for n in range(1, 6)] == [2, 4, 7, 8, None]
    headerless = model.ReadStepCsv(schema=SCHEMA)
    assert [record_line(headerless, str(f), n) for n in (1, 2)] == [1, 2]


def test_a_json_lines_record_is_its_non_blank_line(tmp_path) -> None:
    f = tmp_path / "a.ndjson"
    f.write_text('{"id": 1}\n\n{"id": 2}\n  \n{"id": 3}\n')
    step = model.ReadStepNdJson(schema=SCHEMA)
    assert [record_line(step, str(f), n) for n in (1, 2, 3, 4)] == [1, 3, 5, None]


def test_a_json_record_starts_on_the_line_of_its_element_of_the_array(tmp_path) -> None:
    f = tmp_path / "a.json"
    records = [{"op": "+A", "id": 1, "name": "a, [b]"}, {"op": "+A", "id": 2, "name": "c\\n{"}]
    f.write_text(
        '{"meta": {"records": [0]},\n "data": {"records": [\n'
        + ",\n\n".join(map(json.dumps, records))
        + "]}}"
    )
    step = model.ReadStepJson(sub_path="data.records", schema=SCHEMA)
    assert [record_line(step, str(f), n) for n in (1, 2, 3)] == [3, 5, None]
    root = tmp_path / "b.json"
    root.write_text("[\n  " + json.dumps(records[0]) + ", " + json.dumps(records[1]) + "\n]")
    assert [record_line(model.ReadStepJson(schema=SCHEMA), str(root), n) for n in (1, 2)] == [2, 2]
    geo = tmp_path / "c.geojson"
    geo.write_text(
        '{"type": "FeatureCollection",\n"features": [\n{"type": "Feature"},\n{"type": "Feature"}]}'
    )
    assert [record_line(model.ReadStepGeoJson(), str(geo), n) for n in (1, 2)] == [3, 4]


def test_formats_without_lines_and_unreadable_files_have_no_line(tmp_path) -> None:
    f = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": [1]}), f)
    assert record_line(model.ReadStepParquet(), str(f), 1) is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "an array"}')
    assert record_line(model.ReadStepJson(schema=SCHEMA), str(bad), 1) is None


# --- pushes through Spark's readers -----------------------------------------------------------------------


def _pushed(ws, name: str, read: model.ReadStep, merge: model.MergeStrategy, preprocess=None):
    source = model.AddPushSource(source_name="cdc", read=read, merge=merge, preprocess=preprocess)
    return ws.create(name, model.DatasetKind.Root, events=[source], system_time=T0)


def _refusal(spark, dataset, files) -> str:
    engine = SparkEngine(RecordingHolder(spark))  # type: ignore[arg-type]
    with pytest.raises(IngestError) as refused:
        ingest_push(dataset, engine, files, system_time=T0.replace(minute=1))
    message = str(refused.value)
    assert "\n" not in message
    return message


@pytest.mark.spark
def test_a_push_of_several_csv_files_names_each_refused_record_by_its_file_and_line(
    spark, tmp_path, ws
) -> None:
    ds = _pushed(
        ws,
        "log",
        model.ReadStepCsv(header=True, schema=SCHEMA),
        model.MergeStrategyChangelogStream(primary_key=("id",)),
    )
    first, second = tmp_path / "1.csv", tmp_path / "2.csv"
    first.write_text("op,id,name\n+A,1,a\n+A,2,b\n+A,3,c\n+A,4,d\n")
    second.write_text('op,id,name\n+A,5,e\n\n+A,6,"six\nlines"\n-R,9,gone\n+C,1,x\n')
    message = _refusal(spark, ds, [first, second])
    assert f"{second} line 6 (id=9): -R of a key with no current row" in message
    assert f"{second} line 7 (id=1): +C without the -C before it" in message
    assert "record " not in message
    assert ds.projection().last_offset is None  # nothing committed

    # The same records in the other order: the refused ones are in the first file now.
    message = _refusal(spark, ds, [second, first])
    assert f"{second} line 6 (id=9)" in message and f"{second} line 7 (id=1)" in message


@pytest.mark.spark
def test_a_push_of_several_json_lines_files_to_an_upsert_stream_names_the_bad_op_by_file_and_line(
    spark, tmp_path, ws
) -> None:
    ds = _pushed(
        ws, "ups", model.ReadStepNdJson(schema=SCHEMA), model.MergeStrategyUpsertStream(primary_key=("id",))
    )
    files = [tmp_path / f"{i}.ndjson" for i in range(3)]
    for i, f in enumerate(files):
        lines = [json.dumps({"op": "+A", "id": 10 * i + k, "name": "x"}) for k in range(4)]
        if i == 1:
            lines.insert(2, "")
            lines[3] = json.dumps({"op": "-C", "id": 13, "name": "x"})
        f.write_text("\n".join(lines) + "\n")
    message = _refusal(spark, ds, files)
    assert f"{files[1]} line 4 (id=13): unknown op -C (an upsert stream has" in message


@pytest.mark.spark
def test_one_file_names_its_line_and_a_preprocessed_batch_its_records_position(spark, tmp_path, ws) -> None:
    merge = model.MergeStrategyChangelogStream(primary_key=("id",))
    f = tmp_path / "one.csv"
    f.write_text("op,id,name\n\n+A,1,a\n-R,1,not-a\n")
    ds = _pushed(ws, "one", model.ReadStepCsv(header=True, schema=SCHEMA), merge)
    assert f"{f} line 4 (id=1): -R carries values other than" in _refusal(spark, ds, [f])
    # A preprocess query makes the records: they are no file's lines, so they are named by position.
    query = model.TransformSql(engine="spark", query="SELECT op, id, name FROM input WHERE id > 0")
    preprocessed = _pushed(ws, "pre", model.ReadStepCsv(header=True, schema=SCHEMA), merge, query)
    assert "record 2 (id=1): -R carries values other than" in _refusal(spark, preprocessed, [f])
