"""A small batch of records written through the driver: one Spark job instead of three.

:mod:`odfproj.engine.slices` numbers and writes records in Spark tasks so that nothing passes through
the driver, whatever the batch's size. For a few hundred records (a derivative's everyday update) that
costs three Spark jobs: the range partitioner's sampling for the distributed sort, the per-partition
count, and the write, with a checkpoint and the Parquet committer's file dance around them. Measured
on bench_dag's 50-dataset re-run they were more than half of every update's time.

Here the ordered records are collected once as Arrow (``limit(n + 1)``: Spark plans the sort and the
limit as one top-k job, and a batch larger than ``n`` is refused, never held), numbered in the driver
and written with pyarrow. The file must be the one the Spark writer gives, to the logical hash: same
columns, Arrow types and values. Spark's Parquet writer stores instants as ``TIMESTAMP_MILLIS`` (the
session's setting), flooring the microseconds; pyarrow's cast truncates toward zero, so instants are
floored here explicitly. Only flat columns of the types in :func:`driver_writable` are written this way;
anything else (nested types, zone-less timestamps) keeps the Spark writer, and so does a codec pyarrow does
not write (:func:`driver_codec`). ``tests/transform/test_write_changes.py``
compares both writers on every type.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["CODEC_KEY", "collect_small", "driver_codec", "driver_writable", "write_driver_slice"]

_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}


def _flat_supported(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return t.tz is not None and _MICROS.get(t.unit) is not None
    return (
        pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_date32(t)
    )


#: Spark's Parquet codecs (``spark.sql.parquet.compression.codec``) by the names pyarrow writes them
#: under; the others (``lzo``, Hadoop's ``lz4``) only Spark's writer writes.
_CODECS = {
    "none": "NONE",
    "uncompressed": "NONE",
    "snappy": "SNAPPY",
    "gzip": "GZIP",
    "brotli": "BROTLI",
    "zstd": "ZSTD",
    "lz4_raw": "LZ4",
}
CODEC_KEY = "spark.sql.parquet.compression.codec"


def driver_codec(frame: DataFrame) -> str | None:
    """The Parquet codec Spark's writer would use for ``frame`` (its session's setting) as pyarrow names
    it, or ``None`` when only Spark writes it: a target's codec holds whichever writer writes the file."""
    codec = frame.sparkSession.conf.get(CODEC_KEY, "snappy")
    return _CODECS.get(str(codec).strip().lower())


def driver_writable(schema: pa.Schema) -> bool:
    """Whether every column of ``schema`` (the file's) is one the driver writes exactly as Spark does."""
    return all(_flat_supported(f.type) for f in schema)


def collect_small(ordered: DataFrame, limit: int) -> pa.Table | None:
    """``ordered``'s rows in their order as Arrow, or ``None`` when there are more than ``limit`` of them.

    One Spark job (a sort under a limit is a top-k); at most ``limit + 1`` rows reach the driver.
    """
    table = ordered.limit(limit + 1).toArrow()
    return None if table.num_rows > limit else table


def _floored_instants(values: pa.ChunkedArray | pa.Array, target: pa.TimestampType) -> pa.Array:
    """Instants in ``target``'s unit, floored as Spark's Parquet writer does (pyarrow's cast truncates)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    micros = values.cast(pa.timestamp("us", tz=target.tz)).cast(pa.int64())
    per_unit = _MICROS[target.unit]
    assert per_unit is not None
    raw = micros.fill_null(0).to_numpy(zero_copy_only=False)
    floored = np.floor_divide(raw, per_unit)
    return pa.array(floored, pa.int64(), mask=micros.is_null().to_numpy(zero_copy_only=False)).cast(target)


def _conformed(values: pa.ChunkedArray, field: pa.Field) -> pa.Array | pa.ChunkedArray:
    if pa.types.is_timestamp(field.type):
        return _floored_instants(values, field.type)
    return values.cast(field.type)


def write_driver_slice(
    table: pa.Table, schema: pa.Schema, offset_column: str, first: int, path: Path, codec: str = "SNAPPY"
) -> int:
    """Write ``table`` (every column of ``schema`` but the offset, in Spark's types) numbered from ``first``.

    The file gets exactly ``schema`` (names, order, types, nullability), compressed with ``codec`` (from
    :func:`driver_codec`); returns the record count.
    """
    count = table.num_rows
    columns = [
        pa.array(np.arange(first, first + count, dtype=np.int64))
        if f.name == offset_column
        else _conformed(table.column(f.name), f)
        for f in schema
    ]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), str(path), compression=codec)
    return count
