"""Fixtures for the remote tests: an S3-compatible server (moto, server mode) on 127.0.0.1, real folders."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfproj.engine.s3a import environment_conf
from odfproj.odf import model
from odfproj.storage.dataset import Dataset
from odfproj.storage.workspace import Workspace
from tests.conftest import s3a_jars_or_skip, store_env
from tests.storage.helpers.chains import Writer, set_schema


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The standard AWS variables pointing at the test server, set for this test (and its children)."""
    env = store_env(s3_endpoint)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return env


@pytest.fixture
def bucket(s3_env: dict[str, str]) -> str:
    """A fresh, empty bucket on the test server; its s3:// URL."""
    import boto3

    name = f"odfproj-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}/repo"


def make_workspace(path: Path, *, slices: int = 3) -> Workspace:
    """A workspace with one root dataset holding ``slices`` data slices, each with a checkpoint."""
    workspace = Workspace(path)
    dataset = workspace.create("trips", model.DatasetKind.Root)
    dataset.append([set_schema()])
    writer = Writer(dataset, path.parent / f"{path.name}-scratch")
    for i in range(slices):
        writer.add_data(5 + i, checkpoint=f"state {i}".encode())
    return workspace


def add_slices(dataset: Dataset, scratch: Path, count: int) -> None:
    writer = Writer(dataset, scratch)
    for i in range(count):
        writer.add_data(3, checkpoint=f"more {i} {scratch.name}".encode())


#: Credentials moto accepts (any, until IAM authentication is on); never to be seen in a message.
ACCESS_KEY = "AKIAODFPROJTEST"
SECRET_KEY = "moto-secret-never-shown"


def _connector_or_skip(spark) -> None:
    s3a_jars_or_skip()
    if "hadoop-aws" not in spark.sparkContext.getConf().get("spark.jars", ""):
        pytest.skip("the shared Spark session started before the S3A jars were cached: run the tests again")


@pytest.fixture(scope="module")
def s3a(spark, s3_endpoint: str) -> Iterator[object]:
    """The shared session, its S3A connector pointed at the test server as a workspace's session is."""
    _connector_or_skip(spark)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    system = spark.sparkContext._jvm.java.lang.System
    conf = environment_conf({"AWS_ENDPOINT_URL": s3_endpoint, "AWS_REGION": "us-east-1"})
    for key, value in conf.items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)
    system.setProperty("aws.accessKeyId", ACCESS_KEY)
    system.setProperty("aws.secretAccessKey", SECRET_KEY)
    try:
        yield spark
    finally:
        for key in conf:
            hadoop.unset(key.removeprefix("spark.hadoop."))
        system.clearProperty("aws.accessKeyId")
        system.clearProperty("aws.secretAccessKey")
