"""The ODF schema of a ``SetDataSchema`` (ODF 0.37+) and the Arrow schema of the data, both ways.

Since ODF 0.37 a ``SetDataSchema`` may carry the logical ODF ``DataSchema`` instead of (0.38: rather
than) the raw Arrow schema bytes of 0.35; the rest of odfproj works with Arrow. The conversion follows
the reference implementation (kamu-cli ``DataSchema::new_from_arrow`` / ``to_arrow``) so that a schema
written by either side means the same Arrow schema to both:

- a nullable Arrow field is an ``Option`` of its type; every other type is required;
- the logical type is stored without its Arrow layout (kamu strips the encoding attributes before it
  commits, and so does :func:`data_schema_from_arrow`): ``string`` and ``large_string`` are both
  ``String``, read back as ``string`` unless the field's ``arrow.apache.org/bufferEncoding`` extra
  attribute says otherwise; ``Timestamp`` keeps its unit and zone (default ``ms``, ``UTC``);
- list items are named ``item`` and map entries ``key``/``value``, as Arrow names them;
- a geometry column (``binary`` marked by :data:`~odfproj.odf.data_schema.GEOMETRY_ATTRIBUTE` in its
  Arrow field metadata) carries that mark as an ``extra`` attribute, and back.

:func:`arrow_schema_bytes` is the one place a chain's reader gets the Arrow schema of a
``SetDataSchema``, whichever form the block carries.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from odfproj.errors import SerializationError
from odfproj.odf import model
from odfproj.odf.arrow_schema import decode_arrow_schema, encode_arrow_schema
from odfproj.odf.data_schema import GEOMETRY_ATTRIBUTE, GEOMETRY_ENCODING, geometry_field, is_geometry_field

_UNITS = {
    model.TimeUnit.Second: "s",
    model.TimeUnit.Millisecond: "ms",
    model.TimeUnit.Microsecond: "us",
    model.TimeUnit.Nanosecond: "ns",
}
_UNIT_OF = {v: k for k, v in _UNITS.items()}

#: Arrow types with no parameters and the ODF type each is.
_PLAIN: tuple[tuple[pa.DataType, type], ...] = (
    (pa.null(), model.DataTypeNull),
    (pa.bool_(), model.DataTypeBool),
    (pa.int8(), model.DataTypeInt8),
    (pa.int16(), model.DataTypeInt16),
    (pa.int32(), model.DataTypeInt32),
    (pa.int64(), model.DataTypeInt64),
    (pa.uint8(), model.DataTypeUInt8),
    (pa.uint16(), model.DataTypeUInt16),
    (pa.uint32(), model.DataTypeUInt32),
    (pa.uint64(), model.DataTypeUInt64),
    (pa.float16(), model.DataTypeFloat16),
    (pa.float32(), model.DataTypeFloat32),
    (pa.float64(), model.DataTypeFloat64),
    (pa.date32(), model.DataTypeDate),
    (pa.date64(), model.DataTypeDate),
    (pa.string(), model.DataTypeString),
    (pa.large_string(), model.DataTypeString),
    (pa.string_view(), model.DataTypeString),
    (pa.binary(), model.DataTypeBinary),
    (pa.large_binary(), model.DataTypeBinary),
    (pa.binary_view(), model.DataTypeBinary),
)
_ARROW_OF: dict[type, pa.DataType] = {}
for _arrow, _odf in _PLAIN:
    _ARROW_OF.setdefault(_odf, _arrow)

_BUFFER_ENCODING = "arrow.apache.org/bufferEncoding"
_DATE_ENCODING = "arrow.apache.org/dateEncoding"
_DECIMAL_ENCODING = "arrow.apache.org/decimalEncoding"


# ------------------------------------------------------------------------------------------------
# Arrow -> ODF


def data_schema_from_arrow(schema: pa.Schema) -> model.DataSchema:
    """The logical ODF schema of ``schema``, as kamu commits it (no encoding attributes)."""
    return model.DataSchema(fields=tuple(_field_from_arrow(f) for f in schema))


def _field_from_arrow(field: pa.Field) -> model.DataField:
    data_type = _type_from_arrow(field.type, field.nullable, field.name)
    if not is_geometry_field(field):
        return model.DataField(name=field.name, type=data_type)
    extra = model.ExtraAttributes(entries=json.dumps({GEOMETRY_ATTRIBUTE: GEOMETRY_ENCODING}))
    return model.DataField(name=field.name, type=data_type, extra=extra)


def _type_from_arrow(t: pa.DataType, nullable: bool, name: str) -> Any:
    odf = _required_from_arrow(t, name)
    return model.DataTypeOption(inner=odf) if nullable else odf


def _required_from_arrow(t: pa.DataType, name: str) -> Any:
    for arrow, odf in _PLAIN:
        if t == arrow:
            return odf()
    if pa.types.is_timestamp(t):
        return model.DataTypeTimestamp(unit=_UNIT_OF[t.unit], timezone=t.tz)
    if pa.types.is_time(t):
        return model.DataTypeTime(unit=_UNIT_OF[t.unit])
    if pa.types.is_duration(t):
        return model.DataTypeDuration(unit=_UNIT_OF[t.unit])
    if pa.types.is_decimal(t):
        return model.DataTypeDecimal(precision=t.precision, scale=t.scale)
    if pa.types.is_fixed_size_binary(t):
        return model.DataTypeBinary(fixed_length=t.byte_width)
    if pa.types.is_fixed_size_list(t):
        item = _type_from_arrow(t.value_type, t.value_field.nullable, name)
        return model.DataTypeList(item_type=item, fixed_length=t.list_size)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return model.DataTypeList(item_type=_type_from_arrow(t.value_type, t.value_field.nullable, name))
    if pa.types.is_struct(t):
        return model.DataTypeStruct(fields=tuple(_field_from_arrow(t.field(i)) for i in range(t.num_fields)))
    if pa.types.is_map(t):
        return model.DataTypeMap(
            key_type=_required_from_arrow(t.key_type, name),
            value_type=_type_from_arrow(t.item_type, t.item_field.nullable, name),
            keys_sorted=t.keys_sorted,
        )
    raise SerializationError(f"column {name!r}: Arrow type {t} has no ODF schema type")


# ------------------------------------------------------------------------------------------------
# ODF -> Arrow


def data_schema_to_arrow(schema: model.DataSchema) -> pa.Schema:
    """The Arrow schema an ODF schema means (kamu's ``to_arrow`` with default settings)."""
    return pa.schema([_field_to_arrow(f) for f in schema.fields])


def _field_to_arrow(field: model.DataField) -> pa.Field:
    encoding = _encoding(field)
    data_type, nullable = _type_to_arrow(field.type, encoding, field.name)
    arrow = pa.field(field.name, data_type, nullable=nullable)
    if encoding.get(GEOMETRY_ATTRIBUTE) == GEOMETRY_ENCODING and pa.types.is_binary(data_type):
        return geometry_field(arrow)
    return arrow


def _encoding(field: model.DataField) -> dict[str, Any]:
    if field.extra is None or field.extra.entries is None:
        return {}
    try:
        attributes = json.loads(field.extra.entries)
    except ValueError as e:
        raise SerializationError(f"column {field.name!r}: extra attributes are not JSON: {e}") from None
    if not isinstance(attributes, dict):
        raise SerializationError(f"column {field.name!r}: extra attributes are not a JSON object")
    return {
        k: v for k, v in attributes.items() if k.startswith("arrow.apache.org/") or k == GEOMETRY_ATTRIBUTE
    }


def _type_to_arrow(t: Any, encoding: dict[str, Any], name: str) -> tuple[pa.DataType, bool]:
    if isinstance(t, model.DataTypeOption):
        inner, nested = _type_to_arrow(t.inner, encoding, name)
        if nested:
            raise SerializationError(f"column {name!r}: an Option of an Option")
        return inner, True
    return _required_to_arrow(t, encoding, name), False


def _required_to_arrow(t: Any, encoding: dict[str, Any], name: str) -> pa.DataType:
    buffer = encoding.get(_BUFFER_ENCODING) or {}
    kind, width = buffer.get("kind"), buffer.get("offsetBitWidth")
    match t:
        case model.DataTypeString() | model.DataTypeBinary(fixed_length=None):
            is_string = isinstance(t, model.DataTypeString)
            if kind == "View":
                return pa.string_view() if is_string else pa.binary_view()
            if kind in (None, "Contiguous") and width in (None, 32):
                return pa.string() if is_string else pa.binary()
            if kind == "Contiguous" and width == 64:
                return pa.large_string() if is_string else pa.large_binary()
        case model.DataTypeBinary():
            return pa.binary(t.fixed_length)
        case model.DataTypeDate():
            unit = (encoding.get(_DATE_ENCODING) or {}).get("unit", "Day")
            return pa.date64() if unit == "Millisecond" else pa.date32()
        case model.DataTypeDecimal():
            bits = (encoding.get(_DECIMAL_ENCODING) or {}).get("bitWidth", 128)
            build = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}.get(bits)
            if build is not None:
                return build(t.precision, t.scale)
        case model.DataTypeTimestamp():
            return pa.timestamp(_UNITS[t.unit or model.TimeUnit.Millisecond], tz=t.timezone or "UTC")
        case model.DataTypeTime():
            unit = _UNITS[t.unit or model.TimeUnit.Millisecond]
            return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
        case model.DataTypeDuration():
            return pa.duration(_UNITS[t.unit or model.TimeUnit.Millisecond])
        case model.DataTypeList():
            item, nullable = _type_to_arrow(t.item_type, {}, name)
            item_field = pa.field("item", item, nullable=nullable)
            if t.fixed_length is not None:
                return pa.list_(item_field, t.fixed_length)
            if kind == "View":
                return pa.list_view(item_field) if width in (None, 32) else pa.large_list_view(item_field)
            return pa.large_list(item_field) if width == 64 else pa.list_(item_field)
        case model.DataTypeStruct():
            return pa.struct([_field_to_arrow(f) for f in t.fields])
        case model.DataTypeMap():
            key, _ = _type_to_arrow(t.key_type, {}, name)
            value, nullable = _type_to_arrow(t.value_type, {}, name)
            return pa.map_(key, pa.field("value", value, nullable=nullable), keys_sorted=bool(t.keys_sorted))
        case _ if type(t) in _ARROW_OF:
            return _ARROW_OF[type(t)]
    raise SerializationError(f"column {name!r}: no Arrow type for {type(t).__name__} with encoding {buffer}")


