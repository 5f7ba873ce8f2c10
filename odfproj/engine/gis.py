"""Apache Sedona's GIS functions in ``engine: spark`` queries, loaded into a running JVM when a query names one.

kamu's Spark engine ships Apache Sedona, and real manifests call its ``ST_*`` functions
(``ST_GeomFromGeoJSON``, ``ST_Point``, ``ST_Transform``). odfproj loads Sedona only into the JVM of a
process whose queries name one (:func:`gis_functions_in`, read from the SQL without a JVM): the jars
(``engine.packages``, fetched once into the cache) are added to the running session, and the allowed
functions (``engine.sql_policy.GIS_FUNCTION_NAMES``) are registered, in Spark's built-in registry so that
every session made afterwards has them, and in the session at hand. Sessions of projects without GIS
queries never pay for it (measured in bench/README.md, "GIS functions").

Why not Sedona's own ``SedonaContext.create`` (or its SQL extension): it registers every function,
raster and file-reading ones included, with identifiers that Spark 4.3's registry refuses ("must be fully
qualified"); and Sedona 1.8.0, its one release for Spark 4, was built against a Spark whose catalyst
had the trait ``FoldableUnevaluable``, which five of its statistics functions extend and the installed
Spark lacks: their classes would not link, so Sedona's catalog could not even be listed. odfproj adds
an empty interface of that name (:func:`compat_jar`, a 174-byte class written here, put on the
classpath only when the installed Spark lacks it); the functions odfproj allows never use it.

Geometry is written as kamu writes it: its Spark engine writes Sedona's geometry type to Parquet,
which stores the type's SQL representation, ``binary``, holding Sedona's serialised geometry (a
header byte of type and dimensions, the SRID, the coordinates as little-endian doubles). A query's
geometry columns leave :func:`plain_geometry` as that very ``binary``, so that odfproj's Python side
(schemas, Arrow) never meets Sedona's Python-only type class, marked as geometry
(``odf.data_schema.GEOMETRY_ATTRIBUTE``, Spark field metadata): the mark goes into the dataset's
schema, and comes back as Spark field metadata on every frame read under that schema. A GIS query
sees the marked columns of its views as geometry again (:func:`geometry_views`): Sedona's geometry
type holds exactly that ``binary``, so they are relabelled, not converted. A query without GIS
functions sees the ``binary``, and Sedona is not loaded for it.
"""

from __future__ import annotations

import json
import re
import struct
import threading
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odfproj.engine.packages import (
    PackageUnavailableError,
    cache_dir,
    installed_build,
    pyspark_jars,
    resolved_jars,
    sedona,
)
from odfproj.engine.sql_policy import GIS_FUNCTION_NAMES, is_gis_name, unknown_gis_function
from odfproj.odf import model
from odfproj.odf.data_schema import GEOMETRY_ATTRIBUTE, GEOMETRY_ENCODING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "GEOMETRY_COLUMN",
    "compat_jar",
    "ensure_gis",
    "geometry_columns",
    "geometry_from_geojson",
    "geometry_views",
    "gis_functions_in",
    "gis_refusals",
    "plain_geometry",
    "unknown_gis_functions",
]

#: The column in which GeoJSON, NdGeoJSON and shapefile reads give each feature's geometry, as GeoJSON text.
GEOMETRY_COLUMN = "geometry"

#: Quoted text and comments of SQL, which may mention a function without calling it.
_NOT_CODE = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)
#: A call of a function spelt like Sedona's: ``ST_Name(`` or ``RS_Name(``.
_GIS_CALL = re.compile(r"(?<![\w.`])((?:st|rs)_\w+)\s*\(", re.IGNORECASE)


def gis_functions_in(queries: Iterable[str]) -> list[str]:
    """The GIS functions (``ST_*``, ``RS_*``, as written) that ``queries`` call, in order; no JVM."""
    found: list[str] = []
    for query in queries:
        for name in _GIS_CALL.findall(_NOT_CODE.sub(" ", query)):
            if name not in found:
                found.append(name)
    return found


