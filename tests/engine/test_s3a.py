"""The S3A connector without a JVM: which session gets it, the settings a project may give it, credentials
refused and never shown, its failures in one line naming the store, and the jars' fetch failing offline.

The connector itself, against moto's S3 server, is tests/remote/test_s3a_connector.py.
"""

from __future__ import annotations

import re
import sys
from types import MappingProxyType

import pytest

from odfproj.engine import packages
from odfproj.engine.credentials import REDACTED, SPARK_REDACTION_REGEX, is_credential_key, redacted
from odfproj.engine.exchange import EXCHANGE_CONF
from odfproj.engine.s3a import (
    CONNECTOR_ENV,
    DEFAULT_CREDENTIALS_PROVIDER,
    IN_PLACE_CONF,
    environment_conf,
    is_on_s3,
    spark_uri,
    store_failure,
    with_data_at,
)
from odfproj.engine.session import SparkSettings
from odfproj.engine.settings import (
    ALLOWED_S3A_CONF,
    ALLOWED_SPARK_CONF,
    check_spark_conf,
    target_settings,
)
from odfproj.engine.warm.choice import warm_refusal
from odfproj.errors import EngineError
from odfproj.project.config import CONFIG_FILE, ProjectError, parse_config
from tests.conftest import REPO_DIR

# --- which session gets the connector ---------------------------------------------------------------------

ENV = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "very-secret-value",
    "AWS_SESSION_TOKEN": "a-session-token",
}


