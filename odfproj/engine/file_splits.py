"""How Spark cuts one splittable text file into the partitions of a scan, known before Spark reads it.

Numbering records needs each partition's count before any record is written (:mod:`odfproj.engine.slices`).
For a file Spark reads line by line (a CSV without quoted line breaks), the driver can count them
itself on the scan it already makes of the file's bytes (:mod:`odfproj.ingest.csv_lines`), sparing the
count job (about 5 s of the JVM's CPU at 20M rows: bench/README.md, session 26), if it knows where Spark
cuts the file. Spark's rule (``FilePartition.maxSplitBytes`` and ``getFilePartitions``, Spark 3 and 4):

- The split size is ``min(maxPartitionBytes, max(openCostInBytes, bytesPerCore))``, where
  ``bytesPerCore`` is ``(file size + openCostInBytes) / minPartitionNum`` in whole bytes and
  ``minPartitionNum`` is ``spark.sql.files.minPartitionNum``, else ``spark.sql.leafNodeDefaultParallelism``,
  else the context's default parallelism.
- Splits start at every multiple of the split size; packed by size (largest first, next fit), the
  splits of one file each fill a partition of their own, in file order.

This module only predicts. A wrong prediction cannot commit wrong offsets: the written files' offsets
are checked (:class:`odfproj.engine.slices.OffsetsMismatch`) and the batch is numbered again by
counting. Where the rule's inputs are not all known here (Spark Connect, several files, a
``maxPartitionNum`` that may merge partitions), there is no prediction.

:func:`split_bytes_before_start` applies the same rule before the JVM starts, from the settings it will
start with, so that the driver's pass over a large file can run while the JVM starts (a cold command's
JVM takes 4-5 s, the pass over 20M rows 0.9 s). Only for a ``local`` master, whose default parallelism
is its cores (``spark.default.parallelism`` if set); the reader compares it with :func:`split_bytes`
once the session is up and scans again if they differ.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from odfproj.engine.session import is_connect_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["split_bytes", "split_bytes_before_start"]

_MAX_PARTITION_BYTES = "spark.sql.files.maxPartitionBytes"
_OPEN_COST = "spark.sql.files.openCostInBytes"
_MIN_PARTITIONS = "spark.sql.files.minPartitionNum"
_LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"
_MAX_PARTITIONS = "spark.sql.files.maxPartitionNum"
_DEFAULT_PARALLELISM = "spark.default.parallelism"
_DEFAULTS = {_MAX_PARTITION_BYTES: 128 << 20, _OPEN_COST: 4 << 20}
#: Spark's size suffixes (``JavaUtils.byteStringAsBytes``), powers of 1024.
_UNITS = {"": 0, "b": 0} | {unit: 10 * i for i, k in enumerate("kmgtp", 1) for unit in (k, f"{k}b")}
_SIZE = re.compile(r"\s*([0-9]+)\s*([a-z]*)\s*")


def split_bytes(spark: SparkSession, size: int) -> int | None:
    """The bytes of each split (the last may be shorter) of one file of ``size`` bytes, or ``None``."""
    if is_connect_session(spark):
        return None  # no default parallelism to read; the count job stays
    conf = spark.conf
    return _split_size(
        lambda key: conf.get(key, None), lambda: int(spark.sparkContext.defaultParallelism), size
    )


def split_bytes_before_start(master: str, conf: Mapping[str, str], size: int) -> int | None:
    """:func:`split_bytes` as a session of a ``local`` ``master`` with ``conf`` will have it; else ``None``."""
    cores = _local_cores(master)
    if cores is None:
        return None
    return _split_size(conf.get, lambda: int(conf.get(_DEFAULT_PARALLELISM) or cores), size)


def _split_size(
    setting: Callable[[str], str | None], parallelism: Callable[[], int], size: int
) -> int | None:
    """Spark's split size (module docstring) from its settings (``None``: unset) and default parallelism."""
    if setting(_MAX_PARTITIONS):
        return None
    max_bytes = _bytes(setting(_MAX_PARTITION_BYTES), _DEFAULTS[_MAX_PARTITION_BYTES])
    open_cost = _bytes(setting(_OPEN_COST), _DEFAULTS[_OPEN_COST])
    minimum = setting(_MIN_PARTITIONS) or setting(_LEAF_PARALLELISM)
    try:
        partitions = int(minimum) if minimum else parallelism()
    except ValueError:
        return None
    if max_bytes is None or open_cost is None or partitions <= 0:
        return None
    per_core = (size + open_cost) // partitions
    chosen = min(max_bytes, max(open_cost, per_core))
    return chosen if chosen > 0 else None


_LOCAL = re.compile(r"\s*local(?:\[\s*(\*|[0-9]+)\s*(?:,\s*[0-9]+\s*)?\])?\s*")


def _local_cores(master: str) -> int | None:
    """The cores of a ``local``, ``local[N]``, ``local[*]`` or ``local[N, F]`` master; ``None`` for others.

    ``*`` is the cores this process may run on (the machine's where the platform cannot tell, as on
    macOS), which is what the JVM counts unless a container's CPU quota says less (then the prediction
    misses, and the read scans again).
    """
    match = _LOCAL.fullmatch(master)
    if match is None:
        return None
    cores = match.group(1)
    if cores is None:
        return 1
    if cores != "*":
        return int(cores)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _bytes(value: str | None, default: int) -> int | None:
    """A Spark size setting in bytes (``128m``, ``4194304``); ``None`` for what Spark would refuse."""
    if value is None:
        return default
    match = _SIZE.fullmatch(str(value).lower())
    if match is None or match.group(2) not in _UNITS:
        return None
    return int(match.group(1)) << _UNITS[match.group(2)]
