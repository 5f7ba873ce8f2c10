"""Writes the corpus's stand-in archives (ZIP, shapefile) that are not text one can write by hand.

Run from the repository root: `.venv/bin/python tests/corpus/make_data.py`. The output is byte-for-byte
the same on every run (fixed ZIP timestamps, pyshp's deterministic writer), so the committed files are what
this script writes. Each archive has the layout of the real download its manifest names (file names inside
the ZIP, attribute names and types, projection), with a handful of made-up features; see SOURCES.md.
The text stand-ins (CSV, JSON, NDJSON, GeoJSON) in data/ are written by hand.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import shapefile  # pyshp

DATA = Path(__file__).parent / "data"
_WHEN = (2024, 3, 1, 0, 0, 0)

WGS84 = (
    'GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],'
    'PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]'
)
UTM10N_CSRS = (  # EPSG:3157, the City of Vancouver's shapefiles
    'PROJCS["NAD83(CSRS) / UTM zone 10N",GEOGCS["NAD83(CSRS)",DATUM["NAD83_Canadian_Spatial_Reference_System",'
    'SPHEROID["GRS 1980",6378137,298.257222101]],PRIMEM["Greenwich",0],UNIT["Degree",0.0174532925199433]],'
    'PROJECTION["Transverse_Mercator"],PARAMETER["latitude_of_origin",0],PARAMETER["central_meridian",-123],'
    'PARAMETER["scale_factor",0.9996],PARAMETER["false_easting",500000],PARAMETER["false_northing",0],'
    'UNIT["metre",1]]'
)
STATCAN_LAMBERT = (  # EPSG:3347, Statistics Canada's boundary files
    'PROJCS["PCS_Lambert_Conformal_Conic",GEOGCS["GCS_North_American_1983",DATUM["D_North_American_1983",'
    'SPHEROID["GRS_1980",6378137.0,298.257222101]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],'
    'PROJECTION["Lambert_Conformal_Conic"],PARAMETER["False_Easting",6200000.0],'
    'PARAMETER["False_Northing",3000000.0],PARAMETER["Central_Meridian",-91.86666666666666],'
    'PARAMETER["Standard_Parallel_1",49.0],PARAMETER["Standard_Parallel_2",77.0],'
    'PARAMETER["Latitude_Of_Origin",63.390675],UNIT["Meter",1.0]]'
)


def _box(x0: float, y0: float, x1: float, y1: float) -> list[list[list[float]]]:
    """A rectangle as one clockwise outer ring (the shapefile's winding for an outer ring)."""
    return [[[x0, y0], [x0, y1], [x1, y1], [x1, y0], [x0, y0]]]


def _shapefile(
    stem: str, shape_type: int, fields: list[tuple[Any, ...]], rows: list[tuple[Any, list[Any]]], prj: str
) -> dict[str, bytes]:
    """The .shp, .shx, .dbf and .prj of one layer: `rows` are (geometry, attribute values)."""
    shp, shx, dbf = io.BytesIO(), io.BytesIO(), io.BytesIO()
    with shapefile.Writer(shp=shp, shx=shx, dbf=dbf, shapeType=shape_type) as w:
        for field in fields:
            w.field(*field)
        for geometry, values in rows:
            if shape_type == shapefile.POLYGON:
                w.poly(geometry)
            elif shape_type == shapefile.POINT:
                w.point(*geometry)
            w.record(*values)
    return {
        f"{stem}.shp": shp.getvalue(),
        f"{stem}.shx": shx.getvalue(),
        f"{stem}.dbf": dbf.getvalue(),
        f"{stem}.prj": prj.encode(),
    }


def _zip(name: str, members: dict[str, bytes]) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            info = zipfile.ZipInfo(member, date_time=_WHEN)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, content)
    (DATA / name).write_bytes(out.getvalue())


def geonames() -> None:
    """GeoNames dumps: tab-separated, no header (download.geonames.org/export/dump/readme.txt)."""
    altnames = (
        "1596\t3040051\ten\tEscaldes-Engordany\t1\t\t\t\t\t\n"
        "1597\t3040051\tca\tles Escaldes\t\t1\t\t\t\t\n"
        "2921044\t3040051\twkdt\tQ24282\t\t\t\t\t\t\n"
    )
    languages = (
        "ISO 639-3\tISO 639-2\tISO 639-1\tLanguage Name\ncat\tcat\tca\tCatalan\neng\teng\ten\tEnglish\n"
    )
    _zip(
        "geonames-altnames.zip",
        {"alternateNamesV2.txt": altnames.encode(), "iso-languagecodes.txt": languages.encode()},
    )
    features = (
        "3039154\tEl Tarter\tEl Tarter\tEl Tarter,Ehl Tarter\t42.57952\t1.65362\tP\tPPL\tAD\t\t02\t\t\t\t1052"
        "\t\t1721\tEurope/Andorra\t2012-11-03\n"
        "3039163\tSant Julià de Lòria\tSant Julia de Loria\tSant Julia de Loria\t42.46372\t1.49129\tP\tPPLA"
        "\tAD\t\t06\t\t\t\t8022\t\t921\tEurope/Andorra\t2013-11-23\n"
    )
    _zip("geonames-features.zip", {"allCountries.txt": features.encode()})


