"""A derivative's ``engine: spark`` query calls Sedona's ``ST_`` functions on an input's stored geometry column
(issue 34, point 5), on a real chain: the corpus's Vancouver rapid-transit stations (a shapefile root whose
GIS preprocess reprojects to WGS 84) and derivatives over it.

Which columns are geometry is recorded, not guessed: the root's schema marks its ``geometry`` column
(``odf.data_schema.GEOMETRY_ATTRIBUTE``), plan's query check reads the mark from the chain, and a GIS query
sees the marked column as Sedona's geometry; a query without GIS functions sees the stored bytes, and
Sedona is not loaded for it.
"""

from __future__ import annotations

import math
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.odf import model
from odfproj.odf.data_schema import GEOMETRY_ATTRIBUTE, geometry_field, is_geometry_field
from odfproj.odf.odf_schema import data_schema_from_arrow, data_schema_to_arrow
from odfproj.project.config import load_project
from odfproj.storage.workspace import Workspace
from tests import manifests
from tests.cli_inprocess import cli_in

CORPUS = Path(__file__).parents[1] / "corpus"
STATIONS = "ca.vancouver.opendata.rapid-transit.stations"


def test_the_geometry_mark_survives_both_forms_of_set_data_schema() -> None:
    schema = pa.schema([pa.field("id", pa.int64()), geometry_field(pa.field("geometry", pa.binary()))])
    odf = data_schema_from_arrow(schema)
    assert odf.fields[0].extra is None
    assert odf.fields[1].extra is not None and GEOMETRY_ATTRIBUTE in odf.fields[1].extra.entries
    back = data_schema_to_arrow(odf)
    assert [is_geometry_field(f) for f in back] == [False, True]
    plain = pa.schema([pa.field("geometry", pa.binary())])
    assert data_schema_from_arrow(plain).fields[0].extra is None
    assert not is_geometry_field(data_schema_to_arrow(data_schema_from_arrow(plain)).field(0))


def _derivative(name: str, source: str, query: str) -> str:
    transform = {
        "kind": "SetTransform",
        "inputs": [{"datasetRef": source, "alias": "input"}],
        "transform": {"kind": "Sql", "engine": "spark", "query": query},
    }
    return manifests.snapshot(name, "Derivative", [transform])


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gis-inputs") / "p"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: gis\nmanifests: [datasets/*.yaml]\n")
    manifest = CORPUS / "manifests" / "contrib-head-gis" / f"{STATIONS}.yaml"
    shutil.copy(manifest, root / "datasets" / "stations.yaml")
    shutil.copytree(CORPUS / "data", root / "data")
    return root


def _table(project: Path, name: str) -> pa.Table:
    dataset = Workspace(load_project(project).workspace()).open(name)
    tables = [
        pq.read_table(dataset.layout.data_path(b.event.new_data.physical_hash))
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData | model.ExecuteTransform) and b.event.new_data is not None
    ]
    return pa.concat_tables(tables).sort_by("offset")


def _schema(project: Path, name: str) -> pa.Schema:
    schema = Workspace(load_project(project).workspace()).open(name).projection().arrow_schema
    assert schema is not None
    return schema


def _point(data: bytes) -> tuple[int, float, float]:
    """A point's SRID, x and y from Sedona's serialised form: a header byte (0x12: point, XY; the low bit set
    when an SRID follows), the SRID in the next three bytes (big-endian), the coordinate count (1), then x
    and y as little-endian doubles."""
    assert data[0] | 1 == 0x13 and struct.unpack("<i", data[4:8]) == (1,)
    x, y = struct.unpack("<dd", data[8:24])
    return int.from_bytes(data[1:4], "big"), x, y


