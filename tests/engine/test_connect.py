"""Spark Connect targets without a server: which URLs a target may name, and the one-line errors.

Runs against real Connect servers are in tests/cluster/ (``./dev test-cluster``).
"""

from __future__ import annotations

import socket

import pytest

from odfproj.engine import session as session_module
from odfproj.engine.session import SparkSessionHolder, SparkSettings, is_connect
from odfproj.engine.settings import check_spark_master, target_settings
from odfproj.errors import EngineError


@pytest.mark.parametrize(
    "master",
    ["sc://127.0.0.1:15002", "sc://spark-connect.internal", "sc://dbc.example.com:443/;use_ssl=true"],
)
def test_connect_urls_are_allowed_masters(master) -> None:
    assert check_spark_master(master) is None
    assert is_connect(master) and target_settings(master, {}).is_connect


@pytest.mark.parametrize(
    "master",
    [
        "sc://host:15002/;token=secret",
        "sc://host/;use_ssl=true;user_id=x",
        "sc://",
        "sc://host:15002 --conf x",
    ],
)
def test_other_connect_parameters_are_refused(master) -> None:
    refusal = check_spark_master(master)
    assert refusal is not None and "sc://HOST:PORT" in refusal.reason


def test_only_local_drivers_are_pinned_to_loopback() -> None:
    assert SparkSettings(master="local[2]").effective_conf()["spark.driver.host"] == "127.0.0.1"
    # A cluster's executors must reach the driver: Spark's own address stands (or SPARK_LOCAL_IP).
    assert "spark.driver.host" not in SparkSettings(master="spark://10.0.0.5:7077").effective_conf()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_connect_server_is_one_line_at_once() -> None:
    holder = SparkSessionHolder(SparkSettings(master=f"sc://127.0.0.1:{_closed_port()}"))
    with pytest.raises(EngineError) as info:
        holder.get()
    message = str(info.value)
    assert "could not reach Spark Connect at sc://127.0.0.1:" in message and "\n" not in message
    assert not holder.created


def test_missing_connect_packages_name_the_extra(monkeypatch) -> None:
    monkeypatch.setattr(session_module, "CONNECT_MODULES", ("odfproj_no_such_package",))
    with pytest.raises(EngineError) as info:
        SparkSessionHolder(SparkSettings(master="sc://127.0.0.1:15002")).get()
    message = str(info.value)
    assert "odfproj_no_such_package missing" in message and "pip install 'odfproj[connect]'" in message


def test_an_old_pyspark_is_refused_for_connect(monkeypatch) -> None:
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "4.1.1")
    with pytest.raises(EngineError, match=r"needs pyspark 4\.3 or newer \(installed: 4\.1\.1\)"):
        SparkSessionHolder(SparkSettings(master="sc://127.0.0.1:15002")).get()
