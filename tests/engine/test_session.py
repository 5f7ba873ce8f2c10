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


def test_the_driver_jvm_gets_its_jit_options(spark) -> None:
    """The JIT options reach the JVM that was started (its own record of its arguments), not just the conf:
    a command's own driver compiles with C1 only, the warm engine's long-lived one keeps the C2 thresholds."""
    from odfproj.engine.session import DRIVER_JIT_OPTIONS, SHORT_LIVED_JIT_OPTIONS, driver_jit_options

    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(driver_jit_options(long_lived=False)) <= set(arguments)
    assert any(o.startswith("-XX:Tier4InvocationThreshold=") for o in DRIVER_JIT_OPTIONS)
    assert SHORT_LIVED_JIT_OPTIONS == ("-XX:TieredStopAtLevel=1",)


def test_only_a_long_lived_driver_keeps_the_c2_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    from odfproj.engine.session import DRIVER_JIT_ENV, DRIVER_JIT_OPTIONS, SHORT_LIVED_JIT_OPTIONS

    monkeypatch.delenv(DRIVER_JIT_ENV, raising=False)

    def options(**kw: bool) -> list[str]:
        return (
            SparkSettings(master="local[2]", **kw).effective_conf()["spark.driver.extraJavaOptions"].split()
        )

    assert set(DRIVER_JIT_OPTIONS) <= set(options(long_lived=True))
    assert set(SHORT_LIVED_JIT_OPTIONS) <= set(options()) and not set(DRIVER_JIT_OPTIONS) & set(options())
    monkeypatch.setenv(DRIVER_JIT_ENV, "tiered")  # a cold command with a large local job
    assert set(DRIVER_JIT_OPTIONS) <= set(options())


def test_the_warm_engine_s_server_is_a_long_lived_driver() -> None:
    from odfproj.engine.warm.server import server_settings

    assert server_settings().long_lived


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