@pytest.fixture(autouse=True)
def jars_cached(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A jar cache holding the connector's jars (as ``./dev`` leaves it), for every test here."""
    cache = tmp_path / "jar-cache"
    cache.mkdir()
    for artifact in packages.package("s3a").artifacts:
        (cache / artifact.file_name).write_bytes(b"jar")
    monkeypatch.setenv(packages.CACHE_ENV, str(cache))
    return cache


def test_without_the_connectors_jars_a_session_reads_the_caches_copies(jars_cached) -> None:
    """A machine ``./dev`` never set up has no jars: the session starts as for a local workspace, and the
    remote workspace's cache fetches what Spark reads, rather than a run failing for the connector."""
    next(jars_cached.iterdir()).unlink()
    settings = SparkSettings(master="local[2]")
    assert with_data_at(settings, "s3://bucket/p", ENV) is settings


def test_a_local_workspace_never_gets_the_connector() -> None:
    settings = SparkSettings(master="local[2]")
    for location in ("/data/odf", "file:///mnt/shared/odf", "./.odf"):
        assert with_data_at(settings, location, ENV) is settings
    assert not is_on_s3("/data/s3/odf") and is_on_s3("s3://bucket/p") and is_on_s3("S3A://bucket/p")


def test_data_on_s3_puts_the_connector_on_the_class_path_with_settings_from_the_environment() -> None:
    settings = with_data_at(SparkSettings(master="local[2]"), "s3://bucket/odfproj/prod", ENV)
    assert settings.s3a_connector
    assert dict(settings.conf) == {
        "spark.hadoop.fs.s3a.aws.credentials.provider": DEFAULT_CREDENTIALS_PROVIDER,
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        IN_PLACE_CONF: "true",
    }
    # every derived setting but odfproj's own mark is one a project could write itself, none a credential
    assert check_spark_conf({k: v for k, v in settings.conf.items() if k != IN_PLACE_CONF}) == []
    assert check_spark_conf({IN_PLACE_CONF: "true"}) != []  # a project cannot claim to read in place
    # on AWS itself: no endpoint, no path-style access; the SDK's chain finds the credentials
    assert environment_conf({}) == {
        "spark.hadoop.fs.s3a.aws.credentials.provider": DEFAULT_CREDENTIALS_PROVIDER
    }
    assert (
        environment_conf({"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://b:2"})[
            "spark.hadoop.fs.s3a.endpoint"
        ]
        == "http://b:2"
    )


def test_the_targets_own_s3a_settings_win() -> None:
    target = target_settings(
        "local[2]",
        {"spark.hadoop.fs.s3a.path.style.access": "false", "spark.sql.shuffle.partitions": "8"},
    )
    settings = with_data_at(target, "s3://bucket/p", ENV)
    assert settings.conf["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert settings.conf["spark.sql.shuffle.partitions"] == "8"
    assert settings.master == "local[2]"


def test_the_session_gets_the_cached_jars_and_the_s3a_settings_never_a_credential(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(packages.CACHE_ENV, str(tmp_path))
    for artifact in packages.package("s3a").artifacts:
        (tmp_path / artifact.file_name).write_bytes(b"jar")
    conf = with_data_at(SparkSettings(master="local[2]"), "s3://bucket/p", ENV).effective_conf()
    assert conf["spark.jars"].split(",") == [
        str(tmp_path / a.file_name) for a in packages.package("s3a").artifacts
    ]
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    text = repr(conf)
    assert not any(
        ENV[name] in text for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    )


def test_a_targets_settings_take_the_connector_when_the_caller_says_the_data_is_on_s3(monkeypatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    conf = {"spark.sql.shuffle.partitions": "8"}
    assert not target_settings("local[2]", conf).s3a_connector
    assert not target_settings("local[2]", conf, data_at="/srv/odf").s3a_connector
    on_s3 = target_settings("local[2]", conf, data_at="s3://bucket/odfproj/prod")
    assert on_s3.s3a_connector and on_s3.conf["spark.hadoop.fs.s3a.endpoint"] == ENV["AWS_ENDPOINT_URL"]
    assert on_s3.conf["spark.sql.shuffle.partitions"] == "8"


def test_a_spark_that_brings_its_own_connector_gets_none_of_odfprojs() -> None:
    connect = with_data_at(SparkSettings(master="sc://spark.internal:15002"), "s3://bucket/p", ENV)
    assert not connect.s3a_connector
    assert "spark.jars" not in connect.effective_conf()  # no jar cache needed either
    provided = with_data_at(SparkSettings(master="yarn"), "s3://bucket/p", {**ENV, CONNECTOR_ENV: "provided"})
    assert not provided.s3a_connector and provided.conf["spark.hadoop.fs.s3a.endpoint"]


def test_a_missing_connector_is_one_line_saying_how_to_fetch_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(packages.CACHE_ENV, str(tmp_path))
    settings = SparkSettings(master="local[2]", s3a_connector=True)  # its jars removed since it was chosen
    with pytest.raises(packages.PackageUnavailableError) as info:
        settings.effective_conf()
    assert "\n" not in str(info.value) and "hadoop-aws" in str(info.value) and "fetch s3a" in str(info.value)


def test_data_on_s3_does_not_go_to_the_warm_engine() -> None:
    settings = with_data_at(SparkSettings(master="local[*]"), "s3://bucket/p", {})
    assert warm_refusal(settings) == "the data is on S3, which needs the S3A connector in a JVM of its own"


def test_spark_opens_s3_urls_through_s3a() -> None:
    assert spark_uri("s3://bucket/odf/datasets/x/data/f") == "s3a://bucket/odf/datasets/x/data/f"
    assert spark_uri("s3a://bucket/k") == "s3a://bucket/k"
    assert spark_uri("/data/x") == "/data/x"


# --- the allowlist ------------------------------------------------------------------------------------------

#: A valid value for each allowed S3A setting.
S3A_VALUES = {
    "endpoint": "https://minio.internal:9000",
    "endpoint.region": "eu-west-1",
    "path.style.access": "true",
    "cross.region.access.enabled": "false",
    "aws.credentials.provider": "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider,"
    "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider",
    "assumed.role.arn": "arn:aws:iam::123456789012:role/odfproj-writer",
    "assumed.role.session.duration": "30m",
    "connection.ssl.enabled": "true",
    "ssl.channel.mode": "default_jsse",
    "connection.maximum": "96",
    "connection.timeout": "200s",
    "connection.establish.timeout": "30s",
    "connection.request.timeout": "60s",
    "connection.ttl": "5m",
    "attempts.maximum": "5",
    "retry.limit": "7",
    "retry.interval": "500ms",
    "retry.throttle.limit": "20",
    "retry.throttle.interval": "100ms",
    "threads.max": "64",
    "max.total.tasks": "32",
    "multipart.size": "64m",
    "multipart.threshold": "128m",
    "fast.upload.active.blocks": "4",
    "block.size": "128m",
    "readahead.range": "1m",
    "experimental.input.fadvise": "random",
    "encryption.algorithm": "SSE-KMS",
    "requester.pays.enabled": "false",
}


def test_every_s3a_setting_has_a_sample_value() -> None:
    assert set(S3A_VALUES) == set(ALLOWED_S3A_CONF)


@pytest.mark.parametrize("name", sorted(S3A_VALUES))
def test_the_s3a_settings_a_cluster_needs_are_allowed_in_both_spellings(name) -> None:
    for key in (f"spark.hadoop.fs.s3a.{name}", f"spark.hadoop.fs.s3a.bucket.odf-prod.data.{name}"):
        assert check_spark_conf({key: S3A_VALUES[name]}) == [], key


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.hadoop.fs.s3a.endpoint", "http://user@evil.example/path"),
        ("spark.hadoop.fs.s3a.endpoint", "s3.amazonaws.com --conf spark.jars=/tmp/evil.jar"),
        ("spark.hadoop.fs.s3a.aws.credentials.provider", "org.evil.Provider"),
        (
            "spark.hadoop.fs.s3a.aws.credentials.provider",
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider,x",
        ),
        ("spark.hadoop.fs.s3a.assumed.role.arn", "arn:aws:iam::123:role/x"),
        ("spark.hadoop.fs.s3a.path.style.access", "yes"),
        ("spark.hadoop.fs.s3a.encryption.algorithm", "SSE-C"),
    ],
)
def test_an_s3a_value_not_of_its_kind_is_refused(key, value) -> None:
    (refusal,) = check_spark_conf({key: value})
    assert refusal.setting == key and "is not" in refusal.reason


@pytest.mark.parametrize(
    "key",
    [
        "spark.hadoop.fs.s3a.impl",  # a class
        "spark.hadoop.fs.s3a.buffer.dir",  # a folder
        "spark.hadoop.fs.s3a.custom.signers",  # classes
        "spark.hadoop.fs.s3a.bucket.b.impl",
        "spark.hadoop.fs.s3a.bucket.UPPER.endpoint",  # not a bucket name
        "spark.hadoop.fs.defaultFS",
        "fs.s3a.endpoint",  # not a Spark setting: Spark would drop it
    ],
)
def test_other_s3a_and_hadoop_settings_stay_refused(key) -> None:
    (refusal,) = check_spark_conf({key: "x"})
    assert "not an allowed Spark setting" in refusal.reason


CREDENTIAL_KEYS = [
    "spark.hadoop.fs.s3a.access.key",
    "spark.hadoop.fs.s3a.secret.key",
    "spark.hadoop.fs.s3a.session.token",
    "spark.hadoop.fs.s3a.bucket.odf-prod.secret.key",
    "spark.hadoop.fs.s3a.encryption.key",
    "spark.hadoop.fs.s3a.server-side-encryption.key",
    "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
    "spark.ssl.keyStorePassword",
    "spark.authenticate.secret",
    "spark.hadoop.fs.s3a.secret.key.provider",
]


@pytest.mark.parametrize("key", CREDENTIAL_KEYS)
def test_a_credential_is_refused_in_one_line_saying_where_credentials_go(tmp_path, key) -> None:
    text = f"name: p\ntargets:\n  dev:\n    spark_conf:\n      {key}: 'wJalrXUtnFEMI-SECRET'\n"
    with pytest.raises(ProjectError) as info:
        parse_config(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message
    assert str(tmp_path / CONFIG_FILE) in message and "target 'dev'" in message and key in message
    assert (
        "a credential" in message and "AWS_SECRET_ACCESS_KEY" in message and "credential provider" in message
    )
    assert "wJalrXUtnFEMI" not in message
    with pytest.raises(EngineError, match="a credential"):  # a library caller is refused the same way
        target_settings("local[2]", {key: "wJalrXUtnFEMI-SECRET"})


def test_no_allowed_setting_is_taken_for_a_credential() -> None:
    allowed = [*ALLOWED_SPARK_CONF, *(f"spark.hadoop.fs.s3a.{n}" for n in ALLOWED_S3A_CONF)]
    assert [key for key in allowed if is_credential_key(key)] == []


def test_a_conf_is_shown_with_every_credential_redacted() -> None:
    conf = {key: "wJalrXUtnFEMI-SECRET" for key in CREDENTIAL_KEYS} | {"spark.driver.memory": "4g"}
    shown = redacted(conf)
    assert shown["spark.driver.memory"] == "4g"
    assert {shown[key] for key in CREDENTIAL_KEYS} == {REDACTED}
    # a session's settings as a log line, an error or a traceback shows them (a library caller can
    # build one with any conf: the allowlist guards only the project's)
    text = repr(SparkSettings(conf=MappingProxyType(conf)))
    assert "wJalrXUtnFEMI" not in text and "spark.hadoop.fs.s3a.secret.key" in text and "4g" in text


def test_spark_itself_hides_every_credential_where_it_shows_its_conf() -> None:
    """The JVM's own redaction (``spark.redaction.regex``, the same syntax in Java) covers every key odfproj
    takes for a credential: the real JVM's answer is in tests/remote/test_s3a_connector.py."""
    regex = SparkSettings().effective_conf()["spark.redaction.regex"]
    assert regex == SPARK_REDACTION_REGEX
    assert [key for key in CREDENTIAL_KEYS if not re.search(regex, key)] == []


def test_every_allowed_s3a_setting_is_documented() -> None:
    doc = (REPO_DIR / "docs" / "guide" / "spark-settings.md").read_text(encoding="utf-8")
    assert [name for name in ALLOWED_S3A_CONF if f"`{name}`" not in doc] == []


# --- failures in one line ------------------------------------------------------------------------------------

#: The first lines of the Java exceptions S3A raised against moto (tests/remote/test_s3a_connector.py).
MISSING_BUCKET = [
    "UnknownStoreException: `s3a://nope-bucket/x': getFileStatus on s3a://nope-bucket/x: "
    "software.amazon.awssdk.services.s3.model.NoSuchBucketException: The specified bucket does not exist "
    "(Service: S3, Status Code: 404, Request ID: abc) (SDK Attempt Count: 1):NoSuchBucket: The specified "
    "bucket does not exist (Service: S3, Status Code: 404, Request ID: abc) (SDK Attempt Count: 1)",
    "NoSuchBucketException: The specified bucket does not exist (Service: S3, Status Code: 404)",
]
REFUSED = [
    "AccessDeniedException: s3a://bucket/ws/data: getFileStatus on s3a://bucket/ws/data: "
    "software.amazon.awssdk.services.s3.model.S3Exception: (Service: S3, Status Code: 403)",
]
UNREACHABLE = [
    "AWSClientIOException: getFileStatus on s3a://unreachable/x: "
    "software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request: "
    "Connect to 127.0.0.1:9 failed: Connection refused",
    "ConnectException: Connection refused",
]


def test_the_connectors_failures_are_one_line_naming_the_store() -> None:
    assert store_failure(MISSING_BUCKET) == "s3a://nope-bucket/x: the bucket does not exist (NoSuchBucket)"
    assert store_failure(REFUSED).startswith("s3a://bucket/ws/data: the store refused the credentials")
    assert store_failure(UNREACHABLE).startswith(
        "s3a://unreachable/x: the store's endpoint cannot be reached"
    )
    assert store_failure(["AnalysisException: [PATH_NOT_FOUND] Path does not exist: file:/x"]) is None
    assert store_failure(["ConnectException: Connection refused"]) is None  # not the store's


# --- fetching the jars ------------------------------------------------------------------------------------


def test_an_offline_fetch_says_so_in_one_line() -> None:
    ivy_output = (
        ":: loading settings :: url = jar:file:/x/ivy-2.5.3.jar!/org/apache/ivy/core/settings/ivysettings.xml\n"
        "\tHost repo1.maven.org not found. url=https://repo1.maven.org/maven2/org/apache/hadoop/hadoop-aws/3.5.0/x.pom\n"
        "\t\tmodule not found: org.apache.hadoop#hadoop-aws;3.5.0\n"
    )
    artifact = packages.Artifact("org.apache.hadoop", "hadoop-aws", "3.5.0")
    command = [sys.executable, "-c", f"import sys; sys.stdout.write({ivy_output!r}); sys.exit(1)"]
    with pytest.raises(packages.PackageUnavailableError) as info:
        packages._run(command, artifact)
    assert str(info.value) == (
        "could not fetch org.apache.hadoop:hadoop-aws:3.5.0 from Maven Central: "
        "Host repo1.maven.org not found (offline, or a proxy in the way?)"
    )


def test_a_spark_home_whose_jars_hold_the_connector_gets_none_of_odfprojs(tmp_path) -> None:
    (tmp_path / "jars").mkdir()
    settings = SparkSettings(master="yarn")
    assert with_data_at(settings, "s3://bucket/p", {"SPARK_HOME": str(tmp_path)}).s3a_connector
    (tmp_path / "jars" / "hadoop-aws-3.4.1.jar").write_bytes(b"jar")
    assert not with_data_at(settings, "s3://bucket/p", {"SPARK_HOME": str(tmp_path)}).s3a_connector


def test_executors_on_other_hosts_hand_files_over_through_the_store() -> None:
    """Any master but ``local`` may run its executors where the driver's disk is not: the session names
    the store's ``.exchange`` folder (engine.exchange), which a project cannot set itself."""
    for master in ("spark://m:7077", "sc://spark.internal:15002", "yarn", "k8s://https://k:443"):
        settings = with_data_at(
            SparkSettings(master=master), "s3://bucket/p/", {**ENV, CONNECTOR_ENV: "provided"}
        )
        assert settings.conf[EXCHANGE_CONF] == "s3://bucket/p/.exchange", master
        shared = with_data_at(SparkSettings(master=master), "file:///mnt/shared/odf", ENV)
        assert dict(shared.conf) == {EXCHANGE_CONF: "file:///mnt/shared/odf/.exchange"}, master
    assert EXCHANGE_CONF not in with_data_at(SparkSettings(master="local[2]"), "s3://bucket/p", ENV).conf
    assert check_spark_conf({EXCHANGE_CONF: "s3://elsewhere/x"}) != []
