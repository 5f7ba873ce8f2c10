"""The shared SparkSession is configured as the engine promises (UTC, ANSI, no SQL on files)."""

from __future__ import annotations

import pytest

from odfproj.engine.session import SparkSessionHolder, SparkSettings

pytestmark = pytest.mark.spark


def test_session_settings(spark) -> None:
    conf = spark.conf
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.sql.ansi.enabled") == "true"
    assert conf.get("spark.sql.runSQLOnFiles") == "false"
    assert spark.sql("SELECT 1 AS x").collect()[0].x == 1


def test_holder_is_lazy() -> None:
    holder = SparkSessionHolder(SparkSettings(master="local[1]"))
    assert not holder.created