def unknown_gis_functions(queries: Iterable[str]) -> list[str]:
    """Why each GIS-spelt function that ``queries`` call and odfproj does not allow is refused (the plan's
    JVM-free check: a misspelt ``ST_Pointt`` is reported with the name it is closest to)."""
    allowed = {name.lower() for name in GIS_FUNCTION_NAMES}
    return [
        unknown_gis_function(n)
        for n in gis_functions_in(queries)
        if is_gis_name(n) and n.lower() not in allowed
    ]


def gis_refusals(transform: model.TransformSql) -> list[str]:
    """:func:`unknown_gis_functions` of every query of ``transform`` (``query`` or its ``queries``)."""
    queries = [transform.query] if transform.query is not None else [q.query for q in transform.queries or ()]
    return unknown_gis_functions(queries)


# --- the compatibility class ----------------------------------------------------------------------------

#: The trait Sedona 1.8.0's statistics functions extend, absent from some Spark 4 builds.
_MISSING_TRAIT = "org/apache/spark/sql/catalyst/expressions/FoldableUnevaluable"
_TRAIT_PARENT = "org/apache/spark/sql/catalyst/expressions/Unevaluable"
_COMPAT_JAR = "odfproj-sedona-compat-1.jar"


def _interface_class(name: str, parent: str) -> bytes:
    """The class file of ``public interface NAME extends PARENT {}`` (Java 8 format)."""

    def utf8(text: str) -> bytes:
        data = text.encode()
        return b"\x01" + struct.pack(">H", len(data)) + data

    def class_ref(index: int) -> bytes:
        return b"\x07" + struct.pack(">H", index)

    pool = [utf8(name), class_ref(1), utf8("java/lang/Object"), class_ref(3), utf8(parent), class_ref(5)]
    public_abstract_interface = 0x0601
    return (
        b"\xca\xfe\xba\xbe"
        + struct.pack(">HH", 0, 52)
        + struct.pack(">H", len(pool) + 1)
        + b"".join(pool)
        + struct.pack(">HHH", public_abstract_interface, 2, 4)
        + struct.pack(">HH", 1, 6)  # one interface: PARENT
        + struct.pack(">HHH", 0, 0, 0)  # no fields, methods or attributes
    )


def _spark_has(class_path: str) -> bool:
    jars = sorted(pyspark_jars().glob("spark-catalyst_*.jar"))
    if not jars:
        return True
    with zipfile.ZipFile(jars[0]) as archive:
        return f"{class_path}.class" in archive.namelist()


def compat_jar(cache: Path | None = None) -> Path | None:
    """The jar holding the empty ``FoldableUnevaluable`` interface, written into the cache when the
    installed Spark lacks it; ``None`` when Spark has it."""
    if _spark_has(_MISSING_TRAIT):
        return None
    path = (cache or cache_dir()) / _COMPAT_JAR
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as archive:
            archive.writestr(
                zipfile.ZipInfo(f"{_MISSING_TRAIT}.class", (1980, 1, 1, 0, 0, 0)),
                _interface_class(_MISSING_TRAIT, _TRAIT_PARENT),
            )
        partial.replace(path)
    return path


# --- loading into a JVM ---------------------------------------------------------------------------------

_LOCK = threading.Lock()
#: Per Spark application (a JVM may run several, one after the other, each with its own class loaders
#: and executors): the builders of the allowed functions, once loaded.
_LOADED: dict[str, dict[str, Any]] = {}


