"""Shared fixtures. ``SHARED_DIR`` is the read-only spec folder that sits beside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_DIR.parent / "shared"
SPEC_DIR = SHARED_DIR / "odf-spec"
VECTORS_DIR = SPEC_DIR / "test-vectors"
REFERENCE_MANIFESTS_DIR = SHARED_DIR / "reference-manifests"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.fail(f"the spec folder {SHARED_DIR} is missing: it must sit beside the repository")
    return SHARED_DIR


def _test_spark_settings():
    from odfproj.engine.session import SparkSettings

    return SparkSettings(
        master="local[2]",
        app_name="odfproj-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (local[2], UI off, 2 shuffle partitions); mark tests ``spark``."""
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
