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


def test_the_driver_jvm_gets_the_jit_thresholds(spark) -> None:
    """The JIT options reach the JVM that was started (its own record of its arguments), not just the conf."""
    from odfproj.engine.session import DRIVER_JIT_OPTIONS

    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert any(o.startswith("-XX:Tier4InvocationThreshold=") for o in DRIVER_JIT_OPTIONS)
    assert set(DRIVER_JIT_OPTIONS) <= set(arguments)


def test_a_local_master_runs_without_adaptive_execution_unless_the_target_asks() -> None:
    key = "spark.sql.adaptive.enabled"
    assert SparkSettings(master="local[2]").effective_conf()[key] == "false"
    assert SparkSettings(master="local[2]", conf={key: "true"}).effective_conf()[key] == "true"
    assert SparkSettings(master="spark://10.0.0.5:7077").effective_conf()[key] == "true"


def test_the_shared_session_has_the_local_tuning(spark) -> None:
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"


def test_holder_is_lazy() -> None:
    holder = SparkSessionHolder(SparkSettings(master="local[1]"))
    assert not holder.created
