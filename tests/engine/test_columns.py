"""engine/columns.py: column references, literals and casts with fewer py4j round trips, the same
expressions as PySpark's own."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import py4j.clientserver
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from odfproj.engine import columns
from odfproj.engine.columns import cast, column, literal

pytestmark = pytest.mark.spark

ATOMIC = [
    T.BooleanType(),
    T.ByteType(),
    T.ShortType(),
    T.IntegerType(),
    T.LongType(),
    T.FloatType(),
    T.DoubleType(),
    T.DecimalType(9, 2),
    T.DecimalType(38, 10),
    T.StringType(),
    T.BinaryType(),
    T.DateType(),
    T.TimestampType(),
    T.TimestampNTZType(),
]


def _round_trips(build) -> int:
    """How many commands ``build()`` sends to the JVM."""
    sent = 0
    original = py4j.clientserver.ClientServerConnection.send_command

    def counting(self, command):
        nonlocal sent
        sent += 1
        return original(self, command)

    py4j.clientserver.ClientServerConnection.send_command = counting
    try:
        build()
    finally:
        py4j.clientserver.ClientServerConnection.send_command = original
    return sent


def test_column_and_literal_are_pysparks_own_expressions(spark) -> None:
    for name in ("a", "a.b", "we`ird", "x y"):
        quoted = "`" + name.replace("`", "``") + "`"
        assert str(column(name)) == str(F.col(quoted))
    for value in (True, 0, -7, 2**40, 1.5, "text", ""):
        assert str(literal(value)) == str(F.lit(value))
    assert str(literal(None)) == str(F.lit(None))  # not a scalar it passes itself: PySpark's lit


def test_a_column_reference_costs_one_round_trip_and_none_again(spark) -> None:
    column("warm")  # the method handle is looked up once per JVM
    assert _round_trips(lambda: column("first time")) == 1
    assert _round_trips(lambda: column("first time")) == 0  # kept
    assert _round_trips(lambda: literal(1)) == 1
    assert _round_trips(lambda: F.col("a")) >= 3  # what it saves


def test_a_kept_reference_works_in_any_session(spark) -> None:
    reference = column("v")
    for session in (spark, spark.newSession()):
        frame = session.range(3).selectExpr("id * 2 AS v")
        assert [r.v for r in frame.select(column("v")).collect()] == [0, 2, 4]
        assert column("v") is reference


def test_stale_handles_and_references_are_made_again(spark) -> None:
    kept = column("a")
    jvm, method = columns._METHODS["col"]
    columns._METHODS["col"] = (object(), method)  # as after a new SparkContext
    columns._COLUMNS["a"] = (object(), kept)
    fresh = column("a")
    assert fresh is not kept
    assert str(fresh) == str(F.col("`a`"))
    assert columns._METHODS["col"][0] is jvm


@pytest.mark.parametrize("data_type", ATOMIC, ids=lambda t: t.simpleString())
def test_a_cast_by_name_gives_the_same_type_and_values(spark, data_type) -> None:
    values = {
        "s": "12.5",
        "n": 1,
        "t": datetime(2026, 3, 1, 12, 30, tzinfo=UTC),
        "d": date(2026, 3, 1),
        "x": Decimal("3.25"),
    }
    frame = spark.createDataFrame([values]).select(
        F.col("n").cast("boolean").alias("b"), *[F.col(c) for c in values]
    )
    if isinstance(data_type, T.IntegralType):
        source = "n"
    elif isinstance(data_type, (T.NumericType, T.StringType, T.BinaryType)):
        source = "s"
    else:
        source = {T.DateType: "d", T.BooleanType: "b"}.get(type(data_type), "t")
    ours = frame.select(cast(column(source), data_type).alias("v"))
    theirs = frame.select(F.col(source).cast(data_type).alias("v"))
    assert ours.schema == theirs.schema
    assert ours.schema["v"].dataType == data_type
    assert ours.collect() == theirs.collect()


def test_a_timestamp_cast_ignores_the_sessions_default_timestamp_type(spark) -> None:
    spark.conf.set("spark.sql.timestampType", "TIMESTAMP_NTZ")  # how Spark reads the name "timestamp"
    try:
        frame = spark.range(1).select(F.lit("2026-03-01 12:00:00").alias("s"))
        assert frame.select(F.col("s").cast("timestamp")).schema[0].dataType == T.TimestampNTZType()
        assert frame.select(cast(column("s"), T.TimestampType())).schema[0].dataType == T.TimestampType()
    finally:
        spark.conf.unset("spark.sql.timestampType")


def test_nested_and_collated_types_keep_their_objects(spark) -> None:
    nested = T.StructType([T.StructField("a b", T.IntegerType()), T.StructField("c:d", T.StringType())])
    frame = spark.range(1).select(F.struct(F.lit(1).alias("x"), F.lit("y").alias("z")).alias("s"))
    assert frame.select(cast(column("s"), nested)).schema[0].dataType == nested
    collated = T.StringType("UTF8_LCASE")
    text = spark.range(1).select(F.lit("A").alias("s"))
    assert text.select(cast(column("s"), collated)).schema[0].dataType == collated
