"""Arrow schemas in Arrow's own FlatBuffers form, as ``SetDataSchema.schema`` stores them.

The bytes are a bare ``Schema`` table of Arrow's ``format/Schema.fbs`` as the buffer's root: no IPC
``Message`` around it, no continuation marker, no size prefix. pyarrow only reads and writes whole IPC
messages, so the table is read and written here directly with the ``flatbuffers`` runtime.

The writer adds tables, vectors and fields in the same order as the reference implementation's
encoder (arrow-rs ``IpcSchemaEncoder``), and omits fields equal to their defaults as it does. The same
schema therefore yields the same bytes, and so the same block hash, in both implementations; the
conformance vector pins this for the types it contains.

The reader treats its input as untrusted: every offset is bounds-checked and nesting is limited, and
anything malformed raises :class:`SerializationError` instead of an ``IndexError`` or a hang.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import TypeVar

import flatbuffers
import pyarrow as pa
from flatbuffers import number_types as fb_types
from flatbuffers.table import Table

from odfproj.errors import InvalidValueError, SerializationError


class TypeId(IntEnum):
    """Members of the ``Type`` union in Schema.fbs (0 is NONE)."""

    NULL = 1
    INT = 2
    FLOATING_POINT = 3
    BINARY = 4
    UTF8 = 5
    BOOL = 6
    DECIMAL = 7
    DATE = 8
    TIME = 9
    TIMESTAMP = 10
    INTERVAL = 11
    LIST = 12
    STRUCT = 13
    UNION = 14
    FIXED_SIZE_BINARY = 15
    FIXED_SIZE_LIST = 16
    MAP = 17
    DURATION = 18
    LARGE_BINARY = 19
    LARGE_UTF8 = 20
    LARGE_LIST = 21
    RUN_END_ENCODED = 22
    BINARY_VIEW = 23
    UTF8_VIEW = 24
    LIST_VIEW = 25
    LARGE_LIST_VIEW = 26


# Enum values of Schema.fbs.
_PRECISIONS = {pa.float16(): 0, pa.float32(): 1, pa.float64(): 2}
_FLOATS = {v: k for k, v in _PRECISIONS.items()}
_TIME_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}
_UNITS_BY_CODE = {v: k for k, v in _TIME_UNITS.items()}
_DATE_DAY, _DATE_MILLISECOND = 0, 1
_INTERVAL_MONTH_DAY_NANO = 2
_UNION_MODES = {"sparse": 0, "dense": 1}
_ENDIANNESS_LITTLE = 0

# Field slots of the tables used here, in Schema.fbs order.
_SCHEMA_FIELDS, _SCHEMA_METADATA, _SCHEMA_SLOTS = 1, 2, 4
_F_NAME, _F_NULLABLE, _F_TYPE_TYPE, _F_TYPE, _F_DICT, _F_CHILDREN, _F_METADATA = range(7)

_MAX_DEPTH = 64

_K = TypeVar("_K")
_V = TypeVar("_V")

_INTEGERS = {
    (8, True): pa.int8(),
    (16, True): pa.int16(),
    (32, True): pa.int32(),
    (64, True): pa.int64(),
    (8, False): pa.uint8(),
    (16, False): pa.uint16(),
    (32, False): pa.uint32(),
    (64, False): pa.uint64(),
}
_INT_SHAPES = {t: shape for shape, t in _INTEGERS.items()}
_DECIMALS = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}

# Types whose table has no fields, keyed by the pyarrow predicate that recognises them.
_EMPTY_TABLE_TYPES = [
    (pa.types.is_null, TypeId.NULL),
    (pa.types.is_boolean, TypeId.BOOL),
    (pa.types.is_binary, TypeId.BINARY),
    (pa.types.is_large_binary, TypeId.LARGE_BINARY),
    (pa.types.is_binary_view, TypeId.BINARY_VIEW),
    (pa.types.is_string, TypeId.UTF8),
    (pa.types.is_large_string, TypeId.LARGE_UTF8),
    (pa.types.is_string_view, TypeId.UTF8_VIEW),
]
_EMPTY_NESTED_TYPES = [
    (pa.types.is_list, TypeId.LIST),
    (pa.types.is_large_list, TypeId.LARGE_LIST),
    (pa.types.is_list_view, TypeId.LIST_VIEW),
    (pa.types.is_large_list_view, TypeId.LARGE_LIST_VIEW),
    (pa.types.is_struct, TypeId.STRUCT),
    (pa.types.is_run_end_encoded, TypeId.RUN_END_ENCODED),
]


# --- encoding -------------------------------------------------------------------------------------------


def encode_arrow_schema(schema: pa.Schema) -> bytes:
    """Serialize ``schema`` as a root ``Schema`` table."""
    builder = flatbuffers.Builder(1024)
    builder.Finish(build_schema_table(builder, schema))
    return bytes(builder.Output())


def build_schema_table(builder: flatbuffers.Builder, schema: pa.Schema) -> int:
    """Write a ``Schema`` table into ``builder`` and return its offset, for embedding it elsewhere."""
    return _Encoder(builder).schema(schema)


class _Encoder:
    def __init__(self, builder: flatbuffers.Builder):
        self.b = builder
        self.next_dictionary_id = 0

    def schema(self, schema: pa.Schema) -> int:
        fields = self.offsets([self.field(f) for f in schema])
        metadata = self.key_values(schema.metadata) if schema.metadata else None
        b = self.b
        b.StartObject(_SCHEMA_SLOTS)
        b.PrependUOffsetTRelativeSlot(_SCHEMA_FIELDS, fields, 0)
        if metadata is not None:
            b.PrependUOffsetTRelativeSlot(_SCHEMA_METADATA, metadata, 0)
        return b.EndObject()

    def field(self, field: pa.Field) -> int:
        metadata = self.key_values(field.metadata) if field.metadata else None
        name = self.b.CreateString(field.name)
        value_type = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        type_id, type_table, children = self.field_type(value_type, field.name)
        dictionary = self.dictionary(field.type) if pa.types.is_dictionary(field.type) else None
        b = self.b
        b.StartObject(7)
        b.PrependUOffsetTRelativeSlot(_F_NAME, name, 0)
        if dictionary is not None:
            b.PrependUOffsetTRelativeSlot(_F_DICT, dictionary, 0)
        b.PrependUint8Slot(_F_TYPE_TYPE, type_id, 0)
        b.PrependBoolSlot(_F_NULLABLE, field.nullable, False)
        b.PrependUOffsetTRelativeSlot(_F_CHILDREN, children, 0)
        b.PrependUOffsetTRelativeSlot(_F_TYPE, type_table, 0)
        if metadata is not None:
            b.PrependUOffsetTRelativeSlot(_F_METADATA, metadata, 0)
        return b.EndObject()

    def field_type(self, t: pa.DataType, name: str) -> tuple[TypeId, int, int]:
        """Return ``(union type, union table, children vector)``.

        Whether the children vector is written before or after the type table differs between types in
        the reference encoder; both orders are kept so the bytes match.
        """
        b = self.b
        if isinstance(t, pa.BaseExtensionType):
            raise InvalidValueError(
                f"column {name!r} has Arrow extension type {t}, which cannot be stored in a schema"
            )
        for is_type, type_id in _EMPTY_TABLE_TYPES:
            if is_type(t):
                table = self.table()
                return type_id, table, self.offsets([])
        for is_type, type_id in _EMPTY_NESTED_TYPES:
            if is_type(t):
                children = [self.field(t.field(i)) for i in range(t.num_fields)]
                table = self.table()
                return type_id, table, self.offsets(children)
        if t in _INT_SHAPES:
            bits, signed = _INT_SHAPES[t]
            children_vector = self.offsets([])
            return (
                TypeId.INT,
                self.table((b.PrependBoolSlot, 1, signed, False), (b.PrependInt32Slot, 0, bits, 0)),
                children_vector,
            )
        if t in _PRECISIONS:
            children_vector = self.offsets([])
            return (
                TypeId.FLOATING_POINT,
                self.table((b.PrependInt16Slot, 0, _PRECISIONS[t], 0)),
                children_vector,
            )
        if pa.types.is_fixed_size_binary(t):
            table = self.table((b.PrependInt32Slot, 0, t.byte_width, 0))
            return TypeId.FIXED_SIZE_BINARY, table, self.offsets([])
        if pa.types.is_date32(t) or pa.types.is_date64(t):
            unit = _DATE_DAY if pa.types.is_date32(t) else _DATE_MILLISECOND
            return TypeId.DATE, self.table((b.PrependInt16Slot, 0, unit, _DATE_MILLISECOND)), self.offsets([])
        if pa.types.is_time(t):
            unit = _TIME_UNITS[t.unit]
            bits = 32 if pa.types.is_time32(t) else 64
            table = self.table((b.PrependInt32Slot, 1, bits, 32), (b.PrependInt16Slot, 0, unit, 1))
            return TypeId.TIME, table, self.offsets([])
        if pa.types.is_timestamp(t):
            # The reference writes the zone string even when empty, then leaves it unreferenced.
            tz = b.CreateString(t.tz or "")
            fields = [(b.PrependInt16Slot, 0, _TIME_UNITS[t.unit], 0)]
            if t.tz:
                fields.append((b.PrependUOffsetTRelativeSlot, 1, tz, 0))
            return TypeId.TIMESTAMP, self.table(*fields), self.offsets([])
        if pa.types.is_interval(t):
            table = self.table((b.PrependInt16Slot, 0, _INTERVAL_MONTH_DAY_NANO, 0))
            return TypeId.INTERVAL, table, self.offsets([])
        if pa.types.is_duration(t):
            table = self.table((b.PrependInt16Slot, 0, _TIME_UNITS[t.unit], 1))
            return TypeId.DURATION, table, self.offsets([])
        if pa.types.is_decimal(t):
            table = self.table(
                (b.PrependInt32Slot, 0, t.precision, 0),
                (b.PrependInt32Slot, 1, t.scale, 0),
                (b.PrependInt32Slot, 2, t.bit_width, 128),
            )
            return TypeId.DECIMAL, table, self.offsets([])
        if pa.types.is_fixed_size_list(t):
            child = self.field(t.value_field)
            table = self.table((b.PrependInt32Slot, 0, t.list_size, 0))
            return TypeId.FIXED_SIZE_LIST, table, self.offsets([child])
        if pa.types.is_map(t):
            child = self.field(t.field(0))
            table = self.table((b.PrependBoolSlot, 0, t.keys_sorted, False))
            return TypeId.MAP, table, self.offsets([child])
        if pa.types.is_union(t):
            children = [self.field(t.field(i)) for i in range(t.num_fields)]
            type_codes = self.int32s(t.type_codes)
            table = self.table(
                (b.PrependInt16Slot, 0, _UNION_MODES[t.mode], 0),
                (b.PrependUOffsetTRelativeSlot, 1, type_codes, 0),
            )
            return TypeId.UNION, table, self.offsets(children)
        raise InvalidValueError(f"column {name!r} has Arrow type {t}, which cannot be stored in a schema")

    def dictionary(self, t: pa.DictionaryType) -> int:
        b = self.b
        bits, signed = _INT_SHAPES[t.index_type]
        index_type = self.table((b.PrependBoolSlot, 1, signed, False), (b.PrependInt32Slot, 0, bits, 0))
        dictionary_id = self.next_dictionary_id
        self.next_dictionary_id += 1
        return self.table(
            (b.PrependInt64Slot, 0, dictionary_id, 0),
            (b.PrependUOffsetTRelativeSlot, 1, index_type, 0),
            (b.PrependBoolSlot, 2, t.ordered, False),
        )

    def table(self, *fields: tuple) -> int:
        """A table of scalar/offset fields, added in the given order as ``(prepend, slot, value, default)``."""
        self.b.StartObject(1 + max((slot for _, slot, _, _ in fields), default=-1))
        for prepend, slot, value, default in fields:
            prepend(slot, value, default)
        return self.b.EndObject()

    def offsets(self, items: list[int]) -> int:
        b = self.b
        b.StartVector(4, len(items), 4)
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        return b.EndVector()

    def int32s(self, items: Iterable[int]) -> int:
        values = list(items)
        b = self.b
        b.StartVector(4, len(values), 4)
        for value in reversed(values):
            b.PrependInt32(value)
        return b.EndVector()

    def key_values(self, metadata: Mapping[bytes, bytes]) -> int:
        b = self.b
        pairs = []
        for key, value in metadata.items():
            key_offset = b.CreateString(key)
            value_offset = b.CreateString(value)
            pairs.append(
                self.table(
                    (b.PrependUOffsetTRelativeSlot, 0, key_offset, 0),
                    (b.PrependUOffsetTRelativeSlot, 1, value_offset, 0),
                )
            )
        return self.offsets(pairs)


# --- decoding -------------------------------------------------------------------------------------------


def decode_arrow_schema(data: bytes) -> pa.Schema:
    """Parse a root ``Schema`` table; raises :class:`SerializationError` if the bytes are not one."""
    data = bytes(data)
    if len(data) < 4:
        raise SerializationError(f"invalid Arrow schema: {len(data)} bytes is too short for a flatbuffer")
    return read_schema_table(data, struct.unpack_from("<I", data, 0)[0])


def read_schema_table(data: bytes, pos: int) -> pa.Schema:
    """Read the ``Schema`` table at ``pos`` of ``data``, e.g. one found inside an IPC ``Message``."""
    decoder = _Decoder(bytes(data))
    try:
        return decoder.schema(_Reader(decoder.data, pos))
    except SerializationError:
        raise
    except (pa.ArrowException, ValueError, TypeError, OverflowError, struct.error) as e:
        # pyarrow's own checks (e.g. a union type code above 127) catch what this reader does not.
        raise SerializationError(f"invalid Arrow schema: {e}") from None


class _Reader:
    """A bounds-checked view of one table, on top of :class:`flatbuffers.table.Table`."""

    __slots__ = ("data", "pos", "table")

    def __init__(self, data: bytes, pos: int):
        _check_range(data, pos, 4)
        vtable = pos - struct.unpack_from("<i", data, pos)[0]
        _check_range(data, vtable, 4)
        vtable_size = struct.unpack_from("<H", data, vtable)[0]
        _check_range(data, vtable, vtable_size)
        self.data = data
        self.pos = pos
        self.table = Table(data, pos)

    def _at(self, slot: int, size: int) -> int | None:
        """Absolute position of a present field of ``size`` bytes, or None when absent."""
        offset = self.table.Offset(4 + 2 * slot)
        if not offset:
            return None
        _check_range(self.data, self.pos + offset, size)
        return self.pos + offset

    def scalar(self, slot: int, flags: type, default: int) -> int:
        at = self._at(slot, flags.bytewidth)
        return default if at is None else self.table.Get(flags, at)

    def _target(self, slot: int) -> int | None:
        at = self._at(slot, 4)
        if at is None:
            return None
        target = self.table.Indirect(at)
        _check_range(self.data, target, 4)
        return target

    def string(self, slot: int) -> bytes | None:
        target = self._target(slot)
        if target is None:
            return None
        length = struct.unpack_from("<I", self.data, target)[0]
        _check_range(self.data, target + 4, length)
        return self.data[target + 4 : target + 4 + length]

    def child(self, slot: int) -> _Reader | None:
        target = self._target(slot)
        return None if target is None else _Reader(self.data, target)

    def _vector(self, slot: int, item_size: int) -> tuple[int, int]:
        target = self._target(slot)
        if target is None:
            return 0, 0
        length = struct.unpack_from("<I", self.data, target)[0]
        _check_range(self.data, target + 4, length * item_size)
        return target + 4, length

    def children(self, slot: int) -> list[_Reader]:
        start, length = self._vector(slot, 4)
        return [_Reader(self.data, self.table.Indirect(start + 4 * i)) for i in range(length)]

    def int32s(self, slot: int) -> list[int] | None:
        if self._target(slot) is None:
            return None
        start, length = self._vector(slot, 4)
        return list(struct.unpack_from(f"<{length}i", self.data, start))


def _check_range(data: bytes, pos: int, size: int) -> None:
    if pos < 0 or size < 0 or pos + size > len(data):
        raise SerializationError(
            f"invalid Arrow schema: offset {pos} (+{size} bytes) is outside the {len(data)}-byte buffer"
        )


class _Decoder:
    def __init__(self, data: bytes):
        self.data = data
        # Offsets only point forward, so there are no cycles, but a crafted buffer can still list the
        # same Field table many times at every level and expand exponentially. Encoders never share
        # Field tables, so a real schema cannot hold more fields than the buffer has 4-byte words.
        self.fields_left = len(data) // 4

    def schema(self, table: _Reader) -> pa.Schema:
        if table.scalar(0, fb_types.Int16Flags, _ENDIANNESS_LITTLE) != _ENDIANNESS_LITTLE:
            raise SerializationError("invalid Arrow schema: big-endian schemas are not supported")
        fields = [self.field(f, 1) for f in table.children(_SCHEMA_FIELDS)]
        return pa.schema(fields, metadata=self.key_values(table))

    def field(self, table: _Reader, depth: int) -> pa.Field:
        if depth > _MAX_DEPTH:
            raise SerializationError(f"invalid Arrow schema: types nested deeper than {_MAX_DEPTH} levels")
        self.fields_left -= 1
        if self.fields_left < 0:
            raise SerializationError("invalid Arrow schema: it lists more fields than its size allows")
        name = (table.string(_F_NAME) or b"").decode("utf-8")
        children = [self.field(c, depth + 1) for c in table.children(_F_CHILDREN)]
        data_type = self.field_type(table, name, children)
        dictionary = table.child(_F_DICT)
        if dictionary is not None:
            index = dictionary.child(1)
            index_type = self.integer(index, name) if index is not None else pa.int32()
            ordered = bool(dictionary.scalar(2, fb_types.BoolFlags, False))
            data_type = pa.dictionary(index_type, data_type, ordered)
        nullable = bool(table.scalar(_F_NULLABLE, fb_types.BoolFlags, False))
        return pa.field(name, data_type, nullable=nullable, metadata=self.key_values(table, _F_METADATA))

    def field_type(self, field: _Reader, name: str, children: list[pa.Field]) -> pa.DataType:
        raw_id = field.scalar(_F_TYPE_TYPE, fb_types.Uint8Flags, 0)
        try:
            type_id = TypeId(raw_id)
        except ValueError:
            raise SerializationError(
                f"invalid Arrow schema: field {name!r} has unknown type id {raw_id}"
            ) from None
        t = field.child(_F_TYPE)
        if t is None:
            raise SerializationError(f"invalid Arrow schema: field {name!r} has no type table")

        def scalar16(slot: int, default: int) -> int:
            return t.scalar(slot, fb_types.Int16Flags, default)

        def scalar32(slot: int, default: int) -> int:
            return t.scalar(slot, fb_types.Int32Flags, default)

        def only_child() -> pa.Field:
            if len(children) != 1:
                raise SerializationError(
                    f"invalid Arrow schema: {type_id.name.lower()} field {name!r} needs exactly one child, "
                    f"has {len(children)}"
                )
            return children[0]

        match type_id:
            case TypeId.NULL:
                return pa.null()
            case TypeId.BOOL:
                return pa.bool_()
            case TypeId.BINARY:
                return pa.binary()
            case TypeId.LARGE_BINARY:
                return pa.large_binary()
            case TypeId.BINARY_VIEW:
                return pa.binary_view()
            case TypeId.UTF8:
                return pa.utf8()
            case TypeId.LARGE_UTF8:
                return pa.large_utf8()
            case TypeId.UTF8_VIEW:
                return pa.string_view()
            case TypeId.INT:
                return self.integer(t, name)
            case TypeId.FLOATING_POINT:
                return _lookup(_FLOATS, scalar16(0, 0), "floating point precision", name)
            case TypeId.DECIMAL:
                factory = _lookup(_DECIMALS, scalar32(2, 128), "decimal bit width", name)
                return factory(scalar32(0, 0), scalar32(1, 0))
            case TypeId.DATE:
                unit = scalar16(0, _DATE_MILLISECOND)
                return _lookup(
                    {_DATE_DAY: pa.date32(), _DATE_MILLISECOND: pa.date64()}, unit, "date unit", name
                )
            case TypeId.TIME:
                unit = _lookup(_UNITS_BY_CODE, scalar16(0, 1), "time unit", name)
                bits = scalar32(1, 32)
                if (bits, unit) in ((32, "s"), (32, "ms")):
                    return pa.time32(unit)
                if (bits, unit) in ((64, "us"), (64, "ns")):
                    return pa.time64(unit)
                raise SerializationError(
                    f"invalid Arrow schema: field {name!r} has a {bits}-bit time in {unit}"
                )
            case TypeId.TIMESTAMP:
                unit = _lookup(_UNITS_BY_CODE, scalar16(0, 0), "time unit", name)
                tz = t.string(1)
                return pa.timestamp(unit, tz=tz.decode("utf-8") if tz else None)
            case TypeId.DURATION:
                return pa.duration(_lookup(_UNITS_BY_CODE, scalar16(0, 1), "time unit", name))
            case TypeId.INTERVAL:
                if scalar16(0, 0) != _INTERVAL_MONTH_DAY_NANO:
                    raise SerializationError(
                        f"invalid Arrow schema: field {name!r} uses an interval unit pyarrow does not support"
                    )
                return pa.month_day_nano_interval()
            case TypeId.FIXED_SIZE_BINARY:
                return pa.binary(scalar32(0, 0))
            case TypeId.LIST:
                return pa.list_(only_child())
            case TypeId.LARGE_LIST:
                return pa.large_list(only_child())
            case TypeId.LIST_VIEW:
                return pa.list_view(only_child())
            case TypeId.LARGE_LIST_VIEW:
                return pa.large_list_view(only_child())
            case TypeId.FIXED_SIZE_LIST:
                return pa.list_(only_child(), scalar32(0, 0))
            case TypeId.STRUCT:
                return pa.struct(children)
            case TypeId.MAP:
                entries = only_child()
                if entries.type.num_fields != 2 or not pa.types.is_struct(entries.type):
                    raise SerializationError(
                        f"invalid Arrow schema: map field {name!r} needs a struct<key, value> child"
                    )
                keys_sorted = bool(t.scalar(0, fb_types.BoolFlags, False))
                return pa.map_(entries.type.field(0), entries.type.field(1), keys_sorted)
            case TypeId.UNION:
                mode = "dense" if scalar16(0, 0) == _UNION_MODES["dense"] else "sparse"
                return pa.union(children, mode, t.int32s(1))
            case TypeId.RUN_END_ENCODED:
                if len(children) != 2:
                    raise SerializationError(
                        f"invalid Arrow schema: run-end encoded field {name!r} needs two children"
                    )
                return pa.run_end_encoded(children[0].type, children[1].type)
        raise AssertionError(type_id)  # pragma: no cover - every TypeId is handled above

    def integer(self, table: _Reader, name: str) -> pa.DataType:
        bits = table.scalar(0, fb_types.Int32Flags, 0)
        signed = bool(table.scalar(1, fb_types.BoolFlags, False))
        return _lookup(_INTEGERS, (bits, signed), "integer width", name)

    def key_values(self, table: _Reader, slot: int = _SCHEMA_METADATA) -> dict[bytes, bytes] | None:
        pairs = table.children(slot)
        if not pairs:
            return None
        return {(kv.string(0) or b""): (kv.string(1) or b"") for kv in pairs}


def _lookup(table: Mapping[_K, _V], key: _K, what: str, name: str) -> _V:
    try:
        return table[key]
    except KeyError:
        raise SerializationError(
            f"invalid Arrow schema: field {name!r} has unsupported {what} {key}"
        ) from None