def ensure_gis(session: SparkSession) -> None:
    """Make the allowed GIS functions callable in ``session`` (and in every session made after it).

    The first call in a Spark application adds the Sedona jars to it and registers the functions (a few seconds);
    later ones register them in a session made before that, or do nothing. A missing jar is a one-line
    ``PackageUnavailableError`` saying how to fetch it; queries without GIS functions never get here.
    """
    jvm = session._jvm  # type: ignore[attr-defined]
    application = str(session._jsparkSession.sparkContext().applicationId())  # type: ignore[attr-defined]
    with _LOCK:
        entries = _LOADED.get(application)
        if entries is None:
            entries = _load(session)
            _LOADED[application] = entries
        registry = session._jsparkSession.sessionState().functionRegistry()  # type: ignore[attr-defined]
        if not registry.functionExists(_identifier(jvm, "st_point")):
            for name, (info, builder) in entries.items():
                registry.registerFunction(_identifier(jvm, name), info, builder)


def _identifier(jvm: Any, name: str) -> Any:
    """A built-in function's identifier as Spark 4.3's registry wants it: ``system.builtin.NAME``."""
    some = jvm.scala.Some
    return jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(name, some("builtin"), some("system"))


def _load(session: SparkSession) -> dict[str, Any]:
    jars = [*resolved_jars(sedona(installed_build()))]
    extra = compat_jar()
    if extra is not None:
        jars.insert(0, extra)
    jsession = session._jsparkSession  # type: ignore[attr-defined]
    loader = jsession.sessionState().resourceLoader()
    for jar in jars:
        loader.addJar(str(jar))  # the driver's session class loader, and the executors through the context
    jvm = session._jvm  # type: ignore[attr-defined]
    classes = jsession.sharedState().jarClassLoader()

    def load_class(name: str) -> Any:
        return jvm.java.lang.Class.forName(name, True, classes)

    load_class("org.apache.spark.sql.sedona_sql.UDT.UdtRegistratorWrapper").getMethod(
        "registerAll", None
    ).invoke(None, None)
    catalog = load_class("org.apache.sedona.sql.UDF.Catalog$").getField("MODULE$").get(None)
    wanted = set(GIS_FUNCTION_NAMES)
    entries: dict[str, Any] = {}
    builtin = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    described = catalog.expressions().iterator()
    while described.hasNext():
        entry = described.next()
        name = str(entry._1().funcName())
        if name in wanted:
            entries[name] = (entry._2(), entry._3())
            builtin.registerFunction(_identifier(jvm, name), entry._2(), entry._3())
    missing = sorted(wanted - set(entries))
    if missing:
        raise PackageUnavailableError(
            f"the Sedona jars lack GIS functions odfproj allows: {', '.join(missing)}"
        )
    return entries


# --- geometry in and out --------------------------------------------------------------------------------


#: Sedona's geometry type (a Scala object, the type's one instance).
_GEOMETRY_UDT = "org.apache.spark.sql.sedona_sql.UDT.GeometryUDT"


def _is_geometry_udt(data_type: dict[str, Any]) -> bool:
    return str(data_type.get("class", "")).removesuffix("$") == _GEOMETRY_UDT


def _plain(data_type: Any) -> Any:
    """A Spark schema (as JSON) with every user-defined type replaced by its SQL type; a field of Sedona's
    geometry type becomes a ``binary`` field marked as geometry (``GEOMETRY_ATTRIBUTE``)."""
    if isinstance(data_type, dict):
        inner = data_type.get("type")
        if isinstance(inner, dict) and inner.get("type") == "udt" and _is_geometry_udt(inner):
            metadata = {**data_type.get("metadata", {}), GEOMETRY_ATTRIBUTE: GEOMETRY_ENCODING}
            return {**data_type, "type": _plain(inner["sqlType"]), "metadata": metadata}
        if inner == "udt":
            return _plain(data_type["sqlType"])
        return {key: _plain(value) for key, value in data_type.items()}
    if isinstance(data_type, list):
        return [_plain(item) for item in data_type]
    return data_type


