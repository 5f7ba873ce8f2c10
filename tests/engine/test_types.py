"""Arrow/DDL <-> Spark type mapping (pure Python: pyspark.sql.types needs no JVM)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from odfproj.engine.types import (
    arrow_schema_from_spark,
    arrow_type_from_spark,
    spark_schema_from_arrow,
    spark_schema_from_ddl,
    spark_type_from_arrow,
)
from odfproj.errors import EngineError
from odfproj.odf import data_schema

ROUND_TRIP = [
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(18, 10),
    pa.utf8(),
    pa.binary(),
    pa.date32(),
    pa.timestamp("ms", tz="UTC"),
    pa.list_(pa.field("item", pa.int32())),
    pa.struct([pa.field("a", pa.utf8()), pa.field("b", pa.timestamp("ms", tz="UTC"))]),
    pa.map_(pa.field("key", pa.utf8(), nullable=False), pa.field("value", pa.float64())),
]


@pytest.mark.parametrize("arrow", ROUND_TRIP, ids=str)
def test_round_trip(arrow: pa.DataType) -> None:
    assert arrow_type_from_spark(spark_type_from_arrow(arrow)) == arrow


def test_ddl_to_spark() -> None:
    schema = spark_schema_from_ddl(
        ["id BIGINT NOT NULL", "price DECIMAL(18,10)", "at TIMESTAMP, tags ARRAY<STRING>"]
    )
    assert schema == T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("price", T.DecimalType(18, 10), True),
            T.StructField("at", T.TimestampType(), True),
            T.StructField("tags", T.ArrayType(T.StringType(), True), True),
        ]
    )


def test_widening_and_refusals() -> None:
    assert spark_type_from_arrow(pa.uint8()) == T.ShortType()
    assert spark_type_from_arrow(pa.uint64()) == T.DecimalType(20, 0)
    assert spark_type_from_arrow(pa.binary(16)) == T.BinaryType()
    assert spark_type_from_arrow(pa.timestamp("us")) == T.TimestampNTZType()
    with pytest.raises(EngineError, match="no TIME type"):
        spark_type_from_arrow(pa.time32("ms"))
    with pytest.raises(EngineError, match="38 digits"):
        spark_type_from_arrow(pa.decimal256(40, 2))


def test_timestamp_unit_and_system_columns() -> None:
    spark = T.StructType(
        [
            T.StructField("offset", T.LongType(), False),
            T.StructField("op", T.IntegerType(), False),
            T.StructField("system_time", T.TimestampType(), False),
            T.StructField("event_time", T.TimestampType(), True),
            T.StructField("at", T.TimestampType(), True),
        ]
    )
    arrow = arrow_schema_from_spark(spark, timestamp_unit="us")
    assert list(arrow)[:4] == data_schema.system_fields()
    assert arrow.field("at").type == pa.timestamp("us", tz="UTC")
    assert arrow_schema_from_spark(spark).field("at").type == pa.timestamp("ms", tz="UTC")
    widened = T.StructType([T.StructField("op", T.ShortType(), False)])
    assert arrow_schema_from_spark(widened).field("op").type == pa.int32()
    assert arrow_schema_from_spark(widened, system_columns=False).field("op").type == pa.int16()


def test_schema_round_trip() -> None:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.utf8())])
    assert arrow_schema_from_spark(spark_schema_from_arrow(schema)) == schema
