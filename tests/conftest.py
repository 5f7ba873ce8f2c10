"""Shared fixtures, and where the conformance data the tests use lives (in the repository, sources noted)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

# Every command a test runs starts its own local JVM (or uses the shared session), as in CI: the warm
# engine, a server that outlives the command, is tested where asked for (tests/engine/test_warm.py).
# CI too, for the tests that run commands with every ODFPROJ_ variable removed (the scaffolded workflow).
os.environ["ODFPROJ_WARM_ENGINE"] = "off"
#: Whether the suite runs on a CI runner (``CI`` set before the tests set it for the commands they run).
CI_RUNNER = "CI" in os.environ
os.environ.setdefault("CI", "true")

# A shell without job control starts a background command (`bash .ci/run &`) with SIGINT ignored, and an
# ignored signal stays ignored across fork and exec: the commands the Ctrl-C tests start would then ignore
# the test's SIGINT, as a background job rightly does, and those tests would fail only when the suite was
# started that way. Give the suite, and so every process it starts, Ctrl-C as a terminal delivers it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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
        s3a_connector=s3a_jars_cached(),
    )


def s3a_jars_cached() -> bool:
    """Whether the S3A connector's jars are in the jar cache (``./dev`` fetches them).

    The shared session then starts with them on its class path, as a session of a workspace on S3
    does: the connector cannot be added to a running JVM, and a JVM of its own for the connector's tests
    (tests/remote/test_s3a_connector.py) would cost more than the jars add to each worker's start.
    """
    from odfproj.engine.packages import PackageUnavailableError, package, resolved_jars

    try:
        resolved_jars(package("s3a"))
    except PackageUnavailableError:
        return False
    return True


def s3a_jars_or_skip() -> None:
    """Skip a test that needs the S3A connector's jars when they cannot be had (no network, no Java);
    on CI, where ``./dev test`` fetched them before the tests, fail instead."""
    from odfproj.engine.packages import PackageUnavailableError, package, resolved_jars

    try:
        resolved_jars(package("s3a"))
    except PackageUnavailableError as e:
        if CI_RUNNER:
            pytest.fail(f"{e} (on CI, ./dev test fetches them before the tests run)")
        pytest.skip(f"no S3A connector to test: {e}")


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


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server on 127.0.0.1, started once for the session and stopped at its end
    (tests/remote, and tests/cluster, whose workers share nothing but it).

    moto honours S3's conditional writes (If-None-Match: * and If-Match: ETag answer 412 when they
    fail), which is what refs/head's compare-and-swap relies on.
    """
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def store_env(endpoint: str) -> dict[str, str]:
    """The standard AWS variables of a process that uses the test S3 server at ``endpoint``: its
    credentials (any, for moto) and region, and no profile file of this machine's."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    }
