"""JSON, NdJson, GeoJSON and NdGeoJSON readers on real Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odfproj.ingest.read import ReadError, read_files
from odfproj.odf import model

pytestmark = pytest.mark.spark


def write(tmp_path: Path, name: str, content: str | bytes | object) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def rows(df) -> list[tuple]:
    return [tuple(r) for r in df.collect()]


def test_json_root_array_with_schema(spark, tmp_path) -> None:
    path = write(tmp_path, "a.json", [{"id": 1, "at": "2024-01-02T03:04:05Z"}, {"id": 2, "at": None}])
    step = model.ReadStepJson(schema=("id BIGINT", "at TIMESTAMP"))
    df = read_files(spark, step, [path])
    assert df.dtypes == [("id", "bigint"), ("at", "timestamp")]
    assert rows(df.selectExpr("id", "CAST(at AS STRING)")) == [(1, "2024-01-02 03:04:05"), (2, None)]


def test_json_sub_path(spark, tmp_path) -> None:
    doc = {"meta": {"n": 2}, "data": {"items": [{"x": 1, "d": "02/01/2024"}, {"x": 2, "d": "03/01/2024"}]}}
    path = write(tmp_path, "doc.json", doc)
    declared = model.ReadStepJson(sub_path="data.items", schema=("x INT", "d DATE"), date_format="dd/MM/yyyy")
    got = rows(read_files(spark, declared, [path]).selectExpr("x", "CAST(d AS STRING)"))
    assert got == [(1, "2024-01-02"), (2, "2024-01-03")]
    inferred = read_files(spark, model.ReadStepJson(sub_path="data.items"), [path])
    assert sorted(inferred.columns) == ["d", "x"] and inferred.count() == 2

    with pytest.raises(ReadError, match=r"subPath 'data\.nope' is not in"):
        read_files(spark, model.ReadStepJson(sub_path="data.nope"), [path])
    with pytest.raises(ReadError, match="not an array of objects"):
        read_files(spark, model.ReadStepJson(sub_path="meta.n"), [path])
    with pytest.raises(ReadError, match=r"doc\.json: subPath data\.nope is missing"):
        read_files(spark, model.ReadStepJson(sub_path="data.nope", schema=("x INT",)), [path])
    with pytest.raises(ReadError, match="root is an object"):
        read_files(spark, model.ReadStepJson(schema=("x INT",)), [path])


def test_json_type_mismatch_and_malformed(spark, tmp_path) -> None:
    path = write(tmp_path, "m.json", [{"x": 1}, {"x": "zz"}])
    with pytest.raises(ReadError, match=r'm\.json: column x is INT, but a record holds \{"x":"zz"\}') as info:
        read_files(spark, model.ReadStepJson(schema=("x INT",)), [path])
    assert "\n" not in str(info.value)
    broken = write(tmp_path, "broken.json", '[{"x": 1}, {"x": ')
    with pytest.raises(ReadError, match=r"broken\.json"):
        read_files(spark, model.ReadStepJson(schema=("x INT",)), [broken])


def test_numbers_sent_as_strings_parse_as_the_reference_reader_does(spark, tmp_path) -> None:
    # The reference's reader (arrow-json) parses "2269" for an integer column; so must ours.
    records = [{"id": "2269", "price": "1.5", "ok": True}, {"id": 7, "price": 2, "ok": None}, {"id": None}]
    schema = ("id BIGINT", "price DECIMAL(10,2)", "ok BOOL")
    nd = write(tmp_path, "a.ndjson", "\n".join(json.dumps(r) for r in records))
    df = read_files(spark, model.ReadStepNdJson(schema=schema), [nd])
    assert df.dtypes == [("id", "bigint"), ("price", "decimal(10,2)"), ("ok", "boolean")]
    assert rows(df.selectExpr("id", "CAST(price AS STRING)", "ok")) == [
        (2269, "1.50", True),
        (7, "2.00", None),
        (None, None, None),
    ]
    nested = write(tmp_path, "b.json", {"data": records})
    df = read_files(spark, model.ReadStepJson(sub_path="data", schema=schema), [nested])
    assert [r[0] for r in rows(df)] == [2269, 7, None]


def test_a_lazy_read_is_a_pure_input_for_a_preprocess_query(spark, tmp_path) -> None:
    # An Append or Ledger merge reads lazily, so the read's own plan is part of the preprocess query's,
    # which must be pure: the reader names a bad file by a literal, never with input_file_name()
    # (kamu-contrib's com.coinpaprika.tickers.eth-usd: NdJson numbers, a preprocess, a Ledger merge).
    from odfproj.engine.spark import check_query_plan

    nd = write(tmp_path, "a.ndjson", '{"t": 1, "p": "2.5"}\n')
    doc = write(tmp_path, "b.json", {"data": [{"t": 1, "p": 2.5}]})
    geo = write(tmp_path, "c.geojson", {"type": "FeatureCollection", "features": []})
    reads = [
        (model.ReadStepNdJson(schema=("t BIGINT", "p DOUBLE")), nd),
        (model.ReadStepJson(sub_path="data", schema=("t BIGINT", "p DOUBLE")), doc),
        (model.ReadStepGeoJson(schema=("name STRING",)), geo),
    ]
    for step, path in reads:
        check_query_plan(read_files(spark, step, [path], materialize=False), "the preprocess query")
    assert rows(read_files(spark, reads[0][0], [nd], materialize=False)) == [(1, 2.5)]
    bad = write(tmp_path, "bad.ndjson", '{"t": "one"}\n')
    with pytest.raises(ReadError, match=r'bad\.ndjson: column t is BIGINT, but a record holds \{"t":"one"\}'):
        read_files(spark, reads[0][0], [bad])


def test_ndjson(spark, tmp_path) -> None:
    path = write(tmp_path, "a.ndjson", '{"id": 1, "name": "a"}\n{"id": 2, "name": "b", "extra": true}\n')
    df = read_files(spark, model.ReadStepNdJson(schema=("id BIGINT", "name STRING")), [path])
    assert rows(df) == [(1, "a"), (2, "b")]
    inferred = read_files(spark, model.ReadStepNdJson(), [path])
    assert sorted(inferred.columns) == ["extra", "id", "name"]

    bad = write(tmp_path, "bad.ndjson", '{"id": 1}\n{"id": 2.5}\n')
    with pytest.raises(ReadError, match=r"bad\.ndjson.*INT"):
        read_files(spark, model.ReadStepNdJson(schema=("id INT",)), [bad])


def test_ndjson_encoding_and_formats(spark, tmp_path) -> None:
    text = '{"t": "2024/01/02 10:00", "s": "é"}\n'
    path = write(tmp_path, "l1.ndjson", text.encode("latin-1"))
    step = model.ReadStepNdJson(
        schema=("t TIMESTAMP", "s STRING"), encoding="latin1", timestamp_format="yyyy/MM/dd HH:mm"
    )
    assert rows(read_files(spark, step, [path]).selectExpr("CAST(t AS STRING)", "s")) == [
        ("2024-01-02 10:00:00", "é")
    ]
    with pytest.raises(ReadError, match="not valid utf-8"):
        read_files(spark, model.ReadStepNdJson(schema=("s STRING",)), [path])


def test_empty_json_files(spark, tmp_path) -> None:
    path = write(tmp_path, "e.ndjson", "")
    df = read_files(spark, model.ReadStepNdJson(schema=("id BIGINT",)), [path])
    assert df.columns == ["id"] and df.count() == 0
    with pytest.raises(ReadError, match="declares no schema"):
        read_files(spark, model.ReadStepNdJson(), [path])


FEATURES = [
    {
        "type": "Feature",
        "properties": {"name": "a", "pop": 10},
        "geometry": {"type": "Point", "coordinates": [1.5, 2.0]},
    },
    {
        "type": "Feature",
        "properties": {"name": "b", "pop": 20},
        "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]},
    },
]


def test_geojson(spark, tmp_path) -> None:
    path = write(tmp_path, "g.geojson", {"type": "FeatureCollection", "features": FEATURES})
    df = read_files(spark, model.ReadStepGeoJson(), [path])
    assert df.columns == ["name", "pop", "geometry"]
    got = {r.name: (r.pop, json.loads(r.geometry)) for r in df.collect()}
    assert got == {"a": (10, FEATURES[0]["geometry"]), "b": (20, FEATURES[1]["geometry"])}

    declared = read_files(spark, model.ReadStepGeoJson(schema=("geometry STRING", "pop INT")), [path])
    assert declared.dtypes == [("geometry", "string"), ("pop", "int")]
    with pytest.raises(ReadError, match="declare it STRING"):
        read_files(spark, model.ReadStepGeoJson(schema=("geometry BINARY",)), [path])

    not_geo = write(tmp_path, "n.geojson", {"type": "Feature"})
    with pytest.raises(ReadError, match="not a GeoJSON FeatureCollection"):
        read_files(spark, model.ReadStepGeoJson(), [not_geo])
    with pytest.raises(ReadError, match=r"n\.geojson: not a GeoJSON FeatureCollection"):
        read_files(spark, model.ReadStepGeoJson(schema=("pop INT",)), [not_geo])


def test_ndgeojson(spark, tmp_path) -> None:
    path = write(tmp_path, "g.ndgeojson", "".join(json.dumps(f) + "\n" for f in FEATURES))
    df = read_files(spark, model.ReadStepNdGeoJson(), [path])
    assert df.columns == ["name", "pop", "geometry"]
    assert [json.loads(r.geometry)["type"] for r in df.orderBy("name").collect()] == ["Point", "Polygon"]
    declared = read_files(spark, model.ReadStepNdGeoJson(schema=("name STRING", "geometry STRING")), [path])
    assert declared.columns == ["name", "geometry"] and declared.count() == 2
