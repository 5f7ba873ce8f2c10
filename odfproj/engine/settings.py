"""Which Spark settings a project may choose, and the fixed settings plan's analysis runs with.

A project's ``odfproj.yaml`` comes from whoever wrote the pull request, and Spark settings reach far:
``spark.driver.extraJavaOptions`` runs a shell command on out-of-memory, ``spark.jars`` loads code,
``spark.sql.runSQLOnFiles`` reads any file, a master URL connects out. So a project picks only from
:data:`ALLOWED_SPARK_CONF`: tuning keys whose values are numbers, sizes, durations, booleans or one of
a few words, checked here as well, so that no value can name a class, a file or a host. Everything
else is refused with the key named, when odfproj.yaml is loaded: before any JVM could start.

Even allowed settings never reach the analysis session of ``validate``/``plan``/``watch``
(:func:`analysis_settings`): a fixed local master and odfproj's base conf only, whatever the project
says, because those commands run on untrusted pull requests. The target's master and conf apply to
the commands that run trusted code (``run``, ``apply``, ``ingest``, ``sql``, ``verify --reproduce``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from odfproj.engine.credentials import credential_refusal
from odfproj.engine.s3a import with_data_at
from odfproj.engine.session import SparkSettings
from odfproj.errors import EngineError

__all__ = [
    "ALLOWED_S3A_CONF",
    "ALLOWED_SPARK_CONF",
    "ANALYSIS_MASTER",
    "Refusal",
    "analysis_settings",
    "check_spark_conf",
    "check_spark_master",
    "target_settings",
]

#: The analysis session's master: in-process, whatever the target says.
ANALYSIS_MASTER = "local[2]"


@dataclass(frozen=True)
class _Kind:
    """What values a key takes: a name for the message and a test."""

    name: str
    accepts: Callable[[str], bool]


def _pattern(name: str, regex: str) -> _Kind:
    compiled = re.compile(regex, re.IGNORECASE)
    return _Kind(name, lambda v: compiled.fullmatch(v.strip()) is not None)


def _one_of(*words: str) -> _Kind:
    allowed = frozenset(word.lower() for word in words)
    return _Kind(f"one of {', '.join(words)}", lambda v: v.strip().lower() in allowed)


_BOOL = _pattern("true or false", r"true|false")
_COUNT = _pattern("a whole number", r"[0-9]{1,9}")
_SIZE = _pattern("a size such as 512m or 4g", r"[0-9]{1,15}\s*(b|k|kb|m|mb|g|gb|t|tb)?")
_SIZE_OR_OFF = _pattern("a size such as 10m, or -1 (off)", r"-1|[0-9]{1,15}\s*(b|k|kb|m|mb|g|gb|t|tb)?")
_FRACTION = _pattern("a fraction between 0 and 1", r"0(\.[0-9]+)?|1(\.0+)?|\.[0-9]+")
_FACTOR = _pattern("a positive number", r"[0-9]{1,6}(\.[0-9]+)?")
_DURATION = _pattern("a duration such as 120s or 5min", r"[0-9]{1,9}\s*(us|ms|s|m|min|h|d)?")
#: An S3 endpoint: a host, a port, an http(s) scheme; no path, user or query.
_ENDPOINT = _pattern(
    "an endpoint such as s3.eu-west-1.amazonaws.com or https://minio.internal:9000",
    r"(https?://)?[A-Za-z0-9][A-Za-z0-9.\-]{0,252}(:[0-9]{1,5})?/?",
)
_REGION = _pattern("a region such as eu-west-1", r"[a-z]{2}(-[a-z0-9]+){1,4}")
_ROLE_ARN = _pattern(
    "a role ARN such as arn:aws:iam::123456789012:role/odfproj",
    r"arn:aws[a-z\-]*:iam::[0-9]{12}:role/[\w+=,.@/\-]{1,512}",
)
#: The credential providers S3A may be told to use: Hadoop's own and the AWS SDK's (v2, and the v1
#: names Hadoop maps to them). Each finds credentials somewhere outside the project: the environment,
#: the instance's or container's role, a web identity token (EKS), a profile.
S3A_CREDENTIAL_PROVIDERS = frozenset(
    {
        "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
        "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider",
        "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider",
        "org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider",
        "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
        "software.amazon.awssdk.auth.credentials.SystemPropertyCredentialsProvider",
        "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider",
        "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider",
        "software.amazon.awssdk.auth.credentials.ContainerCredentialsProvider",
        "software.amazon.awssdk.auth.credentials.InstanceProfileCredentialsProvider",
        "com.amazonaws.auth.DefaultAWSCredentialsProviderChain",
        "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
        "com.amazonaws.auth.InstanceProfileCredentialsProvider",
        "com.amazonaws.auth.EC2ContainerCredentialsProviderWrapper",
        "com.amazonaws.auth.WebIdentityTokenCredentialsProvider",
        "com.amazonaws.auth.profile.ProfileCredentialsProvider",
    }
)
_PROVIDERS = _Kind(
    "a comma-separated list of Hadoop's or the AWS SDK's credential providers (docs/guide/spark-settings.md)",
    lambda v: bool(v.strip()) and all(p.strip() in S3A_CREDENTIAL_PROVIDERS for p in v.split(",")),
)
_PARQUET_CODEC = _one_of("none", "uncompressed", "snappy", "gzip", "lzo", "brotli", "lz4", "lz4_raw", "zstd")
_IO_CODEC = _one_of("lz4", "lzf", "snappy", "zstd")

#: Every ``spark_conf`` key a project may set, with the values it may take.
ALLOWED_SPARK_CONF: Mapping[str, _Kind] = MappingProxyType(
    {
        # memory and cores
        "spark.driver.memory": _SIZE,
        "spark.driver.memoryOverhead": _SIZE,
        "spark.driver.cores": _COUNT,
        "spark.driver.maxResultSize": _SIZE,
        "spark.executor.memory": _SIZE,
        "spark.executor.memoryOverhead": _SIZE,
        "spark.executor.cores": _COUNT,
        "spark.executor.instances": _COUNT,
        "spark.cores.max": _COUNT,
        "spark.task.cpus": _COUNT,
        "spark.memory.fraction": _FRACTION,
        "spark.memory.storageFraction": _FRACTION,
        "spark.memory.offHeap.enabled": _BOOL,
        "spark.memory.offHeap.size": _SIZE,
        # parallelism and shuffle
        "spark.default.parallelism": _COUNT,
        "spark.sql.shuffle.partitions": _COUNT,
        "spark.sql.files.maxPartitionBytes": _SIZE,
        "spark.sql.files.openCostInBytes": _SIZE,
        "spark.sql.files.minPartitionNum": _COUNT,
        "spark.shuffle.compress": _BOOL,
        "spark.shuffle.spill.compress": _BOOL,
        "spark.shuffle.file.buffer": _SIZE,
        "spark.reducer.maxSizeInFlight": _SIZE,
        "spark.io.compression.codec": _IO_CODEC,
        "spark.io.compression.zstd.level": _COUNT,
        "spark.kryoserializer.buffer.max": _SIZE,
        "spark.locality.wait": _DURATION,
        "spark.speculation": _BOOL,
        "spark.network.timeout": _DURATION,
        "spark.executor.heartbeatInterval": _DURATION,
        # adaptive execution, joins, the optimizer
        "spark.sql.adaptive.enabled": _BOOL,
        "spark.sql.adaptive.coalescePartitions.enabled": _BOOL,
        "spark.sql.adaptive.coalescePartitions.initialPartitionNum": _COUNT,
        "spark.sql.adaptive.coalescePartitions.minPartitionSize": _SIZE,
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": _SIZE,
        "spark.sql.adaptive.skewJoin.enabled": _BOOL,
        "spark.sql.adaptive.skewJoin.skewedPartitionFactor": _FACTOR,
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": _SIZE,
        "spark.sql.adaptive.localShuffleReader.enabled": _BOOL,
        "spark.sql.autoBroadcastJoinThreshold": _SIZE_OR_OFF,
        "spark.sql.broadcastTimeout": _DURATION,
        "spark.sql.cbo.enabled": _BOOL,
        "spark.sql.inMemoryColumnarStorage.compressed": _BOOL,
        "spark.sql.inMemoryColumnarStorage.batchSize": _COUNT,
        # Parquet and Arrow I/O
        "spark.sql.parquet.compression.codec": _PARQUET_CODEC,
        "spark.sql.parquet.filterPushdown": _BOOL,
        "spark.sql.parquet.enableVectorizedReader": _BOOL,
        "spark.sql.parquet.columnarReaderBatchSize": _COUNT,
        "spark.sql.parquet.aggregatePushdown": _BOOL,
        "spark.sql.execution.arrow.pyspark.enabled": _BOOL,
        "spark.sql.execution.arrow.maxRecordsPerBatch": _COUNT,
        # records per ODF data file (engine.slices): a bigger batch is committed as several blocks
        "spark.sql.files.maxRecordsPerFile": _COUNT,
    }
)

#: S3A's settings a cluster's workspace on S3 needs, by their name after ``fs.s3a.``: a project sets them
#: as ``spark.hadoop.fs.s3a.NAME`` (every bucket) or ``spark.hadoop.fs.s3a.bucket.BUCKET.NAME`` (one
#: bucket), the two spellings Hadoop reads. The endpoint is the one host a project may name: the store
#: its own data is in, reached by the commands that run trusted work (``plan`` never takes a target's
#: settings). The credential provider is one of the providers Hadoop and the AWS SDK ship, by class name,
#: never any other class. Credentials themselves are refused (``engine.credentials``).
ALLOWED_S3A_CONF: Mapping[str, _Kind] = MappingProxyType(
    {
        "endpoint": _ENDPOINT,
        "endpoint.region": _REGION,
        "path.style.access": _BOOL,
        "cross.region.access.enabled": _BOOL,
        "aws.credentials.provider": _PROVIDERS,
        "assumed.role.arn": _ROLE_ARN,
        "assumed.role.session.duration": _DURATION,
        "connection.ssl.enabled": _BOOL,
        "ssl.channel.mode": _one_of("default_jsse", "default_jsse_with_gcm", "default", "openssl"),
        "connection.maximum": _COUNT,
        "connection.timeout": _DURATION,
        "connection.establish.timeout": _DURATION,
        "connection.request.timeout": _DURATION,
        "connection.ttl": _DURATION,
        "attempts.maximum": _COUNT,
        "retry.limit": _COUNT,
        "retry.interval": _DURATION,
        "retry.throttle.limit": _COUNT,
        "retry.throttle.interval": _DURATION,
        "threads.max": _COUNT,
        "max.total.tasks": _COUNT,
        "multipart.size": _SIZE,
        "multipart.threshold": _SIZE,
        "fast.upload.active.blocks": _COUNT,
        "block.size": _SIZE,
        "readahead.range": _SIZE,
        "experimental.input.fadvise": _one_of("normal", "sequential", "random", "adaptive"),
        "encryption.algorithm": _one_of("SSE-S3", "SSE-KMS", "DSSE-KMS"),
        "requester.pays.enabled": _BOOL,
    }
)

_S3A_PREFIX = "spark.hadoop.fs.s3a."
#: The per-bucket part of an S3A key: ``bucket.BUCKET.`` (a DNS-style bucket name).
_S3A_BUCKET = re.compile(r"bucket\.[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]\.")


def _s3a_kind(key: str) -> _Kind | None:
    """The kind of the S3A setting ``key``, ``spark.hadoop.fs.s3a.NAME`` or ``spark.hadoop.fs.s3a.bucket.BUCKET.NAME``
    (a bucket's name may hold dots, so every allowed NAME is tried), or ``None`` when it is not an allowed one."""
    if not key.startswith(_S3A_PREFIX):
        return None
    rest = key[len(_S3A_PREFIX) :]
    if rest in ALLOWED_S3A_CONF:
        return ALLOWED_S3A_CONF[rest]
    for name, kind in ALLOWED_S3A_CONF.items():
        if rest.endswith(f".{name}") and _S3A_BUCKET.fullmatch(rest[: -len(name)]):
            return kind
    return None


#: Master URLs a target may set: in-process (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``), a
#: cluster manager, or a Spark Connect server (``sc://HOST[:PORT]``, with ``/;use_ssl=true`` for TLS; a
#: token comes from ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, never from a file in git). Analysis never uses
#: them; ``local-cluster`` (test-only worker JVMs), other Connect parameters and anything else are refused.
_MASTER = re.compile(
    r"local(\[([1-9][0-9]{0,3}|\*)(,[0-9]{1,3})?\])?"
    r"|spark://[A-Za-z0-9.\-]+:[0-9]{1,5}(,[A-Za-z0-9.\-]+:[0-9]{1,5})*"
    r"|yarn"
    r"|k8s://https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?"
    r"|sc://[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/;use_ssl=(true|false))?"
)


@dataclass(frozen=True)
class Refusal:
    """Why a project's Spark setting is not used: ``setting`` is the key (or ``spark_master``)."""

    setting: str
    reason: str

    def __str__(self) -> str:
        return f"{self.setting}: {self.reason}"


def check_spark_conf(conf: Mapping[str, str]) -> list[Refusal]:
    """Every key of ``conf`` that is not on the allowlist, or whose value is not of the key's kind."""
    refused = []
    for key, value in conf.items():
        credential = credential_refusal(key)
        if credential is not None:  # first: the message must say where credentials go instead
            refused.append(Refusal(key, credential))
            continue
        kind = ALLOWED_SPARK_CONF.get(key) or _s3a_kind(key)
        if kind is None:
            refused.append(
                Refusal(
                    key,
                    "not an allowed Spark setting (a project may set only tuning keys: see "
                    "docs/guide/spark-settings.md)",
                )
            )
        elif not kind.accepts(value):
            refused.append(Refusal(key, f"value {value!r} is not {kind.name}"))
    return refused


def check_spark_master(master: str) -> Refusal | None:
    """A refusal unless ``master`` is a local master or a cluster manager URL."""
    if _MASTER.fullmatch(master.strip()):
        return None
    return Refusal(
        "spark_master",
        f"{master!r} is not allowed (local, local[N], local[*], spark://HOST:PORT, yarn, k8s://URL or "
        "sc://HOST:PORT for Spark Connect)",
    )


def target_settings(
    master: str, conf: Mapping[str, str], *, verbose: bool = False, data_at: str | None = None
) -> SparkSettings:
    """The settings of a target, for commands that run trusted code; refused settings raise EngineError.

    odfproj.yaml is checked when it is loaded; checking again here keeps every other way of building
    a project's session (a library caller) behind the same allowlist. ``data_at`` is where the data the
    session reads and writes lives (the workspace's location): on S3 the session starts with the S3A
    connector and its settings (``engine.s3a.with_data_at``); elsewhere, or not given, it changes nothing.
    """
    refusals = check_spark_conf(conf)
    master_refusal = check_spark_master(master)
    if master_refusal is not None:
        refusals.insert(0, master_refusal)
    if refusals:
        raise EngineError(f"Spark setting refused: {refusals[0]}")
    settings = SparkSettings(master=master.strip(), conf=MappingProxyType(dict(conf)), verbose=verbose)
    return with_data_at(settings, data_at) if data_at else settings


def analysis_settings(*, verbose: bool = False) -> SparkSettings:
    """The sandbox for ``validate``/``plan``/``watch``: local, odfproj's base conf, nothing from the project."""
    return SparkSettings(
        master=ANALYSIS_MASTER,
        app_name="odfproj-analysis",
        conf=MappingProxyType({"spark.sql.catalogImplementation": "in-memory"}),
        verbose=verbose,
    )
