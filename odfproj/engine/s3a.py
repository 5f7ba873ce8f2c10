"""Data on S3 for Spark: when a session gets Hadoop's S3A connector, its settings, and its failures in one line.

PySpark ships no S3A connector. odfproj's own (``engine.packages``: ``hadoop-aws`` at PySpark's Hadoop
version and the AWS SDK bundle it was built against, fetched once by ``./dev``) goes on a session's
class path when, and only when, the data that session reads and writes is on S3: the caller says where
the data is (:func:`with_data_at`, or ``engine.settings.target_settings(..., data_at=...)``: the
workspace's location), never a manifest or odfproj.yaml, which cannot name jars. A Spark that brings its own connector takes none of odfproj's: a Spark Connect server
(``sc://``), a Spark whose jars hold ``hadoop-aws`` already, or one its operator declares so with
``ODFPROJ_S3A_CONNECTOR=provided`` (EMR, Dataproc: docs/guide/cluster.md).

Where the store is and who may read it come from the same standard AWS variables the remote workspace's
own object moves read through boto3 (docs/guide/remote.md), so both see one store: ``AWS_ENDPOINT_URL``
(or ``AWS_ENDPOINT_URL_S3``) sets S3A's endpoint with path-style access, ``AWS_REGION`` its region, and
credentials are found by the AWS SDK's default chain (environment, web identity, profile, container or
instance role): never a setting (``engine.credentials``). A target's ``spark_conf`` may set any of
these S3A settings itself (``engine.settings.ALLOWED_S3A_CONF``) and wins.

Failures of the connector (a missing bucket, refused credentials, an endpoint that does not answer)
reach the user as one line naming the store (:func:`store_failure`, used by ``engine.spark``'s
translation of Spark's errors).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from odfproj.engine.exchange import EXCHANGE_CONF, EXCHANGE_FOLDER
from odfproj.engine.packages import pyspark_jars
from odfproj.engine.session import SparkSettings

__all__ = [
    "CONNECTOR_ENV",
    "DEFAULT_CREDENTIALS_PROVIDER",
    "IN_PLACE_CONF",
    "environment_conf",
    "is_on_s3",
    "odfproj_brings_connector",
    "reads_in_place",
    "spark_uri",
    "store_failure",
    "with_data_at",
]

#: The environment variable with which a cluster's operator says its Spark has an S3A connector already.
CONNECTOR_ENV = "ODFPROJ_S3A_CONNECTOR"
#: Set by odfproj (never by a project: the allowlist has no ``spark.odfproj.*``) on a session that opens
#: the workspace's objects on S3 itself (:func:`reads_in_place`).
IN_PLACE_CONF = "spark.odfproj.s3.inPlace"

#: The AWS SDK's default chain, boto3's order: the environment, system properties, web identity (EKS),
#: the shared profile files, a container's role, the instance's role.
DEFAULT_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"

_S3A = "spark.hadoop.fs.s3a."
_SCHEMES = ("s3://", "s3a://")


def is_on_s3(location: str) -> bool:
    """Whether ``location`` (a workspace's URL, a data object's URI) is on S3 (``s3://``, ``s3a://``)."""
    return location.strip().lower().startswith(_SCHEMES)


def spark_uri(location: str) -> str:
    """``location`` as Spark opens it: ``s3://BUCKET/KEY`` becomes ``s3a://BUCKET/KEY``; others unchanged."""
    text = location.strip()
    return "s3a://" + text[len("s3://") :] if text.lower().startswith("s3://") else text


def environment_conf(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """S3A's settings from the standard AWS variables of ``environ`` (default: this process's).

    The endpoint (``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``: MinIO, Ceph, a test server) with
    path-style access, as S3-compatible servers want it; the region (``AWS_REGION``, else
    ``AWS_DEFAULT_REGION``); and the AWS SDK's default credential chain. Never a credential.
    """
    env = os.environ if environ is None else environ
    conf = {f"{_S3A}aws.credentials.provider": DEFAULT_CREDENTIALS_PROVIDER}
    endpoint = (env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or "").strip()
    if endpoint:
        conf[f"{_S3A}endpoint"] = endpoint
        conf[f"{_S3A}path.style.access"] = "true"
    region = (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "").strip()
    if region:
        conf[f"{_S3A}endpoint.region"] = region
    return conf


def odfproj_brings_connector(settings: SparkSettings, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a session of ``settings`` needs odfproj's connector jars: not when its Spark has its own.

    A Spark Connect server (``sc://``) opens the files itself; a Spark whose jars (``$SPARK_HOME/jars``,
    else the installed PySpark's) hold ``hadoop-aws`` (a distribution built with Hadoop's cloud modules)
    has one; and ``ODFPROJ_S3A_CONNECTOR=provided``
    says so for a cluster whose connector is on the class path some other way (EMR, Dataproc).
    """
    env = os.environ if environ is None else environ
    if settings.is_connect or env.get(CONNECTOR_ENV, "").strip().lower() == "provided":
        return False
    return not any(_spark_jars(env).glob("hadoop-aws*.jar"))


def _spark_jars(env: Mapping[str, str]) -> Path:
    """The jars of the Spark a classic session starts: ``$SPARK_HOME/jars`` when set (as PySpark does), else
    the installed PySpark's."""
    home = env.get("SPARK_HOME", "").strip()
    return Path(home) / "jars" if home else pyspark_jars()


def with_data_at(
    settings: SparkSettings, location: str, environ: Mapping[str, str] | None = None
) -> SparkSettings:
    """``settings`` for a session whose data is at ``location`` (a workspace's URL or folder).

    Data on S3: the S3A connector on the class path (unless the Spark brings its own, see
    :func:`odfproj_brings_connector`) and S3A's settings from the environment (:func:`environment_conf`),
    under the target's own ``spark_conf``, which wins, and marked as reading the store in place
    (:func:`reads_in_place`); on a master other than ``local`` (executors on other hosts), with its
    hand-overs between driver and tasks through the store (``engine.exchange``). When odfproj would
    bring the connector but its jars are not cached (a machine ``./dev`` never set up), ``settings``
    unchanged: the remote workspace's cache then fetches what Spark reads, which is slower but works.
    A ``file://`` store (a shared mount) gets the hand-overs only. Anywhere else: ``settings``
    unchanged, so a session of a local workspace never pays for the connector.
    """
    if not is_on_s3(location):
        if location.strip().lower().startswith("file://"):
            return _with_exchange(settings, location)
        return settings
    brings = odfproj_brings_connector(settings, environ)
    if brings and not _connector_cached():
        return settings  # no connector: the workspace's cache fetches what Spark reads (storage.areas)
    conf = {**environment_conf(environ), **settings.conf, IN_PLACE_CONF: "true"}
    return _with_exchange(replace(settings, conf=MappingProxyType(conf), s3a_connector=brings), location)


def _with_exchange(settings: SparkSettings, location: str) -> SparkSettings:
    """``settings`` whose hand-overs between driver and tasks go through the store at ``location``
    (``engine.exchange``) when the executors may be on other hosts: any master but ``local``."""
    if settings.is_local:
        return settings
    conf = {**settings.conf, EXCHANGE_CONF: f"{location.strip().rstrip('/')}/{EXCHANGE_FOLDER}"}
    return replace(settings, conf=MappingProxyType(conf))


def reads_in_place(session: object) -> bool:
    """Whether ``session`` opens a workspace's objects in the store itself (:func:`with_data_at` gave it
    the connector and S3A's settings), rather than the copies a remote workspace's cache fetches."""
    try:
        return session.conf.get(IN_PLACE_CONF, "false") == "true"  # type: ignore[attr-defined]
    except Exception:
        return False


def _connector_cached() -> bool:
    from odfproj.engine.packages import PackageUnavailableError, package, resolved_jars

    try:
        resolved_jars(package("s3a"))
    except PackageUnavailableError:
        return False
    return True


# --- failures, in one line ------------------------------------------------------------------------------

#: The store an S3A message names: ``s3a://BUCKET`` and the key it was at.
_STORE = re.compile(r"s3a://[A-Za-z0-9.\-_]+(/[^\s'`:,;)]*)?")

#: What went wrong, by the words of S3A's and the AWS SDK's exceptions, in the order they are tried.
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "the bucket does not exist",
        re.compile(r"UnknownStoreException|NoSuchBucket|bucket does not exist", re.IGNORECASE),
    ),
    (
        "the store refused the credentials (they come from the environment or a credential provider, "
        "see docs/guide/cluster.md)",
        re.compile(
            r"InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken|ExpiredToken|AccessDenied|"
            r"NoAuthWithAWSException|No AWS Credentials|Unable to load credentials|Status Code: 403|"
            r"\b403 Forbidden",
            re.IGNORECASE,
        ),
    ),
    (
        "the store's endpoint cannot be reached (is AWS_ENDPOINT_URL or spark.hadoop.fs.s3a.endpoint right?)",
        re.compile(
            r"ConnectException|Connection refused|UnknownHostException|Unable to execute HTTP request|"
            r"connect timed out|ConnectTimeoutException|NoRouteToHostException|AWSClientIOException",
            re.IGNORECASE,
        ),
    ),
)

#: The AWS SDK's error code in a message: ``...):NoSuchBucket: The specified bucket...``.
_DETAIL = re.compile(r"\b(NoSuchBucket|InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|ExpiredToken)\b")


def store_failure(chain: Sequence[str]) -> str | None:
    """One line for a failure of the S3A connector, naming the store, from the first lines of a Java
    exception and its causes (outermost first); ``None`` when the failure is not the store's."""
    text = "\n".join(chain)
    if "s3a://" not in text and "software.amazon.awssdk" not in text and "S3A" not in text:
        return None
    for what, pattern in _KINDS:
        if pattern.search(text):
            store = _STORE.search(text)
            detail = _DETAIL.search(text)
            where = store.group(0) if store else "the S3 store"
            return f"{where}: {what}" + (f" ({detail.group(1)})" if detail else "")
    return None
