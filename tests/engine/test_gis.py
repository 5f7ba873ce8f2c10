"""GIS without a JVM: the pinned JVM packages and their cache, the allowlist, and the plan's check of ST_ names.

The functions themselves run in tests/engine/test_gis_spark.py (shared session) and in the corpus.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pyspark
import pytest

from odfproj.engine import gis, packages
from odfproj.engine.packages import Artifact, PackageUnavailableError, SparkBuild
from odfproj.engine.sql_policy import ALLOWED_FUNCTIONS, GIS_FUNCTION_NAMES, GIS_FUNCTIONS
from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import WORKSPACE_ENV, load_project
from tests.conftest import FIXTURES_DIR

SEDONA_151 = set((FIXTURES_DIR / "sedona-1.5.1" / "functions.txt").read_text().split())
SCHOOLS = (
    Path(__file__).parents[1]
    / "corpus"
    / "manifests"
    / "contrib-head-gis"
    / "ca.vancouver.opendata.schools.yaml"
)


# --- the packages ----------------------------------------------------------------------------------------


def test_the_installed_build_is_read_from_pyspark_jars():
    build = packages.installed_build()
    assert build.spark == pyspark.__version__
    jars = {p.name for p in packages.pyspark_jars().glob("*.jar")}
    assert f"spark-core_{build.scala}-{build.spark}.jar" in jars
    assert f"hadoop-client-api-{build.hadoop}.jar" in jars


def test_each_package_is_pinned_to_the_build(tmp_path):
    build = SparkBuild(spark="4.3.0", scala="2.13", hadoop="3.5.0")
    assert [a.coordinate for a in packages.sedona(build).artifacts] == [
        "org.apache.sedona:sedona-spark-shaded-4.0_2.13:1.8.0",
        "org.datasyslab:geotools-wrapper:1.8.0-33.1",
    ]
    assert [a.coordinate for a in packages.s3a(build).artifacts] == [
        "org.apache.hadoop:hadoop-aws:3.5.0",
        "software.amazon.awssdk:bundle:2.35.4",
        "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1",
    ]
    with pytest.raises(PackageUnavailableError, match=re.escape("no build odfproj knows for Spark 3.5.1")):
        packages.sedona(SparkBuild(spark="3.5.1", scala="2.12", hadoop="3.3.4"))
    with pytest.raises(PackageUnavailableError, match=re.escape("Hadoop 3.3.4")):
        packages.s3a(SparkBuild(spark="3.5.1", scala="2.12", hadoop="3.3.4"))
    with pytest.raises(PackageUnavailableError, match="unknown JVM package 'jdbc'"):
        packages.package("jdbc")


def test_a_missing_jar_is_one_line_saying_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv(packages.CACHE_ENV, str(tmp_path / "jars"))
    assert packages.cache_dir() == tmp_path / "jars"
    with pytest.raises(PackageUnavailableError) as raised:
        packages.resolved_jars(packages.package("sedona"))
    message = str(raised.value)
    assert "\n" not in message and str(tmp_path / "jars") in message
    assert message.endswith("run ./dev, or: python -m odfproj.engine.packages fetch sedona")


def test_cached_jars_are_used_as_they_are_and_s3a_loads_only_when_asked(tmp_path):
    pkg = packages.JvmPackage("demo", "a test", (Artifact("org.example", "demo", "1.0"),))
    (tmp_path / "demo-1.0.jar").write_bytes(b"PK")
    # cached: nothing is fetched (an unknown tool would fail if anything ran)
    assert packages.fetch(pkg, tmp_path, tool="ivy") == (tmp_path / "demo-1.0.jar",)
    assert packages.session_jars(cache=tmp_path) == ()
    with pytest.raises(PackageUnavailableError, match="s3a jars"):
        packages.session_jars(s3a_connector=True, cache=tmp_path)


def test_a_fetch_that_cannot_run_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(packages, "pyspark_jars", lambda: tmp_path / "no-jars")  # a PySpark without Ivy
    pkg = packages.JvmPackage("demo", "a test", (Artifact("org.example", "absent", "0.0.1"),))
    with pytest.raises(PackageUnavailableError) as raised:
        packages.fetch(pkg, tmp_path / "cache", tool="ivy")
    assert (
        str(raised.value)
        == "cannot fetch org.example:absent:0.0.1: PySpark's jars hold no Ivy (try --tool mvn)"
    )
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_compat_jar_is_written_only_when_spark_lacks_the_trait(tmp_path):
    jar = gis.compat_jar(tmp_path)
    with zipfile.ZipFile(next(packages.pyspark_jars().glob("spark-catalyst_*.jar"))) as catalyst:
        has_trait = f"{gis._MISSING_TRAIT}.class" in catalyst.namelist()
    if has_trait:
        assert jar is None
    else:
        assert jar is not None
        with zipfile.ZipFile(jar) as archive:
            assert archive.namelist() == [f"{gis._MISSING_TRAIT}.class"]
            data = archive.read(f"{gis._MISSING_TRAIT}.class")
        # a class file (magic, Java 8), public abstract interface, naming the trait and its parent
        assert data[:8] == bytes.fromhex("cafebabe00000034")
        assert gis._MISSING_TRAIT.encode() in data and gis._TRAIT_PARENT.encode() in data
        assert gis.compat_jar(tmp_path) == jar  # written once


# --- the allowlist and the JVM-free check ----------------------------------------------------------------


def test_the_allowed_gis_functions_are_sedona_151s_and_exclude_the_xml_parsers():
    assert GIS_FUNCTION_NAMES <= SEDONA_151
    assert GIS_FUNCTIONS <= ALLOWED_FUNCTIONS
    assert {"ST_GeomFromGML", "ST_GeomFromKML"} <= SEDONA_151 - GIS_FUNCTION_NAMES
    assert {"ST_Point", "ST_GeomFromGeoJSON", "ST_Transform"} <= GIS_FUNCTION_NAMES
    assert not any(name.lower().startswith("rs_") for name in ALLOWED_FUNCTIONS)


def test_gis_calls_are_found_in_sql_outside_strings_and_comments():
    sql = """
        SELECT st_point(x, y) AS p, 'ST_Fake(1)' AS s, `st_col` AS c,
               ST_AsText (ST_Transform(g, "epsg:3157", 'epsg:4326')) -- ST_Other(2)
        FROM input /* RS_Band(r) */
    """
    assert gis.gis_functions_in([sql]) == ["st_point", "ST_AsText", "ST_Transform"]
    assert gis.gis_functions_in(["SELECT first_st_x(1), a.st_x FROM t"]) == []


def test_a_misspelt_st_function_is_named_with_the_closest_allowed_one():
    [reason] = gis.unknown_gis_functions(["SELECT ST_GeomFromGeoJSN(geom) FROM input"])
    assert "ST_GeomFromGeoJSN is not one of the Apache Sedona GIS functions" in reason
    assert "did you mean ST_GeomFromGeoJSON?" in reason
    assert gis.unknown_gis_functions(["SELECT st_geomfromgeojson(geom), ST_POINT(1, 2) FROM input"]) == []


def _project(tmp_path: Path, manifest: str) -> Path:
    root = tmp_path / "project"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: gis\nmanifests: [datasets/*.yaml]\n")
    (root / "datasets" / "schools.yaml").write_text(manifest)
    return root


def test_a_gis_query_plans_and_a_misspelt_one_is_refused_without_a_jvm(tmp_path, monkeypatch):
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    text = SCHOOLS.read_text()
    [step] = plan_project(load_project(_project(tmp_path / "a", text)), PlanRequest())[0].definitions
    assert step.action is Action.CREATE and step.reasons == ()
    misspelt = text.replace("ST_GeomFromGeoJSON(geom)", "ST_GeomFromGeoJSN(geom)")
    [step] = plan_project(load_project(_project(tmp_path / "b", misspelt)), PlanRequest())[0].definitions
    assert step.action is Action.REFUSED
    assert step.reasons == (
        "the preprocess query cannot run: function ST_GeomFromGeoJSN is not one of the Apache Sedona GIS "
        "functions odfproj allows (did you mean ST_GeomFromGeoJSON?) (see docs/guide/engines.md, 'GIS functions')",
    )


def test_a_session_gets_the_s3a_jars_only_when_asked(tmp_path, monkeypatch):
    from odfproj.engine.session import SparkSettings

    monkeypatch.setenv(packages.CACHE_ENV, str(tmp_path))
    assert "spark.jars" not in SparkSettings().effective_conf()
    with pytest.raises(PackageUnavailableError, match="s3a jars"):
        SparkSettings(s3a_connector=True).effective_conf()
    wanted = [tmp_path / a.file_name for a in packages.package("s3a").artifacts]
    for jar in wanted:
        jar.write_bytes(b"PK")
    assert SparkSettings(s3a_connector=True).effective_conf()["spark.jars"] == ",".join(map(str, wanted))