def vancouver_zoning() -> None:
    """zoning_districts_shp.zip: polygons in EPSG:3157 with ZONE_NAME and CATEGORY."""
    fields = [("ZONE_NAME", "C", 50), ("CATEGORY", "C", 50)]
    rows = [
        (_box(491000, 5458000, 491200, 5458150), ["RS-1", "One-Family Dwelling"]),
        (_box(492000, 5457500, 492100, 5457600), ["C-2", "Commercial"]),
    ]
    _zip(
        "vancouver-zoning-districts.zip",
        _shapefile("zoning_districts", shapefile.POLYGON, fields, rows, UTM10N_CSRS),
    )


def natural_earth() -> None:
    """Natural Earth admin 0 (countries, upper-case attributes) and admin 1 (lower-case attributes), WGS 84."""
    fields = [
        ("ADMIN", "C", 36),
        ("NAME", "C", 36),
        ("ISO_A2", "C", 5),
        ("ISO_A3", "C", 3),
        ("POP_EST", "N", 12, 0),
    ]
    rows = [
        (_box(1.41, 42.43, 1.78, 42.65), ["Andorra", "Andorra", "AD", "AND", 77142]),
        (_box(5.73, 49.44, 6.53, 50.18), ["Luxembourg", "Luxembourg", "LU", "LUX", 619896]),
    ]
    _zip(
        "naturalearth-admin0-countries.zip",
        _shapefile("ne_110m_admin_0_countries", shapefile.POLYGON, fields, rows, WGS84),
    )
    fields = [("iso_3166_2", "C", 8), ("name", "C", 40), ("admin", "C", 40), ("type_en", "C", 20)]
    rows = [
        (_box(-139.06, 48.3, -114.05, 60.0), ["CA-BC", "British Columbia", "Canada", "Province"]),
        (_box(-120.0, 49.0, -110.0, 60.0), ["CA-AB", "Alberta", "Canada", "Province"]),
    ]
    _zip(
        "naturalearth-admin1-states-provinces.zip",
        _shapefile("ne_50m_admin_1_states_provinces", shapefile.POLYGON, fields, rows, WGS84),
    )


def statcan() -> None:
    """lpr_000b16a_e.zip: the 2016 census provinces in Statistics Canada Lambert (EPSG:3347)."""
    fields = [
        ("PRUID", "C", 2),
        ("PRNAME", "C", 100),
        ("PRENAME", "C", 30),
        ("PRFNAME", "C", 30),
        ("PREABBR", "C", 10),
        ("PRFABBR", "C", 10),
    ]
    rows = [
        (
            _box(3700000, 1900000, 4000000, 2200000),
            [
                "59",
                "British Columbia / Colombie-Britannique",
                "British Columbia",
                "Colombie-Britannique",
                "B.C.",
                "C.-B.",
            ],
        ),
        (_box(4000000, 1900000, 4300000, 2300000), ["48", "Alberta", "Alberta", "Alberta", "Alta.", "Alb."]),
    ]
    _zip(
        "statcan-provinces.zip", _shapefile("lpr_000b16a_e", shapefile.POLYGON, fields, rows, STATCAN_LAMBERT)
    )


def nyc_modzcta() -> None:
    """The Socrata shapefile export of MODZCTA: geo_export_<id>.* in WGS 84."""
    fields = [("label", "C", 254), ("modzcta", "C", 254), ("pop_est", "N", 33, 31), ("zcta", "C", 254)]
    rows = [
        (_box(-74.008, 40.739, -73.984, 40.759), ["10001, 10118", "10001", 23072.0, "10001, 10118"]),
        (_box(-73.998, 40.705, -73.974, 40.722), ["10002", "10002", 74993.0, "10002"]),
    ]
    stem = "geo_export_6a4b0b58-2c5e-4a46-9c8b-8e0b1f3c2d11"
    _zip("nyc-modzcta.zip", _shapefile(stem, shapefile.POLYGON, fields, rows, WGS84))


def nga_asam() -> None:
    """ASAM_shp.zip: anti-shipping activity messages as points, in a folder, with other layers beside."""
    fields = [
        ("reference", "C", 20),
        ("dateofocc", "D"),
        ("subreg", "C", 10),
        ("hostility_", "C", 100),
        ("victim_d", "C", 100),
        ("descriptio", "C", 254),
        ("hostilityt", "N", 10, 0),
        ("hostilit_D", "C", 100),
        ("victim_l", "N", 10, 0),
        ("victim_l_D", "C", 100),
        ("navarea", "C", 10),
    ]
    rows = [
        (
            (103.8, 1.25),
            [
                "2023-101",
                "20230412",
                "71",
                "Robbers",
                "Bulk carrier",
                "Four robbers boarded an anchored bulk carrier.",
                1,
                "Pirate Assault",
                1,
                "Anchored Ship",
                "XI",
            ],
        ),
        (
            (3.35, 6.2),
            [
                "2023-102",
                "20230419",
                "57",
                "Pirates",
                "Tanker",
                "Pirates fired upon a tanker underway.",
                1,
                "Pirate Assault",
                2,
                "Underway Ship",
                "II",
            ],
        ),
    ]
    members = _shapefile("asam_data_download/ASAM_events", shapefile.POINT, fields, rows, WGS84)
    members["asam_data_download/ASAM_Readme.txt"] = b"Anti-Shipping Activity Messages (stand-in).\n"
    _zip("nga-asam.zip", members)


if __name__ == "__main__":
    geonames()
    vancouver_zoning()
    natural_earth()
    statcan()
    nyc_modzcta()
    nga_asam()
