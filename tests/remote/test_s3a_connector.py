"""Spark with Hadoop's real S3A connector (``local[2]``) against moto's S3 server on 127.0.0.1.

Parquet written to ``s3a://`` lands in the bucket as objects and reads back the same; a missing bucket,
refused credentials and an endpoint that does not answer are each one line naming the store. The
credentials reach S3A through the AWS SDK's default chain that odfproj configures (``engine.s3a``),
never as a setting, and Spark hides any that a machine's own defaults put in its conf.

The connector must be on the class path when the JVM starts, so the shared test session starts with
it whenever ``./dev`` has fetched the jars (tests/conftest.py); these tests then set S3A's settings
from the test server's variables (:func:`odfproj.engine.s3a.environment_conf`, what a session of a
workspace on S3 starts with) into that running session. Its JVM started before this module, so the
credentials go in as the JVM's system properties, the default chain's first source (a session of its
own reads ``AWS_ACCESS_KEY_ID`` from its environment). Without the jars these tests are skipped saying
why; on a CI runner, whose ``./dev test`` fetched them, they fail instead.
"""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from odfproj.engine.s3a import spark_uri
from odfproj.engine.settings import check_spark_conf
from odfproj.engine.spark import translating_errors
from odfproj.errors import EngineError
from tests.remote.conftest import ACCESS_KEY, SECRET_KEY

pytestmark = pytest.mark.spark


def _objects(bucket_url: str, prefix: str) -> list[str]:
    import boto3

    name, _, root = bucket_url.removeprefix("s3://").partition("/")
    listing = boto3.client("s3").list_objects_v2(Bucket=name, Prefix=f"{root}/{prefix}")
    return [item["Key"] for item in listing.get("Contents", [])]


def _one_line(action, what: str) -> str:
    with pytest.raises(EngineError) as info, translating_errors(what):
        action()
    message = str(info.value)
    assert "\n" not in message and SECRET_KEY not in message and ACCESS_KEY not in message
    return message


def test_spark_hides_every_credential_where_it_shows_its_conf(spark) -> None:
    """Spark's own redaction (event log, UI, ``spark.logConf``), with odfproj's ``spark.redaction.regex``:
    a credential that a machine's Spark defaults put in the conf is never shown (the connector not needed)."""
    from tests.engine.test_s3a import CREDENTIAL_KEYS

    jvm = spark.sparkContext._jvm
    pairs = jvm.java.util.ArrayList()
    for key in [*CREDENTIAL_KEYS, "spark.hadoop.fs.s3a.endpoint"]:
        pairs.add(jvm.scala.Tuple2(key, "hunter2"))  # (a value with "secret" in it is hidden anyway)
    convert = jvm.scala.jdk.javaapi.CollectionConverters
    shown = jvm.org.apache.spark.util.Utils.redact(
        spark.sparkContext._jsc.sc().conf(), convert.asScala(pairs).toSeq()
    )
    values = {pair._1(): pair._2() for pair in convert.asJava(shown)}
    assert [key for key in CREDENTIAL_KEYS if values[key] == "hunter2"] == []
    assert values["spark.hadoop.fs.s3a.endpoint"] == "hunter2"  # not a credential: shown


def test_parquet_is_written_to_the_store_and_read_back(s3a, bucket: str) -> None:
    where = spark_uri(f"{bucket}/datasets/trips/data/slice")
    frame = s3a.sql(
        "SELECT * FROM VALUES (1L, 'Lima', 1.5D), (2L, 'Oslo', NULL), (3L, NULL, -0.25D) AS t(id, city, km)"
    )
    with translating_errors("writing to the store"):
        frame.write.parquet(where)
        back = s3a.read.parquet(where).collect()
    assert sorted(back, key=lambda row: row.id) == sorted(frame.collect(), key=lambda row: row.id)
    # the data files are objects in the bucket, not files on this machine
    parts = [key for key in _objects(bucket, "datasets/trips/data/slice/") if key.endswith(".parquet")]
    assert parts, "no Parquet object in the bucket"


def test_a_missing_bucket_is_one_line_naming_the_store(s3a) -> None:
    where = f"s3a://odfproj-missing-{uuid.uuid4().hex[:8]}/datasets/trips/data"
    message = _one_line(lambda: s3a.read.parquet(where).count(), "reading trips")
    assert message == f"reading trips: {where}: the bucket does not exist (NoSuchBucket)"


def test_refused_credentials_are_one_line_naming_the_store(s3a, bucket: str) -> None:
    from moto.core.authorization import enable_iam_authentication

    where = spark_uri(f"{bucket}/datasets/trips/data")
    s3a.range(3).write.parquet(where)  # accepted while moto checks no credentials
    with enable_iam_authentication():  # now moto knows no access key at all: ours is refused
        read = _one_line(lambda: s3a.read.parquet(where).count(), "reading trips")
        write = _one_line(lambda: s3a.range(3).write.parquet(f"{where}-2"), "writing trips")
    assert read.startswith(f"reading trips: {where}: the store refused the credentials")
    assert write.startswith(f"writing trips: {where}-2: the store refused the credentials")
    assert "AWS_" not in read or "credential provider" in read


def test_an_unreachable_endpoint_is_one_line_naming_the_store(s3a) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bucket = f"odfproj-unreachable-{uuid.uuid4().hex[:8]}"
    # one bucket's own endpoint, in the per-bucket spelling a project may write, tried once
    settings = {
        f"spark.hadoop.fs.s3a.bucket.{bucket}.endpoint": f"http://127.0.0.1:{port}",
        f"spark.hadoop.fs.s3a.bucket.{bucket}.attempts.maximum": "1",
        f"spark.hadoop.fs.s3a.bucket.{bucket}.retry.limit": "1",
    }
    assert check_spark_conf(settings) == []
    hadoop = s3a.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)
    try:
        started = time.monotonic()
        message = _one_line(lambda: s3a.read.parquet(f"s3a://{bucket}/data").count(), "reading trips")
    finally:
        for key in settings:
            hadoop.unset(key.removeprefix("spark.hadoop."))
    assert message.startswith(f"reading trips: s3a://{bucket}/data: the store's endpoint cannot be reached")
    assert time.monotonic() - started < 60
