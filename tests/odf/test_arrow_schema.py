"""``SetDataSchema.schema``: a bare Arrow ``Schema`` flatbuffer, checked against the vector and pyarrow."""

from __future__ import annotations

import base64
import contextlib
import struct

import flatbuffers
import pyarrow as pa
import pytest
import yaml
from flatbuffers import number_types as fb_types
from flatbuffers.table import Table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odfproj.errors import InvalidValueError, SerializationError
from odfproj.odf.arrow_schema import (
    build_schema_table,
    decode_arrow_schema,
    encode_arrow_schema,
    read_schema_table,
)
from odfproj.odf.ddl import parse_ddl_schema
from tests.conftest import VECTORS_DIR

VECTOR_SCHEMA = pa.schema(
    [pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.bool_(), nullable=False)]
)


def _vector_bytes() -> bytes:
    block = yaml.safe_load((VECTORS_DIR / "blocks" / "10-set-data-schema.yaml").read_text())
    event = block["content"]["event"]
    assert event["kind"] == "SetDataSchema"
    return base64.b64decode(event["schema"])


# --- the conformance vector -----------------------------------------------------------------------------


def test_vector_decodes_to_the_pinned_schema() -> None:
    schema = decode_arrow_schema(_vector_bytes())
    assert schema.equals(VECTOR_SCHEMA, check_metadata=True)
    assert str(schema) == "a: int64 not null\nb: bool not null"


def test_vector_is_reproduced_byte_for_byte() -> None:
    assert encode_arrow_schema(VECTOR_SCHEMA) == _vector_bytes()
    assert encode_arrow_schema(decode_arrow_schema(_vector_bytes())) == _vector_bytes()


# --- pyarrow as the independent implementation ----------------------------------------------------------

ALL_TYPES: list[pa.DataType] = [
    pa.null(),
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.utf8(),
    pa.large_utf8(),
    pa.string_view(),
    pa.binary(),
    pa.large_binary(),
    pa.binary_view(),
    pa.binary(16),
    pa.decimal32(5, 2),
    pa.decimal64(15, 3),
    pa.decimal128(18, 10),
    pa.decimal128(38, 0),
    pa.decimal256(50, 3),
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    *(pa.timestamp(unit) for unit in ("s", "ms", "us", "ns")),
    *(pa.timestamp(unit, tz="UTC") for unit in ("s", "ms", "us", "ns")),
    pa.timestamp("us", tz="+07:30"),
    pa.timestamp("ms", tz="America/New_York"),
    *(pa.duration(unit) for unit in ("s", "ms", "us", "ns")),
    pa.month_day_nano_interval(),
    pa.list_(pa.int32()),
    pa.list_(pa.field("element", pa.utf8(), nullable=False)),
    pa.large_list(pa.utf8()),
    pa.list_(pa.int8(), 3),
    pa.list_view(pa.int16()),
    pa.large_list_view(pa.int16()),
    pa.struct([]),
    pa.struct(
        [pa.field("a", pa.int32()), pa.field("b", pa.struct([pa.field("c", pa.utf8(), nullable=False)]))]
    ),
    pa.map_(pa.utf8(), pa.int32()),
    pa.map_(pa.utf8(), pa.field("value", pa.int32(), nullable=False), keys_sorted=True),
    pa.map_(pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.list_(pa.utf8()))),
    pa.union([pa.field("a", pa.int8()), pa.field("b", pa.utf8())], "dense", [3, 7]),
    pa.union([pa.field("a", pa.int8())], "sparse"),
    pa.dictionary(pa.int8(), pa.utf8()),
    pa.dictionary(pa.uint32(), pa.list_(pa.int64()), ordered=True),
    pa.run_end_encoded(pa.int32(), pa.utf8()),
]


def _schema_of(data_type: pa.DataType, nullable: bool = True) -> pa.Schema:
    nullable = nullable or pa.types.is_null(data_type)  # pyarrow forbids a non-nullable null column
    return pa.schema(
        [pa.field("col", data_type, nullable=nullable, metadata={"k": "v"})], metadata={"s": "1"}
    )


def _pyarrow_message_schema_table(schema: pa.Schema) -> tuple[bytes, int]:
    """pyarrow's own encoding: the IPC message's flatbuffer and the position of its Schema table."""
    framed = schema.serialize().to_pybytes()
    assert framed[:4] == b"\xff\xff\xff\xff"
    length = struct.unpack_from("<i", framed, 4)[0]
    message = framed[8 : 8 + length]
    root = struct.unpack_from("<I", message, 0)[0]
    table = Table(message, root)
    assert table.Get(fb_types.Uint8Flags, root + table.Offset(6)) == 1  # MessageHeader.Schema
    return message, table.Indirect(root + table.Offset(8))


