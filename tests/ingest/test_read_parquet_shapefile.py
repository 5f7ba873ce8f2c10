"""Parquet and ESRI shapefile readers: native schema, then the declared schema cast by name."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.ingest.read import ReadError, read_files
from odfproj.odf import model

pytestmark = pytest.mark.spark


def test_parquet(spark, tmp_path) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(
        pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"], "extra": [0.5, 1.5]}), path
    )
    df = read_files(spark, model.ReadStepParquet(), [path])
    assert df.dtypes == [("id", "bigint"), ("name", "string"), ("extra", "double")]

    cast = read_files(spark, model.ReadStepParquet(schema=("name STRING", "ID INT")), [path])
    assert cast.dtypes == [("name", "string"), ("ID", "int")]
    assert [tuple(r) for r in cast.collect()] == [("a", 1), ("b", 2)]

    with pytest.raises(ReadError, match="has no column 'missing'"):
        read_files(spark, model.ReadStepParquet(schema=("missing INT",)), [path])


def test_parquet_value_that_does_not_fit(spark, tmp_path) -> None:
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"n": pa.array([1, 2**40], pa.int64())}), path)
    with pytest.raises(ReadError, match=r"big\.parquet.*CAST_OVERFLOW") as info:
        read_files(spark, model.ReadStepParquet(schema=("n INT",)), [path])
    assert "\n" not in str(info.value)


def test_parquet_not_parquet(spark, tmp_path) -> None:
    path = tmp_path / "fake.parquet"
    path.write_text("hello")
    with pytest.raises(ReadError, match=r"fake\.parquet"):
        read_files(spark, model.ReadStepParquet(), [path])


def test_shapefile_needs_the_extra(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "shapefile", None)  # makes `import shapefile` fail
    path = tmp_path / "x.zip"
    path.write_bytes(b"")
    with pytest.raises(ReadError, match=r"pyshp.*odfproj\[shapefile\]"):
        read_files(spark, model.ReadStepEsriShapefile(), [path])


def _write_shapefile(shapefile, stem: Path) -> None:
    with shapefile.Writer(str(stem), shapeType=shapefile.POINT) as w:
        w.field("NAME", "C", size=20)
        w.field("POP", "N", size=10, decimal=0)
        w.point(1.5, 2.0)
        w.record("a", 10)
        w.point(3.0, 4.0)
        w.record("b", 20)


def test_shapefile_in_zip(spark, tmp_path) -> None:
    shapefile = pytest.importorskip("shapefile")
    _write_shapefile(shapefile, tmp_path / "places")
    _write_shapefile(shapefile, tmp_path / "other")
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for stem in ("places", "other"):
            for ext in ("shp", "shx", "dbf"):
                z.write(tmp_path / f"{stem}.{ext}", f"dir/{stem}.{ext}")
    with pytest.raises(ReadError, match=r"several \.shp files"):
        read_files(spark, model.ReadStepEsriShapefile(), [archive])

    df = read_files(spark, model.ReadStepEsriShapefile(sub_path="*/places.shp"), [archive])
    assert df.columns == ["NAME", "POP", "geometry"]
    got = [(r.NAME, r.POP, json.loads(r.geometry)) for r in df.orderBy("NAME").collect()]
    assert got == [
        ("a", 10, {"type": "Point", "coordinates": [1.5, 2.0]}),
        ("b", 20, {"type": "Point", "coordinates": [3.0, 4.0]}),
    ]
    declared = read_files(
        spark,
        model.ReadStepEsriShapefile(sub_path="*/places.shp", schema=("name STRING", "pop INT")),
        [archive],
    )
    assert declared.dtypes == [("name", "string"), ("pop", "int")]
    plain = read_files(spark, model.ReadStepEsriShapefile(), [tmp_path / "places.shp"])
    assert plain.count() == 2
