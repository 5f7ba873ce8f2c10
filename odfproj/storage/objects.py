"""Checks that a data or checkpoint file is exactly what a block says it is.

Used twice with the same rules: by ``append`` on the staged copy of a file before it becomes part of
the chain, and by ``verify`` on every stored file. Checking the *staged copy* (not the caller's file)
means what was hashed is what gets stored, even if the caller rewrites its file meanwhile.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.errors import InvalidValueError
from odfproj.odf import model
from odfproj.odf.multiformats import Multihash
from odfproj.storage.errors import IntegrityError
from odfproj.storage.hashing import (
    LOGICAL_HASH_CODEC,
    PHYSICAL_HASH_CODEC,
    logical_digest_parquet,
    physical_digest,
)


def physical_hash(path: Path) -> Multihash:
    """The multihash that names a data or checkpoint file."""
    return Multihash(PHYSICAL_HASH_CODEC, physical_digest(path))


def logical_hash(path: Path) -> Multihash:
    """The ``arrow0-sha3-256`` multihash of a Parquet file's records."""
    return Multihash(LOGICAL_HASH_CODEC, logical_digest_parquet(path))


def _stored_problem(path: Path, size: int, physical: Multihash, what: str, integrity: bool) -> str | None:
    """Presence and size, then (with ``integrity``) the physical hash: what every stored object must match."""
    try:
        actual_size = path.stat().st_size
    except FileNotFoundError:
        return f"missing {what} file"
    if actual_size != size:
        return f"size is {actual_size} bytes, the block says {size}"
    if not integrity:
        return None
    actual = physical_hash(path)
    if actual != physical:
        return f"physical hash is {actual}, the block says {physical}"
    return None


def data_file_problem(path: Path, expected: model.DataSlice, *, integrity: bool = True) -> str | None:
    """The first way ``path`` differs from the ``newData`` slice describing it, or ``None``.

    Without ``integrity`` only presence and size are checked (cheap); with it, both hashes and the
    record count are recomputed.
    """
    problem = _stored_problem(path, expected.size, expected.physical_hash, "data", integrity)
    if problem or not integrity:
        return problem
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
        logical = logical_hash(path)
    except (pa.ArrowException, OSError, InvalidValueError) as e:
        return f"cannot be read as Parquet: {e}"
    if logical != expected.logical_hash:
        return f"logical hash is {logical}, the block says {expected.logical_hash}"
    interval = expected.offset_interval
    expected_rows = interval.end - interval.start + 1
    if rows != expected_rows:
        return (
            f"holds {rows} records, but offsetInterval [{interval.start}, {interval.end}] "
            f"covers {expected_rows}"
        )
    return None


def checkpoint_file_problem(path: Path, expected: model.Checkpoint, *, integrity: bool = True) -> str | None:
    """The first way ``path`` differs from the ``newCheckpoint`` describing it, or ``None``."""
    return _stored_problem(path, expected.size, expected.physical_hash, "checkpoint", integrity)


def read_data_file(path: Path, schema: pa.Schema) -> pa.Table:
    """The records of one data file under ``schema`` (the dataset's data schema now, or some columns of it).

    Schema Evolution only adds columns, so a file written before a later ``SetDataSchema`` lacks the
    newer columns: they read as nulls, as Spark reads them with a declared schema. Only the columns
    ``schema`` names are read from disk.
    """
    try:
        with pq.ParquetFile(path) as parquet:
            present = set(parquet.schema_arrow.names)
            table = parquet.read(columns=[name for name in schema.names if name in present])
    except FileNotFoundError:
        raise IntegrityError(f"{path}: missing data file (odfproj verify checks every file)") from None
    except (pa.ArrowException, OSError) as e:  # truncated, overwritten, corrupt pages
        reason = " ".join(str(e).split())
        raise IntegrityError(
            f"{path}: cannot read this data file ({reason}); odfproj verify --integrity checks every file"
        ) from None
    for field in schema:
        if field.name not in present:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.select(schema.names).cast(schema)