# ------------------------------------------------------------------------------------------------
# SetDataSchema


def arrow_schema_bytes(event: model.SetDataSchema) -> bytes:
    """The Arrow schema of ``event`` in Arrow's FlatBuffers form, whichever form the block stores.

    0.35 blocks (and kamu's before 0.38) store the bytes; newer ones the ODF schema, converted here.
    """
    if event.schema is not None:
        return event.schema
    if event.data_schema is None:
        raise SerializationError("SetDataSchema carries neither an Arrow nor an ODF schema")
    return encode_arrow_schema(data_schema_to_arrow(event.data_schema))


def arrow_schema_of(event: model.SetDataSchema) -> pa.Schema:
    """The Arrow schema of ``event`` (see :func:`arrow_schema_bytes`)."""
    if event.schema is None and event.data_schema is not None:
        return data_schema_to_arrow(event.data_schema)
    return decode_arrow_schema(arrow_schema_bytes(event))


def set_data_schema(schema: pa.Schema, *, odf_schema: bool) -> model.SetDataSchema:
    """The ``SetDataSchema`` of ``schema``: the ODF schema (what kamu writes since 0.38) or the Arrow bytes."""
    if odf_schema:
        return model.SetDataSchema(data_schema=data_schema_from_arrow(schema))
    return model.SetDataSchema(schema=encode_arrow_schema(schema))