def _wrap_in_ipc_message(schema: pa.Schema) -> bytes:
    """Our Schema table inside a framed IPC Message, so that pyarrow can read it."""
    builder = flatbuffers.Builder(1024)
    schema_table = build_schema_table(builder, schema)
    builder.StartObject(5)
    builder.PrependInt16Slot(0, 4, 0)  # MetadataVersion.V5
    builder.PrependUint8Slot(1, 1, 0)  # MessageHeader.Schema
    builder.PrependUOffsetTRelativeSlot(2, schema_table, 0)
    builder.Finish(builder.EndObject())
    body = bytes(builder.Output())
    body += b"\0" * (-len(body) % 8)
    return b"\xff\xff\xff\xff" + struct.pack("<i", len(body)) + body


@pytest.mark.parametrize("data_type", ALL_TYPES, ids=str)
@pytest.mark.parametrize("nullable", [True, False])
def test_round_trip_every_type(data_type: pa.DataType, nullable: bool) -> None:
    schema = _schema_of(data_type, nullable)
    assert decode_arrow_schema(encode_arrow_schema(schema)).equals(schema, check_metadata=True)


@pytest.mark.parametrize("data_type", ALL_TYPES, ids=str)
def test_we_read_what_pyarrow_writes(data_type: pa.DataType) -> None:
    schema = _schema_of(data_type)
    message, position = _pyarrow_message_schema_table(schema)
    assert read_schema_table(message, position).equals(schema, check_metadata=True)


@pytest.mark.parametrize("data_type", ALL_TYPES, ids=str)
def test_pyarrow_reads_what_we_write(data_type: pa.DataType) -> None:
    schema = _schema_of(data_type)
    # Compared with what pyarrow reads back from its own bytes: its reader renames map children.
    expected = pa.ipc.read_schema(schema.serialize())
    ours = pa.ipc.read_schema(pa.py_buffer(_wrap_in_ipc_message(schema)))
    assert ours.equals(expected, check_metadata=True)


def test_metadata_order_and_binary_values_survive() -> None:
    schema = pa.schema(
        [pa.field("a", pa.int32(), metadata={b"z": b"\x00\xff", b"a": b""})],
        metadata={b"second": b"2", b"first": b"1"},
    )
    decoded = decode_arrow_schema(encode_arrow_schema(schema))
    assert decoded.metadata == schema.metadata
    assert list(decoded.metadata) == [b"second", b"first"]
    assert decoded.field("a").metadata == {b"z": b"\x00\xff", b"a": b""}


def test_empty_schema_and_unicode_names() -> None:
    for schema in (pa.schema([]), pa.schema([("Straße 🚀", pa.utf8()), ("", pa.int32())])):
        assert decode_arrow_schema(encode_arrow_schema(schema)).equals(schema, check_metadata=True)


def test_schemas_from_ddl_round_trip() -> None:
    schema = parse_ddl_schema(
        [
            "offset UBIGINT NOT NULL, op UTINYINT NOT NULL, system_time TIMESTAMP(3), event_time TIMESTAMP(3)",
            "id UUID, amount DECIMAL(18,10), tags ARRAY<STRING>, attrs MAP<STRING, STRING>, loc STRUCT<x: DOUBLE>",
        ]
    )
    assert decode_arrow_schema(encode_arrow_schema(schema)).equals(schema, check_metadata=True)


def test_encode_rejects_types_without_a_flatbuffer_form() -> None:
    class Point(pa.ExtensionType):
        def __init__(self) -> None:
            super().__init__(pa.struct([("x", pa.float64())]), "test.point")

        def __arrow_ext_serialize__(self) -> bytes:
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> Point:
            return cls()

    with pytest.raises(InvalidValueError, match="column 'p' has Arrow extension type"):
        encode_arrow_schema(pa.schema([pa.field("p", Point())]))


# --- malformed input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"\x01\x02", b"\xff\xff\xff\xff", b"\x04\x00\x00\x00" + b"\xff" * 4])
def test_garbage_raises_serialization_error(data: bytes) -> None:
    with pytest.raises(SerializationError, match="invalid Arrow schema"):
        decode_arrow_schema(data)


def test_truncated_vector_raises_serialization_error() -> None:
    data = _vector_bytes()
    for cut in range(len(data)):
        with contextlib.suppress(SerializationError):
            decode_arrow_schema(data[:cut])


def _set_type_id(data: bytes, type_id: int) -> bytes:
    """The vector with field 'b''s union type id replaced (byte 47: Field b's ``type_type``)."""
    assert data[47] == 6  # Bool
    return data[:47] + bytes([type_id]) + data[48:]


def test_unknown_type_id() -> None:
    with pytest.raises(SerializationError, match="field 'b' has unknown type id 99"):
        decode_arrow_schema(_set_type_id(_vector_bytes(), 99))


