"""Sedona's GIS functions on the shared Spark session: loaded when a query first names one, written as kamu writes.

The jars come from the cache that ``./dev test`` fills (``engine.packages``); these tests fail, saying
how to fetch them, when it is empty. The first test that loads Sedona pays for it once for the run
(bench/README.md, "GIS functions").
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.sql_policy import GIS_FUNCTION_NAMES
from odfproj.engine.types import arrow_schema_from_spark
from odfproj.odf import model

pytestmark = pytest.mark.spark


def _sql(query: str) -> model.TransformSql:
    return model.TransformSql(engine="spark", query=query)


def test_every_allowed_gis_function_is_registered(engine):
    engine.query({}, _sql("SELECT ST_Point(1.0, 2.0) AS g"))  # loads Sedona
    # in Spark's built-in registry: every session made from now on (each query's scope) has them
    registry = engine.session.newSession()._jsparkSession.sessionState().functionRegistry()
    jvm = engine.session._jvm
    some = jvm.scala.Some
    missing = [
        name
        for name in sorted(GIS_FUNCTION_NAMES)
        if not registry.functionExists(
            jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(
                name.lower(), some("builtin"), some("system")
            )
        )
    ]
    assert missing == []
    # a function Sedona has but odfproj leaves out is not registered (it could read a file)
    assert not registry.functionExists(
        jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(
            "st_geomfromgml", some("builtin"), some("system")
        )
    )


def test_geometry_is_stored_as_sedona_serialised_binary(engine):
    """kamu's Spark engine writes Sedona's geometry type, which Parquet stores as its SQL type, binary,
    holding Sedona's serialised geometry: checked by hand for POINT (1.5 2): a header byte 0x12 (point,
    XY), three bytes of SRID 0, the number of coordinates 1 (little-endian int), then x and y."""
    df = engine.query({}, _sql("SELECT ST_Point(1.5, 2.0) AS g, ST_AsText(ST_Point(1.5, 2.0)) AS t"))
    assert arrow_schema_from_spark(df.schema) == pa.schema([("g", pa.binary()), ("t", pa.string())])
    row = df.collect()[0]
    assert bytes(row.g) == bytes([0x12, 0, 0, 0]) + struct.pack("<idd", 1, 1.5, 2.0)
    assert row.t == "POINT (1.5 2)"


def test_geonames_style_point_from_decimal_columns(engine, spark):
    cities = spark.createDataFrame(
        [(6167865, "Toronto", -79.4163, 43.70011)], "id long, name string, lon double, lat double"
    )
    df = engine.query(
        {"cities": cities},
        _sql(
            "SELECT id, ST_AsText(ST_Point(cast(lon as decimal(9,6)), cast(lat as decimal(9,6)))) AS wkt FROM cities"
        ),
    )
    assert df.collect()[0].wkt == "POINT (-79.4163 43.70011)"


def test_transform_reprojects_utm_to_wgs84(engine):
    """EPSG:3157 (NAD83(CSRS) / UTM zone 10N, Vancouver's open data) to WGS 84, as the rapid-transit
    manifests do. Checked by hand: easting 500 000 m is the zone's central meridian, 123 deg W, whatever
    the northing (NAD83(CSRS) and WGS 84 differ by about a metre here, well inside the 1e-4 deg, 7 m, allowed);
    5 458 000 m north lies at about 49.27 deg N (10 001 966 m from equator to pole: 49.27 deg is
    5 458 km along the meridian, to the precision of the check). The way back lands within 5 cm."""
    df = engine.query(
        {},
        _sql(
            "SELECT ST_X(g) AS lon, ST_Y(g) AS lat, ST_AsText(ST_Transform(g, 'epsg:4326', 'epsg:3157')) AS back "
            "FROM (SELECT ST_Transform(ST_Point(500000.0, 5458000.0), 'epsg:3157', 'epsg:4326') AS g)"
        ),
    )
    row = df.collect()[0]
    assert abs(row.lon - (-123.0)) < 1e-4
    assert round(row.lat, 2) == 49.27
    x, y = (float(v) for v in row.back.removeprefix("POINT (").removesuffix(")").split())
    assert abs(x - 500000.0) < 0.05 and abs(y - 5458000.0) < 0.05  # within 5 cm


def test_preprocess_parses_the_geojson_geometry_column(engine, spark):
    """In a GIS preprocess, the ``geometry`` column of a GeoJSON or shapefile read (GeoJSON text) is a
    geometry, as Sedona's readers give it to kamu's Spark engine; other string columns stay strings."""
    read = spark.createDataFrame(
        [("a", '{"type":"Point","coordinates":[500000,5458000]}')], "name string, geometry string"
    )
    df = engine.preprocess(
        read, _sql("SELECT name, ST_X(ST_Transform(geometry, 'epsg:3157', 'epsg:4326')) AS lon FROM input")
    )
    assert abs(df.collect()[0].lon - (-123.0)) < 1e-4


def test_misspelt_and_file_reading_gis_functions_are_refused(engine):
    with pytest.raises(
        InvalidQueryError, match=r"ST_Pointt is not one of the Apache Sedona GIS .*did you mean ST_Point\?"
    ):
        engine.query({}, _sql("SELECT ST_Pointt(1.0, 2.0) AS g"))
    with pytest.raises(InvalidQueryError, match="ST_GeomFromGML is not allowed because it can read files"):
        engine.query({}, _sql("SELECT ST_GeomFromGML('<gml:Point/>') AS g"))


def test_without_the_jars_a_gis_query_fails_in_one_line_and_others_run(engine, tmp_path, monkeypatch):
    from odfproj.engine import gis, packages

    # a cache without Sedona; the S3A jars the shared session may have started with stay in it
    cache = tmp_path / "empty"
    cache.mkdir()
    for jar in packages.session_jars(s3a_connector=engine.holder.settings.s3a_connector):
        (cache / jar.name).symlink_to(jar)
    monkeypatch.setenv(packages.CACHE_ENV, str(cache))
    monkeypatch.setattr(gis, "_LOADED", {})  # as in a JVM where Sedona was never loaded
    with pytest.raises(InvalidQueryError) as raised:
        engine.query({}, _sql("SELECT ST_Point(1.0, 2.0) AS g"))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "the sedona jars (the GIS functions (ST_*) of engine: spark queries) are not in "
    )
    assert message.endswith("run ./dev, or: python -m odfproj.engine.packages fetch sedona")
    assert engine.query({}, _sql("SELECT 1 + 1 AS two")).collect()[0].two == 2
