"""An engine bound to the shared test session (same settings as the ``spark`` fixture)."""

from __future__ import annotations

import pytest

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine


@pytest.fixture(scope="module")
def engine(spark) -> SparkEngine:
    holder = SparkSessionHolder(
        SparkSettings(
            master="local[2]",
            app_name="odfproj-tests",
            conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        )
    )
    engine = SparkEngine(holder)
    assert engine.session is spark  # getOrCreate hands back the shared session; never stop this holder
    return engine