def test_type_table_mismatch() -> None:
    # Claims Int (2) but points at Bool's empty table: bit width 0 is not an integer width.
    with pytest.raises(SerializationError, match="unsupported integer width"):
        decode_arrow_schema(_set_type_id(_vector_bytes(), 2))


def test_big_endian_schema_is_rejected() -> None:
    builder = flatbuffers.Builder(64)
    builder.StartObject(4)
    builder.PrependInt16Slot(0, 1, 0)
    builder.Finish(builder.EndObject())
    with pytest.raises(SerializationError, match="big-endian"):
        decode_arrow_schema(bytes(builder.Output()))


def _shared_children_bomb(levels: int) -> bytes:
    """A schema whose every Field lists the same child Field twice: 2**levels leaves in a few hundred bytes."""
    builder = flatbuffers.Builder(0)
    builder.StartObject(0)
    empty_type = builder.EndObject()
    child = None
    for _ in range(levels):
        children = [child, child] if child is not None else []
        builder.StartVector(4, len(children), 4)
        for offset in children:
            builder.PrependUOffsetTRelative(offset)
        vector = builder.EndVector()
        builder.StartObject(7)
        builder.PrependUint8Slot(2, 13 if children else 1, 0)  # Struct_ or Null
        builder.PrependUOffsetTRelativeSlot(3, empty_type, 0)
        builder.PrependUOffsetTRelativeSlot(5, vector, 0)
        builder.PrependBoolSlot(1, True, False)
        child = builder.EndObject()
    builder.StartVector(4, 1, 4)
    builder.PrependUOffsetTRelative(child)
    fields = builder.EndVector()
    builder.StartObject(4)
    builder.PrependUOffsetTRelativeSlot(1, fields, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def test_shared_field_tables_cannot_blow_up() -> None:
    small = decode_arrow_schema(_shared_children_bomb(3))
    assert small.field(0).type.num_fields == 2
    with pytest.raises(SerializationError, match="more fields than its size allows"):
        decode_arrow_schema(_shared_children_bomb(40))


def test_nesting_depth_is_limited() -> None:
    data_type: pa.DataType = pa.int8()
    for _ in range(70):
        data_type = pa.list_(data_type)
    with pytest.raises(SerializationError, match="nested deeper than 64 levels"):
        decode_arrow_schema(encode_arrow_schema(pa.schema([("deep", data_type)])))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.data())
def test_corrupted_bytes_decode_or_raise_serialization_error(data: st.DataObject) -> None:
    original = bytearray(encode_arrow_schema(_schema_of(data.draw(st.sampled_from(ALL_TYPES)))))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(original) - 1))
        original[position] = data.draw(st.integers(0, 255))
    with contextlib.suppress(SerializationError):
        decode_arrow_schema(bytes(original))


# --- property: generated schemas ------------------------------------------------------------------------

_leaves = st.sampled_from(
    [t for t in ALL_TYPES if not pa.types.is_nested(t) and not pa.types.is_dictionary(t)]
)
_names = st.text(max_size=6)
_metadata = st.one_of(st.none(), st.dictionaries(st.binary(max_size=4), st.binary(max_size=4), max_size=2))


def _make_field(name: str, data_type: pa.DataType, nullable: bool, metadata: dict | None) -> pa.Field:
    return pa.field(name, data_type, nullable or pa.types.is_null(data_type), metadata)


def _field(types: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.Field]:
    return st.builds(_make_field, _names, types, st.booleans(), _metadata)


arrow_types = st.recursive(
    _leaves,
    lambda children: st.one_of(
        _field(children).map(pa.list_),
        _field(children).map(pa.large_list),
        st.tuples(_field(children), st.integers(1, 5)).map(lambda x: pa.list_(*x)),
        st.lists(_field(children), max_size=4).map(pa.struct),
        st.tuples(_leaves.filter(lambda t: not pa.types.is_null(t)), children, st.booleans()).map(
            lambda x: pa.map_(x[0], x[1], keys_sorted=x[2])
        ),
        st.tuples(
            st.sampled_from([pa.int8(), pa.uint16(), pa.int32()]), st.sampled_from([pa.utf8(), pa.int64()])
        ).map(lambda x: pa.dictionary(*x)),
    ),
    max_leaves=10,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_field(arrow_types), max_size=6), _metadata)
def test_generated_schemas_round_trip_and_match_pyarrow(
    fields: list[pa.Field], metadata: dict | None
) -> None:
    schema = pa.schema(fields, metadata=metadata)
    encoded = encode_arrow_schema(schema)
    assert decode_arrow_schema(encoded).equals(schema, check_metadata=True)
    assert encode_arrow_schema(decode_arrow_schema(encoded)) == encoded
    message, position = _pyarrow_message_schema_table(schema)
    assert read_schema_table(message, position).equals(schema, check_metadata=True)
