"""ODF data hashing: the physical and the logical hash of a data slice.

* **Physical hash** - SHA3-256 of the file's bytes. It names a file in content-addressed storage and
  changes with every re-encoding of the same rows. It lives in ``storage.physical_hash``, which moving
  an object needs without the Arrow stack this module loads.
* **Logical hash** - ``arrow0-sha3-256``: the ``RecordDigestV0`` algorithm of the reference crate
  ``arrow-digest`` (versions 35 to 57, which kamu used throughout 2024) computed over SHA3-256. It
  hashes the Arrow *values*, so it is blind to Parquet encodings, row groups, batch sizes and
  dictionary encoding. See ``docs/design/logical-hash.md`` for the byte layout and its quirks.

Both return raw 32-byte digests; wrapping them into a multihash is the caller's job (codes below).

The logical hash is computed without a per-row Python loop: every leaf column of a batch is turned
into the exact byte stream the reference feeds its hasher, using numpy and pyarrow compute kernels,
and that stream is fed to one long-lived ``hashlib`` object per leaf column. Since a hasher fed in
pieces gives the same digest as one fed at once, batches and internal chunks can be cut anywhere.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from odfproj.errors import InvalidValueError

if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
    raise ImportError("odfproj.storage.hashing hashes Arrow buffers as little-endian and needs a LE host")

__all__ = [
    "DIGEST_SIZE",
    "LOGICAL_HASH_CODEC",
    "ArrayDigest",
    "RecordDigest",
    "UnsupportedArrowTypeError",
    "array_digest",
    "default_threads",
    "logical_digest_parquet",
    "logical_digest_table",
    "type_seed",
]

#: multicodec ``arrow0-sha3-256`` (ODF private-use area): the logical hash of a data slice.
LOGICAL_HASH_CODEC = 0x300016
#: Both hashes are SHA3-256 digests.
DIGEST_SIZE = 32

#: Rows per internal chunk: bounds the temporaries built for one update to a few tens of MiB.
_CHUNK_ROWS = 1 << 18
#: Payload bytes per internal chunk of a variable-size column (keeps 32-bit offsets safe, too).
_CHUNK_PAYLOAD = 32 << 20
_INT32_MAX = (1 << 31) - 1
#: Below this many values in a batch, handing columns to worker threads costs more than it saves.
_PARALLEL_MIN_VALUES = 1 << 15


class UnsupportedArrowTypeError(InvalidValueError):
    """A column has an Arrow type that ``arrow-digest`` V0 cannot hash (so no hash would match kamu's)."""


# --------------------------------------------------------------------------------------------------
# Data type seed (arrow-digest ``schema_digest::hash_data_type``)
# --------------------------------------------------------------------------------------------------

_TYPE_INT = 1
_TYPE_FLOAT = 2
_TYPE_BINARY = 3
_TYPE_UTF8 = 4
_TYPE_BOOL = 5
_TYPE_DECIMAL = 6
_TYPE_DATE = 7
_TYPE_TIME = 8
_TYPE_TIMESTAMP = 9
_TYPE_LIST = 11

_TIME_UNIT_IDS = {"s": 0, "ms": 1, "us": 2, "ns": 3}
_DATE_UNIT_DAY = 0
_DATE_UNIT_MILLISECOND = 1

_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")


def _u16(value: int) -> bytes:
    return _U16.pack(value)


def _u64(value: int) -> bytes:
    # Rust's ``x as u64`` wraps negative numbers (a negative decimal scale) modulo 2**64.
    return _U64.pack(value & 0xFFFF_FFFF_FFFF_FFFF)


def _unsupported(data_type: pa.DataType, where: str) -> UnsupportedArrowTypeError:
    column = f" (column {where!r})" if where else ""
    return UnsupportedArrowTypeError(
        f"cannot compute the logical hash: Arrow type {data_type}{column} is not supported by "
        "arrow-digest RecordDigestV0; cast the column to a supported type first"
    )


def _storage_type(data_type: pa.DataType) -> pa.DataType:
    """Hash what arrow-rs would see: extension types are plain storage there, dictionaries are decoded.

    Decoding dictionaries is our extension (the reference rejects them): it makes a dictionary-encoded
    column hash like the plain one, which is what the logical hash promises.
    """
    while True:
        if isinstance(data_type, pa.BaseExtensionType):
            data_type = data_type.storage_type
        elif pa.types.is_dictionary(data_type):
            data_type = data_type.value_type
        else:
            return data_type


def type_seed(data_type: pa.DataType, where: str = "") -> bytes:
    """The bytes a leaf column's hasher starts with: its logical type, not its physical encoding.

    ``string``/``large_string``/``string_view`` share one seed, as do all binaries and all lists,
    because the difference between them is an encoding concern.
    """
    t = _storage_type(data_type)
    if pa.types.is_boolean(t):
        return _u16(_TYPE_BOOL)
    if pa.types.is_integer(t):
        return _u16(_TYPE_INT) + bytes([1 if pa.types.is_signed_integer(t) else 0]) + _u64(t.bit_width)
    if pa.types.is_floating(t):
        return _u16(_TYPE_FLOAT) + _u64(t.bit_width)
    if pa.types.is_timestamp(t):
        zone = b"\x00" if t.tz is None else _u64(len(t.tz.encode())) + t.tz.encode()
        return _u16(_TYPE_TIMESTAMP) + _u16(_TIME_UNIT_IDS[t.unit]) + zone
    if pa.types.is_date32(t):
        return _u16(_TYPE_DATE) + _u64(32) + _u16(_DATE_UNIT_DAY)
    if pa.types.is_date64(t):
        return _u16(_TYPE_DATE) + _u64(64) + _u16(_DATE_UNIT_MILLISECOND)
    if pa.types.is_time(t):
        return _u16(_TYPE_TIME) + _u64(t.bit_width) + _u16(_TIME_UNIT_IDS[t.unit])
    if pa.types.is_decimal128(t) or pa.types.is_decimal256(t):
        return _u16(_TYPE_DECIMAL) + _u64(t.bit_width) + _u64(t.precision) + _u64(t.scale)
    if _is_binary_like(t):
        return _u16(_TYPE_BINARY)
    if _is_string_like(t):
        return _u16(_TYPE_UTF8)
    if _is_list_like(t):
        return _u16(_TYPE_LIST) + type_seed(t.value_type, f"{where}[]")
    raise _unsupported(data_type, where)


def _is_binary_like(t: pa.DataType) -> bool:
    return (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    )


def _is_string_like(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_list_like(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _fixed_width(t: pa.DataType) -> int | None:
    """Byte width of types hashed as their raw little-endian value bytes, else ``None``."""
    kinds = (
        pa.types.is_integer,
        pa.types.is_floating,
        pa.types.is_timestamp,
        pa.types.is_date,
        pa.types.is_time,
        pa.types.is_decimal128,
        pa.types.is_decimal256,
    )
    if any(kind(t) for kind in kinds):
        return t.bit_width // 8
    return None


# --------------------------------------------------------------------------------------------------
# Validity
# --------------------------------------------------------------------------------------------------

#: Per-row validity as a numpy bool array; ``None`` means "no null bitmap" (every row valid).
Validity = np.ndarray | None


def _unpack_bits(buffer: pa.Buffer, bit_offset: int, length: int) -> np.ndarray:
    """LSB-first Arrow bitmap -> one uint8 (0/1) per row, honouring a bit offset from slicing."""
    first = bit_offset // 8
    stop = (bit_offset + length + 7) // 8
    packed = np.frombuffer(buffer, dtype=np.uint8, count=stop - first, offset=first)
    shift = bit_offset % 8
    return np.unpackbits(packed, bitorder="little")[shift : shift + length]


def _own_validity(array: pa.Array) -> Validity:
    """The array's own null bitmap, or ``None`` when it has no nulls (like arrow-rs, which drops
    bitmaps without nulls when it builds ``ArrayData``)."""
    if array.null_count == 0:
        return None
    return _unpack_bits(array.buffers()[0], array.offset, len(array)).view(np.bool_)


def _combine_validity(parent: Validity, own: Validity) -> Validity:
    """Merge a struct's (already combined) validity into a child's, exactly as the reference does.

    arrow-digest 35..57 (``utils::maybe_combine_null_buffers``) keeps one side when only one has
    nulls, ORs the two bitmaps when both do - so a row counts as null only when parent *and* child
    are null - and drops both when a present parent bitmap has no nulls (possible after an OR).
    An AND would be the intuitive rule; we reproduce the reference so our hashes match kamu's.
    """
    if parent is None:
        return own
    if parent.all():
        return None
    if own is None:
        return parent
    return parent | own


def _nulls_or_none(valid: Validity) -> Validity:
    """An all-valid bitmap hashes exactly like no bitmap; normalise so encoders take the fast path."""
    if valid is None or valid.all():
        return None
    return valid


# --------------------------------------------------------------------------------------------------
# Encoders: Arrow values -> the byte stream the reference feeds its hasher
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Encoded:
    """A column chunk's hash input, plus (on request) where each value's bytes end in it.

    ``ends`` is needed only when the chunk is the item array of a list, to find each row's bytes.
    """

    data: Any  # any object exposing the buffer protocol: memoryview, numpy array, pyarrow Buffer
    ends: np.ndarray | None


def _normalize(array: pa.Array) -> pa.Array:
    """Turn encodings arrow-digest would see differently into the plain layout we encode."""
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string_view(array.type):
        array = array.cast(pa.large_string())
    elif pa.types.is_binary_view(array.type):
        array = array.cast(pa.large_binary())
    if isinstance(array.type, pa.BaseExtensionType) or pa.types.is_dictionary(array.type):
        return _normalize(array)
    return array


def _encode(array: pa.Array, valid: Validity, need_ends: bool) -> _Encoded:
    """Dispatch on the (normalised) type; ``valid`` is the effective validity, already combined."""
    t = array.type
    width = _fixed_width(t)
    if width is not None:
        return _encode_fixed(array, width, valid, need_ends)
    if pa.types.is_boolean(t):
        return _encode_bool(array, valid, need_ends)
    if pa.types.is_fixed_size_binary(t):
        return _encode_fixed_binary(array, t.byte_width, valid, need_ends)
    if _is_string_like(t) or _is_binary_like(t):
        return _encode_variable(array, valid, need_ends)
    if _is_list_like(t):
        return _encode_list(array, valid, need_ends)
    raise _unsupported(t, "")


def _value_bytes(array: pa.Array, width: int) -> np.ndarray:
    """The ``len * width`` value bytes of a fixed-width array, skipping its slice offset (no copy)."""
    buffer = array.buffers()[1]
    if buffer is None or len(array) == 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(buffer, dtype=np.uint8, count=len(array) * width, offset=array.offset * width)


def _ends(sizes: np.ndarray) -> np.ndarray:
    return np.cumsum(sizes, dtype=np.int64)


def _rows_with_null_markers(rows: np.ndarray, valid: Validity) -> np.ndarray:
    """Flatten an ``(n, w)`` byte matrix, replacing each null row by a single ``0x00`` byte.

    Why a mask and not a loop: one boolean compress in C replaces ``n`` small hasher updates.
    """
    if valid is None:
        return rows.reshape(-1)
    nulls = ~valid
    rows = rows.copy()
    rows[nulls, 0] = 0
    keep = np.ones(rows.shape, dtype=np.bool_)
    keep[nulls, 1:] = False
    return rows[keep]


def _encode_fixed(array: pa.Array, width: int, valid: Validity, need_ends: bool) -> _Encoded:
    """Ints, floats, dates, times, timestamps, decimals: raw bytes per value, ``0x00`` per null."""
    values = _value_bytes(array, width)
    n = len(array)
    if valid is None:
        ends = np.arange(1, n + 1, dtype=np.int64) * width if need_ends else None
        return _Encoded(values, ends)
    data = _rows_with_null_markers(values.reshape(n, width), valid)
    return _Encoded(data, _ends(np.where(valid, width, 1)) if need_ends else None)


def _encode_bool(array: pa.Array, valid: Validity, need_ends: bool) -> _Encoded:
    """Booleans: one byte per value, ``1`` for false and ``2`` for true, ``0`` for null."""
    n = len(array)
    data = _unpack_bits(array.buffers()[1], array.offset, n) + np.uint8(1) if n else np.empty(0, np.uint8)
    if valid is not None:
        data[~valid] = 0
    return _Encoded(data, np.arange(1, n + 1, dtype=np.int64) if need_ends else None)


def _encode_fixed_binary(array: pa.Array, width: int, valid: Validity, need_ends: bool) -> _Encoded:
    """Fixed-size binary is hashed like ``binary``: ``u64`` length then the bytes, per value."""
    n = len(array)
    rows = np.empty((n, 8 + width), dtype=np.uint8)
    rows[:, :8] = np.frombuffer(_u64(width), dtype=np.uint8)
    rows[:, 8:] = _value_bytes(array, width).reshape(n, width)
    data = _rows_with_null_markers(rows, valid)
    sizes = np.full(n, 8 + width) if valid is None else np.where(valid, 8 + width, 1)
    return _Encoded(data, _ends(sizes) if need_ends else None)


def _offsets(array: pa.Array, large: bool) -> np.ndarray:
    """The ``len + 1`` offsets of a binary/list array as int64, honouring the slice offset."""
    n = len(array)
    buffer = array.buffers()[1]
    if buffer is None:
        return np.zeros(n + 1, dtype=np.int64)
    width = 8 if large else 4
    raw = np.frombuffer(buffer, dtype="<i8" if large else "<i4", count=n + 1, offset=array.offset * width)
    return raw.astype(np.int64, copy=False)


def _encode_variable(array: pa.Array, valid: Validity, need_ends: bool) -> _Encoded:
    """Strings and binaries: ``u64`` byte length then the bytes, per value; ``0x00`` per null."""
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    offsets = _offsets(array, large)
    data = array.buffers()[2]
    if data is None:
        data = pa.py_buffer(b"")
    return _prefix_rows(np.diff(offsets), data, offsets, valid, need_ends)


def _encode_list(array: pa.Array, valid: Validity, need_ends: bool) -> _Encoded:
    """Lists: ``u64`` item count then every item hashed by its own type's rules; ``0x00`` per null.

    The reference recurses row by row with a fresh (parent-less) validity for the items; encoding the
    whole item range at once yields the same bytes because every item's encoding stands alone.
    """
    t = array.type
    n = len(array)
    if pa.types.is_fixed_size_list(t):
        offsets = (np.arange(n + 1, dtype=np.int64) + array.offset) * t.list_size
    else:
        offsets = _offsets(array, pa.types.is_large_list(t))
    first, last = int(offsets[0]), int(offsets[-1])
    items = _normalize(array.values.slice(first, last - first))
    if pa.types.is_struct(items.type):
        raise _unsupported(t, "")
    encoded = _encode(items, _own_validity(items), need_ends=True)
    assert encoded.ends is not None
    item_bounds = np.concatenate([np.zeros(1, dtype=np.int64), encoded.ends])
    return _prefix_rows(np.diff(offsets), encoded.data, item_bounds[offsets - first], valid, need_ends)


def _prefix_rows(
    headers: np.ndarray, payload: Any, bounds: np.ndarray, valid: Validity, need_ends: bool
) -> _Encoded:
    """Row ``i`` -> ``u64 headers[i]`` + ``payload[bounds[i]:bounds[i+1]]``, or ``0x00`` if null.

    Interleaving millions of small pieces is what a per-row loop would do. Instead the headers, the
    row payloads and the two pieces of a null row (``0x00`` and nothing) become the elements of one
    binary array, and a single ``take`` in the order "header 0, payload 0, header 1, ..." writes the
    whole stream as its data buffer in one C++ pass (about 3x faster than an element-wise join).
    """
    n = len(headers)
    payload_sizes = np.diff(bounds)
    kept = int(payload_sizes.sum() if valid is None else payload_sizes[valid].sum())
    large = 8 * n + kept > _INT32_MAX or int(bounds[-1]) > _INT32_MAX
    binary = pa.large_binary() if large else pa.binary()
    offset_type = np.int64 if large else np.int32
    heads = pa.Array.from_buffers(
        binary,
        n,
        [
            None,
            pa.py_buffer(np.arange(0, 8 * n + 1, 8, dtype=offset_type)),
            pa.py_buffer(headers.astype("<u8")),
        ],
    )
    payload_buffer = payload if isinstance(payload, pa.Buffer) else pa.py_buffer(payload)
    bodies = pa.Array.from_buffers(
        binary, n, [None, pa.py_buffer(bounds.astype(offset_type)), payload_buffer]
    )
    pieces = pa.concat_arrays([heads, bodies, pa.array([b"\x00", b""], binary)])
    order = np.empty(2 * n, dtype=np.int32)
    order[0::2] = np.arange(n, dtype=np.int32)
    order[1::2] = np.arange(n, 2 * n, dtype=np.int32)
    if valid is not None:
        nulls = ~valid
        order[0::2][nulls] = 2 * n
        order[1::2][nulls] = 2 * n + 1
    stream = pc.take(pieces, order)
    offsets = _offsets(stream, large)
    data = memoryview(stream.buffers()[2])[int(offsets[0]) : int(offsets[-1])] if n else b""
    return _Encoded(data, offsets[2::2] - offsets[0] if need_ends else None)


def _encode_dictionary(array: pa.DictionaryArray) -> memoryview | bytes:
    """A dictionary column's stream, built by encoding each dictionary entry once and gathering.

    Same bytes as decoding first (so dictionary and plain columns hash alike), but one ``take`` of
    pre-encoded entries replaces decoding plus encoding. Only for columns without struct parents,
    where the indices' own nulls are the effective validity.
    """
    dictionary = _normalize(array.dictionary)
    if pa.types.is_struct(dictionary.type) or pa.types.is_null(dictionary.type):
        raise _unsupported(array.type, "")
    encoded = _encode(dictionary, _nulls_or_none(_own_validity(dictionary)), need_ends=True)
    assert encoded.ends is not None
    size = len(dictionary)
    bounds = np.zeros(size + 2, dtype=np.int64)
    bounds[1:-1] = encoded.ends
    bounds[-1] = bounds[-2] + 1
    data = np.empty(int(bounds[-1]), dtype=np.uint8)
    data[:-1] = np.frombuffer(encoded.data, dtype=np.uint8)
    data[-1] = 0  # entry ``size``: the null marker
    entries = pa.Array.from_buffers(
        pa.large_binary(), size + 1, [None, pa.py_buffer(bounds), pa.py_buffer(data)]
    )
    indices = array.indices.cast(pa.int64())
    if indices.null_count:
        indices = indices.fill_null(size)
    stream = pc.take(entries, indices)
    if not len(stream):
        return b""
    offsets = _offsets(stream, large=True)
    return memoryview(stream.buffers()[2])[int(offsets[0]) : int(offsets[-1])]


def _is_offset_binary(t: pa.DataType) -> bool:
    """Strings and binaries stored as offsets + data (Parquet BYTE_ARRAY), not views or fixed size."""
    return (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def _chunk_bounds(array: pa.Array) -> Iterator[tuple[int, int]]:
    """Row ranges to encode at once: bounded rows and, for strings and binaries, bounded bytes."""
    n = len(array)
    t = array.type
    if not _is_offset_binary(t):
        yield from ((start, min(start + _CHUNK_ROWS, n)) for start in range(0, n, _CHUNK_ROWS))
        return
    offsets = _offsets(array, pa.types.is_large_string(t) or pa.types.is_large_binary(t))
    start = 0
    while start < n:
        by_bytes = int(np.searchsorted(offsets, offsets[start] + _CHUNK_PAYLOAD, side="right")) - 1
        stop = min(max(by_bytes, start + 1), start + _CHUNK_ROWS, n)
        yield start, stop
        start = stop


# --------------------------------------------------------------------------------------------------
# Digests
# --------------------------------------------------------------------------------------------------


class ArrayDigest:
    """One leaf column's hasher (arrow-digest ``ArrayDigestV0``): type seed, then values, in order.

    It is streamable: ``update`` may be called once per batch, and the digest does not depend on how
    the column was cut into batches or chunks.
    """

    def __init__(self, data_type: pa.DataType, where: str = "") -> None:
        if pa.types.is_struct(_storage_type(data_type)):
            raise UnsupportedArrowTypeError(
                "structs are flattened by the record digest and cannot be hashed as one array; "
                "use logical_digest_table on a record batch instead"
            )
        self.data_type = data_type
        self._where = where
        self._seed = type_seed(data_type, where)
        self._hasher = hashlib.sha3_256(self._seed)

    def update(self, array: pa.Array | pa.ChunkedArray, parent_validity: Validity = None) -> None:
        """Hash more rows; ``parent_validity`` is the combined validity of enclosing structs."""
        if isinstance(array, pa.ChunkedArray):
            if parent_validity is not None:
                raise ValueError("a parent validity needs a contiguous array, not a chunked one")
            for chunk in array.chunks:
                self.update(chunk)
            return
        if type_seed(array.type, self._where) != self._seed:
            raise InvalidValueError(f"cannot hash an array of type {array.type} as {self.data_type}")
        if isinstance(array.type, pa.BaseExtensionType):
            array = array.storage
        if pa.types.is_dictionary(array.type) and parent_validity is None:
            for start, stop in _chunk_bounds(array):
                self._hasher.update(_encode_dictionary(array.slice(start, stop - start)))
            return
        array = _normalize(array)
        valid = _nulls_or_none(_combine_validity(parent_validity, _own_validity(array)))
        for start, stop in _chunk_bounds(array):
            chunk_valid = None if valid is None else _nulls_or_none(valid[start:stop])
            self._hasher.update(_encode(array.slice(start, stop - start), chunk_valid, False).data)

    def digest(self) -> bytes:
        """The 32-byte digest so far; further updates remain possible."""
        return self._hasher.digest()


def _walk_fields(fields: Iterable[pa.Field], level: int, prefix: str) -> Iterator[tuple[pa.Field, int, str]]:
    """Fields depth-first, each with its nesting level and dotted path; structs before their children."""
    for field in fields:
        path = f"{prefix}{field.name}"
        yield field, level, path
        t = _storage_type(field.type)
        if pa.types.is_struct(t):
            yield from _walk_fields(t, level + 1, f"{path}.")


def _walk_columns(columns: Sequence[pa.Array], parent: Validity) -> Iterator[tuple[pa.Array, Validity]]:
    """Leaf arrays in the same depth-first order, each with the combined validity of its structs."""
    for column in columns:
        array = column.storage if isinstance(column.type, pa.BaseExtensionType) else column
        if pa.types.is_struct(array.type):
            combined = _combine_validity(parent, _own_validity(array))
            yield from _walk_columns([array.field(i) for i in range(array.type.num_fields)], combined)
        else:
            yield column, parent


class RecordDigest:
    """The record hasher (arrow-digest ``RecordDigestV0``) over a stream of record batches.

    On creation it hashes, for every field depth-first, ``u64 len(name)``, the UTF-8 name and
    ``u64 nesting level``; it keeps one :class:`ArrayDigest` per leaf (non-struct) field; the final
    digest adds the leaf digests in order. Field nullability and metadata do not take part.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._hasher = hashlib.sha3_256()
        self._leaves: list[ArrayDigest] = []
        signature = hashlib.sha3_256()
        for field, level, path in _walk_fields(schema, 0, ""):
            name = field.name.encode()
            self._hasher.update(_u64(len(name)) + name + _u64(level))
            if not pa.types.is_struct(_storage_type(field.type)):
                leaf = ArrayDigest(field.type, path)
                self._leaves.append(leaf)
                signature.update(type_seed(field.type, path))
        self._signature = self._hasher.copy()
        self._signature.update(signature.digest())
        self._accepted = schema

    def jobs(self, batch: pa.RecordBatch) -> list[Callable[[], None]]:
        """One callable per leaf column that feeds this batch to it; callables may run concurrently.

        The biggest columns come first, so that worker threads finish a batch at about the same time.
        """
        self._check_schema(batch.schema)
        work = sorted(
            zip(self._leaves, _walk_columns(batch.columns, None), strict=True),
            key=lambda item: item[1][0].nbytes,
            reverse=True,
        )
        return [
            (lambda leaf=leaf, array=array, valid=valid: leaf.update(array, valid))
            for leaf, (array, valid) in work
        ]

    def update(self, batch: pa.RecordBatch) -> None:
        """Hash one more batch (sequentially); batches must follow the schema given at creation."""
        for job in self.jobs(batch):
            job()

    def digest(self) -> bytes:
        """The 32-byte digest of everything seen so far (non-destructive)."""
        hasher = self._hasher.copy()
        for leaf in self._leaves:
            hasher.update(leaf.digest())
        return hasher.digest()

    def _check_schema(self, schema: pa.Schema) -> None:
        """Batches must hash under the same names, levels and type seeds, or the digest is garbage."""
        if schema.equals(self._accepted) or schema.equals(self.schema):
            return
        if RecordDigest(schema)._signature.digest() != self._signature.digest():
            raise InvalidValueError(
                f"record batch schema does not match the digest's schema:\n{schema}\n!=\n{self.schema}"
            )
        self._accepted = schema  # e.g. a dictionary-encoded variant: remember it, batches repeat it


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------


def array_digest(array: pa.Array | pa.ChunkedArray) -> bytes:
    """``ArrayDigestV0`` of one array (no field name): mostly for tests and cross-checks."""
    digest = ArrayDigest(array.type)
    digest.update(array)
    return digest.digest()


def _batches_and_schema(
    data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch], schema: pa.Schema | None
) -> tuple[Iterator[pa.RecordBatch], pa.Schema]:
    """Accept tables, single batches and batch streams; peek at a stream when no schema is given."""
    if isinstance(data, pa.Table):
        return iter(data.to_batches()), schema or data.schema
    if isinstance(data, pa.RecordBatch):
        return iter([data]), schema or data.schema
    batches = iter(data)
    if schema is not None:
        return batches, schema
    first = next(batches, None)
    if first is None:
        raise InvalidValueError("cannot compute the logical hash of an empty batch stream without a schema")

    def chained() -> Iterator[pa.RecordBatch]:
        yield first
        yield from batches

    return chained(), first.schema


def default_threads() -> int:
    """Worker threads used when the caller does not say: one per CPU (columns hash in parallel)."""
    return max(1, min(os.cpu_count() or 1, 8))


def _feed(digest: RecordDigest, batches: Iterator[pa.RecordBatch], threads: int) -> None:
    """Feed batches, hashing the columns of one batch in worker threads while the next is produced.

    ``hashlib`` and the numpy/pyarrow kernels release the GIL, so columns hash in parallel, and a
    Parquet reader decodes batch ``k+1`` while batch ``k`` is hashed. Each leaf still sees its
    batches in order: a batch's jobs are submitted only after the previous batch's jobs finished.
    """
    if threads <= 1:
        for batch in batches:
            digest.update(batch)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="logical-hash") as pool:
        pending: list[Future[None]] = []
        for batch in batches:
            jobs = digest.jobs(batch)
            _wait(pending)
            if batch.num_rows * len(jobs) < _PARALLEL_MIN_VALUES:
                pending = []
                for job in jobs:
                    job()
            else:
                pending = [pool.submit(job) for job in jobs]
        _wait(pending)


def _wait(futures: list[Future[None]]) -> None:
    for future in futures:
        future.result()


def logical_digest_table(
    data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch],
    schema: pa.Schema | None = None,
    *,
    threads: int | None = None,
) -> bytes:
    """Logical hash (raw 32-byte ``arrow0-sha3-256`` digest) of rows held in memory or streamed.

    ``schema`` is needed only for a batch stream that may be empty. ``threads`` caps the worker
    threads (default: one per CPU, at most 8; ``1`` hashes in the calling thread).
    """
    batches, schema = _batches_and_schema(data, schema)
    digest = RecordDigest(schema)
    _feed(digest, batches, default_threads() if threads is None else threads)
    return digest.digest()


#: The Parquet reader of :func:`logical_digest_parquet` reads column chunks through a buffer this big
#: instead of pre-buffering each row group's chunks whole (pyarrow's default): on a 1M-record, 57 MB data
#: file of bench_remote's, the same digest in 0.59-0.88 s instead of 0.95-1.26 s and 30 MB less peak RSS
#: (Arrow's pool peaked at 26-30 MB instead of 78-83 MB), which is what a large ingest's driver peaks on.
_READ_BUFFER = 1 << 20


def logical_digest_parquet(
    path: str | os.PathLike[str], *, batch_size: int = 1 << 16, threads: int | None = None
) -> bytes:
    """Logical hash of a Parquet file, read batch by batch so memory stays bounded by a row group.

    Like kamu, it hashes the Arrow schema the Parquet reader reports (including the ``ARROW:schema``
    hint a pyarrow writer stores), so a file hashes the same however it was encoded. Text columns
    stored with dictionary encoding are read as dictionaries: hashing those skips one decode pass
    and gives the same digest.
    """
    with pq.ParquetFile(path) as probe:
        metadata = probe.metadata
        dictionary_columns = _dictionary_encoded_columns(probe)
    with pq.ParquetFile(
        path,
        metadata=metadata,
        read_dictionary=dictionary_columns or None,
        buffer_size=_READ_BUFFER,
        pre_buffer=False,
    ) as parquet:
        batches = parquet.iter_batches(batch_size=batch_size, use_threads=False)
        return logical_digest_table(batches, parquet.schema_arrow, threads=threads)


#: At most this many stored bytes per value in a column chunk (dictionary page excluded) means its
#: data pages hold only dictionary indices: bit-packed indices of even a 1 MiB dictionary take about
#: two bytes, while plain pages (4-byte length + text) stay above three even after zstd.
_MAX_INDEX_BYTES_PER_VALUE = 2.5


def _dictionary_encoded_columns(parquet: pq.ParquetFile) -> list[str]:
    """Top-level string/binary columns whose every chunk looks dictionary-encoded throughout.

    Reading a column as dictionary is a win only if the writer did not fall back to plain pages
    (which happens when the dictionary outgrows its page): then pyarrow would have to build a
    dictionary itself, several times slower. pyarrow exposes no per-page encoding stats, so the
    stored bytes per value of the chunk tell the two cases apart. A wrong guess costs time only:
    both ways of reading hash the same.
    """
    metadata = parquet.metadata
    paths = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    selected = []
    for field in parquet.schema_arrow:
        if field.name not in paths or not _is_offset_binary(field.type):
            continue
        index = paths[field.name]
        chunks = [metadata.row_group(g).column(index) for g in range(metadata.num_row_groups)]
        if chunks and all(_looks_dictionary_only(chunk) for chunk in chunks):
            selected.append(field.name)
    return selected


def _looks_dictionary_only(chunk: pq.ColumnChunkMetaData) -> bool:
    if not chunk.has_dictionary_page or chunk.num_values == 0:
        return False
    dictionary_page = chunk.data_page_offset - (chunk.dictionary_page_offset or 0)
    if dictionary_page <= 0:
        return False
    return (chunk.total_compressed_size - dictionary_page) / chunk.num_values <= _MAX_INDEX_BYTES_PER_VALUE
