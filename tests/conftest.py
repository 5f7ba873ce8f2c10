"""Shared fixtures, and where the conformance data the tests use lives (in the repository, sources noted)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Every command a test runs starts its own local JVM (or uses the shared session), as in CI: the warm
# engine, a server that outlives the command, is tested where asked for (tests/engine/test_warm.py).
# CI too, for the tests that run commands with every ODFPROJ_ variable removed (the scaffolded workflow).
os.environ["ODFPROJ_WARM_ENGINE"] = "off"
os.environ.setdefault("CI", "true")

REPO_DIR = Path(__file__).resolve().parents[1]
FIXTURES_DIR = REPO_DIR / "tests" / "fixtures"
# The ODF conformance vectors and the reference implementation's manifests: copies, see each SOURCES.md.
VECTORS_DIR = FIXTURES_DIR / "odf-spec" / "test-vectors"
REFERENCE_MANIFESTS_DIR = FIXTURES_DIR / "reference-manifests"


def _test_spark_settings():
    from odfproj.engine.session import SparkSettings

    return SparkSettings(
        master="local[2]",
        app_name="odfproj-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test process (local[2], UI off, 2 shuffle partitions); mark tests
    ``spark``. ``./dev test`` runs two worker processes (pytest-xdist), so a run has one per worker."""
    from odfproj.engine.session import SparkSessionHolder

    holder = SparkSessionHolder(_test_spark_settings())
    yield holder.get()
    holder.stop()


@pytest.fixture(scope="session")
def engine(spark):
    """A SparkEngine on the shared session (same settings, so getOrCreate hands back that session)."""
    from odfproj.engine.session import SparkSessionHolder
    from odfproj.engine.spark import SparkEngine

    engine = SparkEngine(SparkSessionHolder(_test_spark_settings()))
    assert engine.session is spark  # never stop this holder: the session belongs to the `spark` fixture
    return engine
