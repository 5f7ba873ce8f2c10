"""Column references, literals and casts built with one py4j round trip, or none.

odfproj builds its own plans out of thousands of column references (every select, grouping and sort
names its columns), and PySpark's ``functions.col`` costs three round trips to the driver JVM on a
classic session: a lookup of the ``functions`` class, a lookup of its method, then the call. A cast to a
``DataType`` costs more (the active session is looked up, then the type is parsed from JSON). On the
50-dataset re-run of bench_dag these lookups were more than a third of the 52,000 round trips, each
paid by the Python side and by the JVM's py4j thread (bench/README.md, "Session 14").

Here the method handles are looked up once per JVM and kept, and so are the column references
themselves (no round trip at all for a name seen before); a cast to an atomic type passes its SQL
name. The columns are PySpark's own, the same expressions as ``functions.col``/``lit`` and
``Column.cast`` build. On Spark Connect (no JVM here) PySpark's functions are used as they are.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

__all__ = ["cast", "column", "literal", "quoted_name"]

#: ``org.apache.spark.sql.functions`` methods by name, each with the JVM view it was looked up in: a new
#: SparkContext (a new gateway) makes them stale, and they are looked up again.
_METHODS: dict[str, tuple[Any, Any]] = {}
_LOCK = threading.Lock()

#: Column references by name, each with the JVM view it was made in. A reference is an immutable
#: expression, valid in any session of its JVM and in any thread, and the same few dozen names come back
#: in every select, grouping and sort. At most ``_COLUMNS_KEPT``, forgotten all at once when full.
_COLUMNS: dict[str, tuple[Any, Column]] = {}
_COLUMNS_KEPT = 4096


def _classic_jvm() -> Any | None:
    """The JVM view of the active classic SparkContext, or ``None`` on Spark Connect (or without one)."""
    from pyspark import SparkContext
    from pyspark.sql.utils import is_remote

    context = SparkContext._active_spark_context
    if is_remote() or context is None:
        return None
    return context._jvm


def _function(jvm: Any, name: str) -> Any:
    """The JVM method ``functions.<name>``, looked up once per JVM view."""
    known = _METHODS.get(name)
    if known is not None and known[0] is jvm:
        return known[1]
    with _LOCK:
        method = getattr(getattr(jvm, "org.apache.spark.sql.functions"), name)
        _METHODS[name] = (jvm, method)
    return method


def quoted_name(name: str) -> str:
    """A column, view or dataset name as a Spark SQL identifier: in backticks, inner backticks doubled,
    so that dots and backticks in it stay literal."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """A reference to the top-level column ``name``, quoted so dots and backticks in it stay literal."""
    quoted = quoted_name(name)
    jvm = _classic_jvm()
    if jvm is None:
        from pyspark.sql import functions as F

        return F.col(quoted)
    known = _COLUMNS.get(name)
    if known is not None and known[0] is jvm:
        return known[1]
    from pyspark.sql.classic.column import Column

    made = Column(_function(jvm, "col")(quoted))
    with _LOCK:
        if len(_COLUMNS) >= _COLUMNS_KEPT:
            _COLUMNS.clear()
        _COLUMNS[name] = (jvm, made)
    return made


def literal(value: bool | int | float | str) -> Column:
    """The literal ``value`` (a Python scalar: Spark types it as ``functions.lit`` does)."""
    jvm = _classic_jvm()
    if jvm is None or type(value) not in (bool, int, float, str):
        from pyspark.sql import functions as F

        return F.lit(value)
    from pyspark.sql.classic.column import Column

    return Column(_function(jvm, "lit")(value))


def cast(value: Column, data_type: DataType) -> Column:
    """``value`` cast to ``data_type``; a common atomic type by its SQL name (one round trip, no JSON).

    Only names that mean one type whatever the session's settings: ``timestamp`` alone would follow
    ``spark.sql.timestampType``, and a nested type's text would need its field names quoted, so those
    go as ``DataType`` objects.
    """
    name = _sql_name(data_type)
    return value.cast(data_type if name is None else name)


def _sql_name(data_type: DataType) -> str | None:
    from pyspark.sql import types as T

    if isinstance(data_type, T.TimestampType):
        return "timestamp_ltz"
    if isinstance(data_type, T.TimestampNTZType):
        return "timestamp_ntz"
    if isinstance(data_type, T.StringType):
        return "string" if data_type == T.StringType() else None  # a collation keeps its object
    plain = (
        T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
        T.DecimalType, T.BinaryType, T.DateType,
    )  # fmt: skip
    return data_type.simpleString() if isinstance(data_type, plain) else None