def plain_geometry(frame: DataFrame) -> DataFrame:
    """``frame`` with its geometry columns as the ``binary`` Sedona's geometry type is stored as.

    Spark keeps a user-defined type's values in their SQL representation, so this only relabels the
    rows (no value is converted); ``frame`` itself when it has no such column. The result's plan is
    a scan of ``frame``'s rows, which ``transform.modes`` classifies as ``full``.
    """
    from pyspark.sql import DataFrame

    jdf = frame._jdf  # type: ignore[attr-defined]
    text = str(jdf.schema().json())
    if '"udt"' not in text:
        return frame
    jvm = frame.sparkSession._jvm  # type: ignore[attr-defined]
    schema = jvm.org.apache.spark.sql.types.DataType.fromJson(json.dumps(_plain(json.loads(text))))
    jsession = frame.sparkSession._jsparkSession  # type: ignore[attr-defined]
    relabelled = jsession.internalCreateDataFrame(jdf.queryExecution().toRdd(), schema, False)
    return DataFrame(relabelled, frame.sparkSession)


def geometry_columns(frame: DataFrame) -> list[str]:
    """The top-level ``binary`` columns of ``frame`` marked as geometry (``GEOMETRY_ATTRIBUTE``), in order.

    Read from the JVM's schema, so a frame that already holds Sedona's type (not marked) is no trouble.
    """
    schema = json.loads(str(frame._jdf.schema().json()))  # type: ignore[attr-defined]
    return [
        field["name"]
        for field in schema["fields"]
        if field["type"] == "binary"
        and field.get("metadata", {}).get(GEOMETRY_ATTRIBUTE) == GEOMETRY_ENCODING
    ]


def geometry_views(frame: DataFrame) -> DataFrame:
    """``frame`` with its marked geometry columns (:func:`geometry_columns`) of Sedona's geometry type.

    A relabelling: Spark holds a user-defined type's values in their SQL representation, and Sedona's
    geometry type's is the very ``binary`` stored, so no value is read or converted (:func:`plain_geometry`
    is the way back). ``frame`` itself when it has no such column; :func:`ensure_gis` must have run in its
    session. The result is a scan of ``frame``'s rows, like :func:`plain_geometry`'s.
    """
    from pyspark.sql import DataFrame

    columns = set(geometry_columns(frame))
    if not columns:
        return frame
    session = frame.sparkSession
    jvm = session._jvm  # type: ignore[attr-defined]
    jsession = session._jsparkSession  # type: ignore[attr-defined]
    classes = jsession.sharedState().jarClassLoader()
    udt = jvm.java.lang.Class.forName(_GEOMETRY_UDT, True, classes).getConstructor(None).newInstance(None)
    jdf = frame._jdf  # type: ignore[attr-defined]
    fields = jdf.schema().fields()
    typed = session.sparkContext._gateway.new_array(jvm.org.apache.spark.sql.types.StructField, len(fields))
    for i, field in enumerate(fields):
        if field.name() in columns:
            field = jvm.org.apache.spark.sql.types.StructField(
                field.name(), udt, field.nullable(), field.metadata()
            )
        typed[i] = field
    schema = jvm.org.apache.spark.sql.types.StructType(typed)
    relabelled = jsession.internalCreateDataFrame(jdf.queryExecution().toRdd(), schema, False)
    return DataFrame(relabelled, session)


def geometry_from_geojson(frame: DataFrame, column: str) -> DataFrame:
    """``frame`` with its string ``column`` (GeoJSON text) parsed into Sedona geometry; as it is if
    ``column`` is absent or not a string (:func:`ensure_gis` must have run in its session)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = {f.name: f for f in frame.schema.fields}
    field = fields.get(column)
    if field is None or not isinstance(field.dataType, T.StringType):
        return frame
    parsed = F.call_function("ST_GeomFromGeoJSON", F.col(f"`{column}`")).alias(column)
    return frame.select(*(parsed if name == column else F.col(f"`{name}`") for name in fields))
