"""Conversions between Arrow / ODF DDL types and Spark SQL types.

ODF describes data with Arrow schemas (``SetDataSchema``) and DDL (read steps); Spark works with its own
``StructType``. The mapping here is explicit rather than PySpark's internal ``from_arrow_type`` so that the
choices that matter to ODF are visible and tested:

- ``timestamp(any unit, tz)`` <-> ``TimestampType`` (an instant; the session time zone is UTC). Going back,
  the unit is a parameter: ``ms`` by default, because the session writes Parquet as ``TIMESTAMP_MILLIS``,
  so that is what a Spark-produced data file holds. Zone-less timestamps map to ``TimestampNTZType`` and
  back, faithfully; whether they are allowed is the DDL's and the validator's business.
- The system columns (``offset``, ``op``, ``system_time``, ``event_time``) get the types the common data
  schema declares (``odfproj.odf.data_schema``) when converting a Spark schema back to Arrow.
- Unsigned integers widen to the next signed type (``uint64`` to ``DECIMAL(20,0)``), since Spark has none.
- Spark 4.0 has no ``TIME`` type and no 256-bit decimals: those raise ``EngineError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.errors import EngineError
from odfproj.odf import data_schema
from odfproj.odf.data_schema import GEOMETRY_ATTRIBUTE, GEOMETRY_ENCODING, geometry_field, is_geometry_field
from odfproj.odf.ddl import parse_ddl_schema

if TYPE_CHECKING:
    from pyspark.sql import types as T

_SPARK_MAX_DECIMAL_PRECISION = 38


def spark_type_from_arrow(data_type: pa.DataType) -> T.DataType:
    """The Spark type that holds values of an Arrow type without loss."""
    from pyspark.sql import types as T

    t = data_type
    simple: list[tuple[pa.DataType, T.DataType]] = [
        (pa.bool_(), T.BooleanType()),
        (pa.int8(), T.ByteType()),
        (pa.int16(), T.ShortType()),
        (pa.int32(), T.IntegerType()),
        (pa.int64(), T.LongType()),
        (pa.uint8(), T.ShortType()),
        (pa.uint16(), T.IntegerType()),
        (pa.uint32(), T.LongType()),
        (pa.uint64(), T.DecimalType(20, 0)),
        (pa.float16(), T.FloatType()),
        (pa.float32(), T.FloatType()),
        (pa.float64(), T.DoubleType()),
        (pa.utf8(), T.StringType()),
        (pa.large_utf8(), T.StringType()),
        (pa.binary(), T.BinaryType()),
        (pa.large_binary(), T.BinaryType()),
        (pa.date32(), T.DateType()),
        (pa.date64(), T.DateType()),
        (pa.null(), T.NullType()),
    ]
    for arrow, spark in simple:
        if t == arrow:
            return spark
    if pa.types.is_fixed_size_binary(t):
        return T.BinaryType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_decimal(t):
        if t.precision > _SPARK_MAX_DECIMAL_PRECISION:
            raise EngineError(f"Spark cannot hold {t}: its decimals have at most 38 digits")
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return T.ArrayType(spark_type_from_arrow(t.value_type), t.value_field.nullable)
    if pa.types.is_struct(t):
        return T.StructType([spark_field_from_arrow(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return T.MapType(
            spark_type_from_arrow(t.key_type), spark_type_from_arrow(t.item_type), t.item_field.nullable
        )
    if pa.types.is_time(t):
        raise EngineError(f"Spark 4.0 has no TIME type, so it cannot hold {t}; use STRING or TIMESTAMP")
    raise EngineError(f"Spark has no type for Arrow {t}")


def spark_field_from_arrow(field: pa.Field) -> T.StructField:
    """The Spark field of ``field``; a geometry column keeps its mark (``odf.data_schema.GEOMETRY_ATTRIBUTE``)
    as Spark field metadata, which ``engine.gis`` reads to expose it to a GIS query as geometry."""
    from pyspark.sql import types as T

    metadata = {GEOMETRY_ATTRIBUTE: GEOMETRY_ENCODING} if is_geometry_field(field) else None
    return T.StructField(field.name, spark_type_from_arrow(field.type), field.nullable, metadata)


def spark_schema_from_arrow(schema: pa.Schema) -> T.StructType:
    """A ``StructType`` with the same names, order, types and nullability as ``schema``."""
    from pyspark.sql import types as T

    return T.StructType([spark_field_from_arrow(f) for f in schema])


def spark_schema_from_ddl(columns: Sequence[str] | str) -> T.StructType:
    """A read step's ``schema`` (ODF DDL) as a Spark ``StructType``; DDL errors are ``InvalidValueError``."""
    return spark_schema_from_arrow(parse_ddl_schema(columns))