@pytest.mark.spark
def test_a_derivative_calls_st_functions_on_its_inputs_stored_geometry(project, spark, monkeypatch) -> None:
    odfproj = cli_in(spark, monkeypatch, lambda: project)
    code, out = odfproj("run")
    assert code == 0, out
    stored = _table(project, STATIONS)
    assert is_geometry_field(_schema(project, STATIONS).field("geometry"))
    (central, waterfront) = (_point(g) for g in stored.column("geometry").to_pylist())
    # Hand-checked (tests/engine/test_gis_spark.py): easting 500 000 m of UTM 10N is 123 deg W, northing
    # 5 458 000 m about 49.27 deg N. Waterfront is 8 200 m west of it (a degree of longitude is 111 320 m
    # times cos 49.28 deg there: 0.1129 deg) and 1 300 m north (a degree of latitude is about 111 200 m:
    # 0.0117 deg), to 50 m (5e-4 deg), what a flat approximation of 8 km allows.
    assert central[0] == waterfront[0] == 4326
    assert abs(central[1] + 123.0) < 1e-4 and round(central[2], 2) == 49.27
    assert abs(waterfront[1] - (-123.0 - 8200 / (111_320 * math.cos(math.radians(49.28))))) < 5e-4
    assert abs(waterfront[2] - central[2] - 1300 / 111_200) < 5e-4

    (project / "datasets" / "coords.yaml").write_text(
        _derivative(
            "stations.coords",
            STATIONS,
            "SELECT event_time, STATION, ST_X(geometry) AS x, ST_Y(geometry) AS y, ST_SRID(geometry) AS srid, "
            "ST_AsText(geometry) AS wkt, ST_Buffer(geometry, 0.5) AS area, geometry FROM input",
        )
    )
    (project / "datasets" / "areas.yaml").write_text(
        _derivative(
            "stations.areas",
            "stations.coords",
            "SELECT event_time, STATION, ST_GeometryType(area) AS kind, ST_Contains(area, geometry) AS inside, "
            "round(ST_Area(area), 3) AS size FROM input",
        )
    )
    (project / "datasets" / "plain.yaml").write_text(
        _derivative("stations.plain", STATIONS, "SELECT event_time, STATION, geometry FROM input")
    )
    code, out = odfproj("plan")  # the query check runs over the inputs' schemas: it knows the geometry
    assert code == 0 and "Plan: 3 to create, 0 to update, 1 unchanged, 0 refused." in out, out

    code, out = odfproj("run", "--select", "stations.coords", "--select", "stations.areas")
    assert code == 0, out
    coords = _table(project, "stations.coords")
    rows = {r["STATION"]: r for r in coords.select(["STATION", "x", "y", "srid", "wkt"]).to_pylist()}
    assert set(rows) == {"Central Meridian", "Waterfront"}
    for station, (srid, x, y) in (("Central Meridian", central), ("Waterfront", waterfront)):
        assert (rows[station]["srid"], rows[station]["x"], rows[station]["y"]) == (srid, x, y)
        assert rows[station]["wkt"] == f"POINT ({x!r} {y!r})".replace(".0 ", " ").replace(".0)", ")")
    # Geometry a transform outputs is stored as kamu stores it, marked again: its reader calls ST_ on it.
    assert coords.column("geometry").to_pylist() == stored.column("geometry").to_pylist()
    schema = _schema(project, "stations.coords")
    assert is_geometry_field(schema.field("area")) and is_geometry_field(schema.field("geometry"))
    assert not is_geometry_field(schema.field("wkt"))
    areas = _table(project, "stations.areas").select(["STATION", "kind", "inside", "size"]).to_pylist()
    # A buffer of radius 0.5 deg is the 32-gon inscribed in that circle (Sedona's 8 segments a quadrant):
    # 32/2 * 0.5^2 * sin(360/32 deg) = 0.7804 square degrees; it contains its own centre.
    assert sorted(r["STATION"] for r in areas) == ["Central Meridian", "Waterfront"]
    assert all(r["kind"] == "ST_Polygon" and r["inside"] is True and r["size"] == 0.780 for r in areas), areas

    # A query without GIS functions gets the stored bytes as they are, and Sedona is not loaded for it.
    from odfproj.engine import spark as engine_spark

    def no_sedona(session):
        raise AssertionError("Sedona loaded for a query without GIS functions")

    monkeypatch.setattr(engine_spark, "ensure_gis", no_sedona)
    code, out = odfproj("run", "--select", "stations.plain")
    assert code == 0, out
    plain = _table(project, "stations.plain")
    assert plain.schema.field("geometry").type == pa.binary()
    assert plain.column("geometry").to_pylist() == stored.column("geometry").to_pylist()
    assert is_geometry_field(
        _schema(project, "stations.plain").field("geometry")
    )  # still geometry downstream
