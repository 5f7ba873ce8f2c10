"""Primary keys as a hashable, comparable column set: normalisation, a 64-bit row hash, exact equality.

The key store must hold a million keys without a Python object per key, so keys are reduced to a
64-bit hash kept in sorted numpy arrays. A 64-bit hash collides (rarely, and any hash can be attacked),
so the hash only *finds candidates*: equality is always decided on the actual key values, which the
key store keeps beside the hashes in normalised Arrow form.

Normalisation maps every key column onto one of two physical forms, so that hashing and comparison
need only two code paths and a key compares equal across batches however Parquet typed it:

* ``int64``: integers, booleans, dates, times, timestamps, durations (their integer value) and floats
  (their IEEE bits after mapping ``-0.0`` to ``0.0`` and every NaN to one NaN, so equal numbers are
  equal keys);
* ``large_binary``: strings and binaries (their bytes), and anything else Arrow can cast to a string
  (decimals...), by its text.

Null is a value, as in SQL ``GROUP BY`` / ``IS NOT DISTINCT FROM``: two nulls are the same key.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odfproj.state.errors import StateIndexError

_U64 = np.uint64
_SEED = _U64(0x243F6A8885A308D3)
_NULL_HASH = _U64(0x9E3779B97F4A7C15)
_BYTE_BASE = _U64(0x100000001B3)  # FNV prime, as the polynomial base for bytes
_LEN_SALT = _U64(0xC2B2AE3D27D4EB4F)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads every input bit over the output (uint64 arithmetic wraps)."""
    x = x ^ (x >> _U64(30))
    x = x * _U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> _U64(27))
    x = x * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def normalised_type(t: pa.DataType) -> pa.DataType:
    """The physical form a key column of type ``t`` is normalised to (``int64`` or ``large_binary``)."""
    if pa.types.is_dictionary(t):
        return normalised_type(t.value_type)
    if (
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or _is_integer_like_temporal(t)
        or pa.types.is_floating(t)
    ):
        return pa.int64()
    return pa.large_binary()


def _normalise_column(column: pa.ChunkedArray | pa.Array, name: str) -> pa.Array:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = array.type
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
        t = array.type
    try:
        if pa.types.is_floating(t):
            values = pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False).copy()
            values[values == 0.0] = 0.0  # -0.0 == 0.0 as a key
            values[np.isnan(values)] = np.nan  # one NaN bit pattern
            return pa.array(values.view(np.int64), pa.int64(), mask=array.is_null().to_numpy(False))
        if pa.types.is_boolean(t):
            return pc.cast(pc.cast(array, pa.int8()), pa.int64())
        if pa.types.is_unsigned_integer(t) and t.bit_width == 64:
            values = array.fill_null(0).to_numpy(zero_copy_only=False).view(np.int64)
            return pa.array(values, pa.int64(), mask=array.is_null().to_numpy(False))
        if pa.types.is_integer(t):
            return pc.cast(array, pa.int64())
        if _is_integer_like_temporal(t):
            return pc.cast(array.view(_same_width_int(t)), pa.int64())
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
            return pc.cast(array, pa.large_binary())
        if pa.types.is_large_binary(t):
            return array
        return pc.cast(pc.cast(array, pa.large_string()), pa.large_binary())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise StateIndexError(
            f"key column {name!r} of type {t} cannot be used as a primary key: {e}"
        ) from None


def _is_integer_like_temporal(t: pa.DataType) -> bool:
    return pa.types.is_temporal(t) and not pa.types.is_interval(t)


def _same_width_int(t: pa.DataType) -> pa.DataType:
    return pa.int32() if t.bit_width == 32 else pa.int64()


def normalise_keys(table: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """The key columns of ``table`` in normalised form, one chunk each, named as the key columns."""
    missing = [c for c in key_columns if c not in table.column_names]
    if missing:
        raise StateIndexError(f"the data has no primary key column {', '.join(map(repr, missing))}")
    arrays = [_normalise_column(table.column(c), c) for c in key_columns]
    return pa.Table.from_arrays(arrays, schema=key_schema(key_columns, [a.type for a in arrays]))


def key_schema(key_columns: Sequence[str], types: Sequence[pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(c, t) for c, t in zip(key_columns, types, strict=True)])


def _hash_int64(array: pa.Array) -> np.ndarray:
    values = array.fill_null(0).to_numpy(zero_copy_only=False).view(_U64)
    return _mix(values ^ _LEN_SALT)


def _hash_binary(array: pa.Array) -> np.ndarray:
    """A polynomial hash of each value's bytes, vectorised over the whole column, then mixed.

    Weak against crafted inputs (any mod-2**64 polynomial hash is), which is fine: collisions only
    cost a value comparison, never a wrong answer.
    """
    n = len(array)
    if n == 0:
        return np.zeros(0, _U64)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], np.int64)[array.offset : array.offset + n + 1]
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    result = np.zeros(n, _U64)
    nonempty = np.nonzero(lengths > 0)[0]
    if nonempty.size:
        # Bytes of non-empty values in order; each byte weighted by BASE ** (distance to its value's end).
        segment_lengths = lengths[nonempty]
        segment_starts = starts[nonempty]
        position = np.repeat(segment_starts - np.cumsum(segment_lengths) + segment_lengths, segment_lengths)
        position += np.arange(position.size)
        value_bytes = data[position].astype(_U64)
        distance = np.repeat(ends[nonempty], segment_lengths) - 1 - position
        powers = np.cumprod(np.full(int(segment_lengths.max()), _BYTE_BASE, _U64))
        powers = np.concatenate(([_U64(1)], powers[:-1]))
        weighted = value_bytes * powers[distance]
        firsts = np.concatenate(([0], np.cumsum(segment_lengths)[:-1]))
        result[nonempty] = np.add.reduceat(weighted, firsts)
    return _mix(result ^ (lengths.astype(_U64) * _LEN_SALT))


def hash_keys(keys: pa.Table) -> np.ndarray:
    """A 64-bit hash per row of a normalised key table (uint64); null hashes as its own value."""
    result = np.full(keys.num_rows, _SEED, _U64)
    for column in keys.columns:
        array = column.combine_chunks()
        h = _hash_int64(array) if pa.types.is_int64(array.type) else _hash_binary(array)
        if array.null_count:
            h = np.where(array.is_null().to_numpy(zero_copy_only=False), _NULL_HASH, h)
        result = _mix(result * _U64(31) + h)
    return result


def keys_equal(left: pa.Table, right: pa.Table) -> np.ndarray:
    """Row-wise, null-safe equality of two normalised key tables of the same length (bool array)."""
    equal = np.ones(left.num_rows, bool)
    for a, b in zip(left.columns, right.columns, strict=True):
        same = pc.fill_null(pc.equal(a, b), False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        equal &= pc.or_(same, both_null).to_numpy(zero_copy_only=False)
    return equal