class UnstorableTypeError(EngineError):
    """A Spark type (``variant``, intervals, ...) that ODF data files cannot hold."""


def arrow_type_from_spark(data_type: T.DataType, *, timestamp_unit: str = "ms") -> pa.DataType:
    """The Arrow type Spark writes for ``data_type``; instants become ``timestamp(timestamp_unit, UTC)``."""
    from pyspark.sql import types as T

    t = data_type
    simple: list[tuple[type[T.DataType], pa.DataType]] = [
        (T.BooleanType, pa.bool_()),
        (T.ByteType, pa.int8()),
        (T.ShortType, pa.int16()),
        (T.IntegerType, pa.int32()),
        (T.LongType, pa.int64()),
        (T.FloatType, pa.float32()),
        (T.DoubleType, pa.float64()),
        (T.StringType, pa.utf8()),
        (T.CharType, pa.utf8()),
        (T.VarcharType, pa.utf8()),
        (T.BinaryType, pa.binary()),
        (T.DateType, pa.date32()),
        (T.NullType, pa.null()),
    ]
    for spark, arrow in simple:
        if isinstance(t, spark):
            return arrow
    if isinstance(t, T.TimestampType):
        return pa.timestamp(timestamp_unit, tz="UTC")
    if isinstance(t, T.TimestampNTZType):
        return pa.timestamp(timestamp_unit)
    if isinstance(t, T.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, T.ArrayType):
        item = arrow_type_from_spark(t.elementType, timestamp_unit=timestamp_unit)
        return pa.list_(pa.field("item", item, nullable=t.containsNull))
    if isinstance(t, T.StructType):
        return pa.struct([arrow_field_from_spark(f, timestamp_unit=timestamp_unit) for f in t.fields])
    if isinstance(t, T.MapType):
        key = arrow_type_from_spark(t.keyType, timestamp_unit=timestamp_unit)
        value = arrow_type_from_spark(t.valueType, timestamp_unit=timestamp_unit)
        return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value, t.valueContainsNull))
    raise UnstorableTypeError(f"Spark type {t.simpleString()} has no Arrow equivalent in ODF data")


def arrow_field_from_spark(field: T.StructField, *, timestamp_unit: str = "ms") -> pa.Field:
    """The Arrow field of ``field``; a geometry column's mark in its Spark field metadata is kept."""
    arrow = pa.field(
        field.name, arrow_type_from_spark(field.dataType, timestamp_unit=timestamp_unit), field.nullable
    )
    if (field.metadata or {}).get(GEOMETRY_ATTRIBUTE) == GEOMETRY_ENCODING and pa.types.is_binary(arrow.type):
        return geometry_field(arrow)
    return arrow


def arrow_schema_from_spark(
    schema: T.StructType, *, timestamp_unit: str = "ms", system_columns: bool = True
) -> pa.Schema:
    """The Arrow schema of data Spark produces with ``schema``.

    With ``system_columns`` (the default), top-level ``offset``/``op``/``system_time``/``event_time``
    columns of a compatible Spark type take the common data schema's declared type, so the schema of a
    Spark result compares equal to what ``data_schema.system_fields()`` promises.
    """
    fields = [arrow_field_from_spark(f, timestamp_unit=timestamp_unit) for f in schema.fields]
    if system_columns:
        fields = [_system_override(f) for f in fields]
    return pa.schema(fields)


_DECLARED = {
    data_schema.OFFSET: data_schema.OFFSET_TYPE,
    data_schema.OP: data_schema.OP_TYPE,
    data_schema.SYSTEM_TIME: data_schema.TIMESTAMP_TYPE,
    data_schema.EVENT_TIME: data_schema.TIMESTAMP_TYPE,
}


def _system_override(field: pa.Field) -> pa.Field:
    declared = _DECLARED.get(field.name)
    if declared is None or field.type == declared:
        return field
    compatible = (
        pa.types.is_integer(field.type)
        if pa.types.is_integer(declared)
        else pa.types.is_timestamp(field.type)
    )
    return field.with_type(declared) if compatible else field
