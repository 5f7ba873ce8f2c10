"""The Spark engine (queries over DataFrames in isolated scopes), and the Spark error translation ingest shares.

Ingest and transforms call it in-process with DataFrames (:meth:`SparkEngine.query`,
:meth:`SparkEngine.preprocess`); the request/response messages of the spec's engine protocol are not
implemented until an engine runs out of process (an earlier message-shaped contract had no caller but
its tests and was removed).

Design points, each one a reason for code below:

- The session comes from a ``SparkSessionHolder`` and is asked for only when an operation runs, so building
  a ``SparkEngine`` starts no JVM.
- Every operation runs in its own child session (``SparkSession.newSession()``): same SparkContext and
  cache, but its own temporary views. Query aliases (``input``, an input dataset's alias, a step's alias)
  therefore never leak between calls or collide between threads. A DataFrame from the parent session is
  handed to the child through a uniquely named global temporary view that is dropped at once; the child's
  own views are dropped when the operation ends (the returned DataFrame keeps its analysed plan).
- A query step must parse as a *query* (``ParserInterface.parseQuery``): statements such as ``DROP``,
  ``SET``, ``ADD JAR`` or ``CREATE FUNCTION`` would run eagerly inside ``spark.sql`` and are refused
  before they get there.
- Before analysis, the parsed plan must stay within the allowlists of ``engine.sql_policy`` (functions,
  SQL constructs, options): Spark evaluates constant expressions, files they name included, while it
  analyses, so this is the check that keeps plan from reading or fetching anything.
- After analysis, the plan is asked whether it is deterministic, and its expression classes are checked
  against a deny-list that also names the culprit: functions Spark thinks deterministic but that read the
  clock or the environment (``current_timestamp`` written without parentheses is resolved only here), and
  those that reach the JVM, files or a shell, as a second line of defence. ``runSQLOnFiles`` is off.
- A query runs with the semantics of the engine it was written for, decided in ``QueryScope.run`` and
  nowhere else. Spark SQL (``engine: spark``) runs as the ODF reference implementation runs it, on Spark
  with ANSI mode off: a failed cast or date parse gives NULL, and real manifests filter on exactly that
  (``WHERE unix_timestamp(...) IS NOT NULL``). SQL translated from DataFusion, Flink or RisingWave runs
  with ANSI on, because those engines raise an error where non-ANSI Spark would return NULL. odfproj's own
  DataFrame work (reading, coercion to the read schema, merging) stays ANSI in the parent session.
- Spark errors become one-line ``EngineError``/``InvalidQueryError`` messages: the error class and first
  line, without SQLSTATE and without the Java stack trace.
- On a Spark Connect target (``sc://``) the parser and the analysed plan live on the server, out of reach.
  Each step is then checked first, exactly as above, in the local analysis sandbox
  (``engine.settings.analysis_settings``) over empty views of the real inputs' schemas, and only then
  sent to the server (:class:`ConnectQueryScope`). Connect DataFrames resolve their views when they run,
  so a Connect scope's views stay until the engine's holder stops.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.engine.columns import quoted_name
from odfproj.engine.dialects import is_spark, to_spark
from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.exchange import exchange_of
from odfproj.engine.file_splits import split_bytes_before_start
from odfproj.engine.gis import (
    GEOMETRY_COLUMN,
    ensure_gis,
    geometry_from_geojson,
    geometry_views,
    gis_functions_in,
    plain_geometry,
)
from odfproj.engine.packages import PackageUnavailableError
from odfproj.engine.s3a import store_failure
from odfproj.engine.session import (
    SMALL_WORK_CONF,
    SparkSessionHolder,
    apply_sql_conf,
    child_session,
    in_one_partition,
    keep_until_stop,
    mark_small_work,
)
from odfproj.engine.settings import analysis_settings
from odfproj.engine.slices import rows_per_file
from odfproj.engine.sql_policy import check_parsed_query
from odfproj.engine.types import arrow_schema_from_spark, spark_schema_from_arrow
from odfproj.engine.warm.client import WarmSessionHolder, call
from odfproj.engine.warm.protocol import ServerInfo
from odfproj.errors import EngineError
from odfproj.odf import model

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: The view name a preprocess query reads its input from (spec: ingest preprocess step).
INPUT_VIEW = "input"

#: Analysed-plan node classes that are refused, with the name the user wrote. Spark marks some of these
#: deterministic (they are folded to a constant per query), which is why a deny-list is needed as well.
FORBIDDEN_NODES: Mapping[str, str] = {
    "Rand": "rand",
    "Randn": "randn",
    "Uuid": "uuid",
    "Shuffle": "shuffle",
    "Randstr": "randstr",
    "Uniform": "uniform",
    "CurrentTimestamp": "current_timestamp",
    "Now": "now",
    "CurrentDate": "current_date",
    "LocalTimestamp": "localtimestamp",
    "CurrentUser": "current_user",
    "MonotonicallyIncreasingID": "monotonically_increasing_id",
    "SparkPartitionID": "spark_partition_id",
    "InputFileName": "input_file_name",
    "InputFileBlockStart": "input_file_block_start",
    "InputFileBlockLength": "input_file_block_length",
    "TryReflect": "try_reflect",
    "CallMethodViaReflection": "reflect/java_method",
    "ScriptTransformation": "TRANSFORM ... USING (external script)",
}
_WHY_FORBIDDEN = {
    "CallMethodViaReflection": "it calls into the JVM",
    "TryReflect": "it calls into the JVM",
    "ScriptTransformation": "it runs an external program",
    "InputFileName": "it depends on where the data is stored",
    "InputFileBlockStart": "it depends on where the data is stored",
    "InputFileBlockLength": "it depends on where the data is stored",
}

_CLASS_RE = re.compile(r'"class":"([A-Za-z0-9_.$]+)"')
_SQLSTATE_RE = re.compile(r"\s*SQLSTATE: [0-9A-Z]+")
_LINE_POS_RE = re.compile(r";?\s*\(?line (\d+),? pos (\d+)\)?;?\s*$")
_FAILED_READ_RE = re.compile(r"Encountered error while reading file (\S+?)\.?\s+(?:SQLSTATE|$)")
_USER_RAISED = "[USER_RAISED_EXCEPTION]"
#: How a Spark Connect client's server stack trace introduces each cause.
_CAUSED_BY = "Caused by: "


# --- error translation ----------------------------------------------------------------------------------


def _clean(line: str) -> str:
    """One line of a Spark message without SQLSTATE, with ``(line N, pos M)`` in one spelling."""
    text = _SQLSTATE_RE.sub("", line.strip())
    match = _LINE_POS_RE.search(text)
    if match:
        text = f"{text[: match.start()].rstrip(' ;')} (line {match.group(1)}, pos {match.group(2)})"
    return text.strip()


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _clean(line)
    return ""


def _java_throwable(error: BaseException) -> object | None:
    return getattr(error, "java_exception", None) or getattr(error, "_origin", None)


def _java_chain(error: BaseException) -> list[str]:
    """First lines of a Java exception and its causes, outermost first."""
    throwable = _java_throwable(error)
    lines: list[str] = []
    seen = 0
    while throwable is not None and seen < 16:
        seen += 1
        try:
            message = throwable.getMessage()
            name = throwable.getClass().getSimpleName()
            cause = throwable.getCause()
        except Exception:  # the gateway is gone; fall back to the Python text
            break
        text = _chain_line(str(name), message)
        if text:
            lines.append(text)
        throwable = cause
    return lines


def _chain_line(name: str, message: object) -> str:
    """One exception of a chain: its message's first line, after its class's simple name unless the
    message starts with Spark's ``[ERROR_CLASS]`` or the class says nothing (``SparkException``)."""
    text = _first_line(str(message)) if message is not None else ""
    if not text.startswith("[") and name not in ("SparkException", "Py4JJavaError"):
        text = f"{name}: {text}" if text else name
    return text


def _connect_chain(error: BaseException) -> list[str]:
    """The lines :func:`_java_chain` gives, for a Spark Connect client's exception: its message, then
    the causes the server sent with it (``Caused by: CLASS: MESSAGE`` lines of its stack trace), so
    that a Connect session (an ``sc://`` target, the warm engine) says what a local one says."""
    getter = getattr(error, "getStackTrace", None)
    trace = getter() if callable(getter) else None
    if not isinstance(trace, str) or not trace.strip():
        return []
    rows = trace.splitlines()
    found = [(rows[0].partition(": ")[0], str(error.getMessage()))]  # type: ignore[attr-defined]
    for row in rows:
        if row.startswith(_CAUSED_BY):
            name, _, message = row[len(_CAUSED_BY) :].partition(": ")
            found.append((name, message))
    lines = [_chain_line(name.strip().rsplit(".", 1)[-1], message) for name, message in found[:16]]
    return [line for line in lines if line]


@dataclass(frozen=True)
class SparkFailure:
    """What went wrong in Spark, reduced to what a user needs: the message and, when known, the file."""

    message: str
    file: str | None = None
    user_raised: bool = False


def describe_spark_error(error: BaseException) -> SparkFailure:
    """Reduce a PySpark/Py4J exception to one line (error class + message, causes joined by ``: ``)."""
    chain = _java_chain(error) or _connect_chain(error)
    store = store_failure(chain)  # the S3A connector's failures, one line naming the store
    if store is not None:
        return SparkFailure(store)
    if not chain:
        getter = getattr(error, "getMessage", None)
        text = getter() if callable(getter) else str(error)
        chain = [_first_line(str(text)) or type(error).__name__]
    file: str | None = None
    kept: list[str] = []
    for line in chain:
        match = _FAILED_READ_RE.search(line)
        if match:
            file = _local_path(match.group(1))
            continue
        if line.startswith(_USER_RAISED):
            return SparkFailure(line[len(_USER_RAISED) :].strip(), file, user_raised=True)
        if line not in kept:
            kept.append(line)
    # The outermost line says what Spark was doing, the innermost why; the middle is usually noise.
    message = kept[0] if len(kept) == 1 else f"{kept[-2].rstrip('.')}: {kept[-1]}" if len(kept) > 1 else ""
    return SparkFailure(message or type(error).__name__, file)


def _local_path(uri: str) -> str:
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return uri[len(prefix) :]
    return uri


def is_spark_error(error: BaseException) -> bool:
    """Whether ``error`` came from Spark or the JVM (as opposed to a bug in our own Python)."""
    module = type(error).__module__
    return module.startswith(("pyspark", "py4j"))


@contextmanager
def spark_failures(translate: Callable[[SparkFailure], EngineError]) -> Iterator[None]:
    """Run Spark actions; a Spark or JVM exception becomes ``translate(what it says)``, raised.

    Our own errors pass unchanged, and so does any other exception: a bug is not a Spark failure.
    """
    try:
        yield
    except EngineError:
        raise
    except Exception as e:
        if not is_spark_error(e):
            raise
        raise translate(describe_spark_error(e)) from None


def translating_errors(
    what: str, error_type: type[EngineError] = EngineError
) -> AbstractContextManager[None]:
    """Run Spark actions, turning Spark exceptions into ``error_type(f"{what}: <one line>")``."""
    return spark_failures(lambda failure: error_type(f"{what}: {failure.message}"))


# --- query checking -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    query: str
    alias: str | None


def _steps(transform: model.TransformSql) -> list[_Step]:
    """The transform's queries in order; ``query`` is the one-step shorthand of ``queries``."""
    if transform.engine.strip().lower() != "spark":  # dialects.to_spark translates them first
        raise InvalidQueryError(f"engine {transform.engine}: only Spark SQL runs on Spark untranslated")
    if transform.query is not None and transform.queries:
        raise InvalidQueryError("a Sql transform sets both `query` and `queries`; set only one")
    if transform.query is not None:
        return [_Step(transform.query, None)]
    if not transform.queries:
        raise InvalidQueryError("a Sql transform needs `query` or `queries`")
    steps = [_Step(q.query, q.alias) for q in transform.queries]
    for i, step in enumerate(steps[:-1], start=1):
        if not step.alias:
            raise InvalidQueryError(
                f"query step {i} of {len(steps)} has no alias; only the last step (the output) may omit it"
            )
    return steps


def _plan_classes(analyzed: object) -> set[str]:
    try:
        text = analyzed.toJSON()
        return {c.rsplit(".", 1)[-1] for c in _CLASS_RE.findall(text)}
    except Exception:  # toJSON is not implemented for every node; the tree string names them too
        text = str(analyzed.toString())
        return {name for name in FORBIDDEN_NODES if re.search(rf"\b{name}\b", text)}


def _parsed_json(parsed: object, where: str) -> str:
    """The parsed plan as JSON; a plan Spark cannot write as JSON cannot be checked, so it is refused."""
    try:
        return str(parsed.toJSON())
    except Exception as e:
        if not is_spark_error(e):
            raise
        raise InvalidQueryError(
            f"{where}: the query uses SQL that odfproj cannot check ({describe_spark_error(e).message})"
        ) from None


def analysed_plan(df: DataFrame) -> object:
    """The JVM's analysed logical plan of a classic DataFrame (py4j), for the checks that read it.

    A Connect DataFrame has no plan in this process: its steps are checked in the local sandbox
    (:class:`ConnectQueryScope`), never here.
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise EngineError("internal: a query plan can only be read from a classic (local) Spark session")
    return jdf.queryExecution().analyzed()


def check_query_plan(df: DataFrame, where: str) -> None:
    """Refuse a non-deterministic or sandbox-escaping query, naming the function responsible."""
    analyzed = analysed_plan(df)
    classes = _plan_classes(analyzed)
    for node, function in FORBIDDEN_NODES.items():
        if node in classes:
            why = _WHY_FORBIDDEN.get(node, "it is not deterministic")
            raise InvalidQueryError(
                f"{where}: function {function} is not allowed because {why}; ODF queries must be "
                "deterministic and pure"
            )
    if not analyzed.deterministic():
        raise InvalidQueryError(
            f"{where}: the query is not deterministic (a function in it gives different results on each "
            "run); ODF queries must be deterministic and pure"
        )


def analysed_plan_json(df: DataFrame) -> str | None:
    """The analysed logical plan of ``df`` as Spark's JSON (``None``: it cannot be read here).

    What ``transform.modes`` classifies; analysis is already done by the query checks, nothing runs.
    ``None`` for a node Spark cannot write as JSON, and for a Spark Connect DataFrame, whose plan lives
    on the server: its query then takes the full path, which is correct for every query.
    """
    if getattr(df, "_jdf", None) is None:
        return None
    try:
        return str(analysed_plan(df).toJSON())
    except Exception as e:
        if not is_spark_error(e):
            raise
        return None


# --- sessions -------------------------------------------------------------------------------------------

ANSI_KEY = "spark.sql.ansi.enabled"


class QueryScope:
    """A child session whose temporary views live only as long as one engine operation."""

    def __init__(
        self,
        parent: SparkSession,
        sql_conf: Mapping[str, str],
        child: SparkSession | None = None,
        *,
        configured: bool = False,
    ) -> None:
        """``child``: the session to use instead of a new child of ``parent``; ``configured``: it has
        ``sql_conf`` already (and gets back its ANSI setting, which :meth:`run` changes, at the end)."""
        self.parent = parent
        self.session = child if child is not None else child_session(parent)
        if not configured:
            apply_sql_conf(self.session, sql_conf)
        self._configured = configured
        self._sql_conf = dict(sql_conf)
        #: The views of this scope and the frames behind them, by name: dropped at the end, and their
        #: schemas key the checks already passed.
        self._views: dict[str, DataFrame] = {}
        self._ansi_changed = False

    def register_schema(self, name: str, schema: StructType) -> None:
        """Expose an empty frame of ``schema`` as the view ``name``: what a sandbox checks a query over."""
        self.register(name, self.session.createDataFrame([], schema))

    def register(self, name: str, df: DataFrame) -> None:
        """Expose ``df`` (of any session) as the temporary view ``name`` in this scope only."""
        quoted = quoted_name(name)
        if df.sparkSession is self.session:
            df.createOrReplaceTempView(quoted)
        else:
            bridge = f"odfproj_{uuid.uuid4().hex}"
            df.createGlobalTempView(bridge)
            try:
                self.session.table(f"global_temp.{bridge}").createOrReplaceTempView(quoted)
            finally:
                self.parent.catalog.dropGlobalTempView(bridge)
        self._views[name] = df

    def run(self, transform: model.TransformSql) -> DataFrame:
        """Translate, check and analyse every step; aliased steps become views; the last step's DataFrame is returned.

        ``transform`` is given as written, in its own engine's SQL: translating here, after the engine's
        semantics are chosen, is what keeps a translated query from being run as if written for Spark.
        """
        from pyspark.errors import PySparkException

        ansi = "false" if is_spark(transform) else "true"
        self.session.conf.set(ANSI_KEY, ansi)
        self._ansi_changed = True
        steps = _steps(to_spark(transform))
        gis = is_spark(transform) and _with_gis(self.session, [step.query for step in steps])
        if gis:  # the views' stored geometry columns, as Sedona's geometry (engine.gis)
            for name, frame in list(self._views.items()):
                typed = geometry_views(frame)
                if typed is not frame:
                    self.register(name, typed)
        key = self._check_key(steps, ansi)
        checked = key in _CHECKED
        parser = self.session._jsparkSession.sessionState().sqlParser()
        result: DataFrame | None = None
        for i, step in enumerate(steps, start=1):
            where = f"query step {i}" if len(steps) > 1 else "query"
            if step.alias:
                where += f" ({step.alias})"
            if not checked:
                try:
                    parsed = parser.parseQuery(step.query)  # refuses statements before spark.sql could
                except PySparkException as e:
                    raise InvalidQueryError(f"{where}: {describe_spark_error(e).message}") from None
                # Before analysis: Spark folds constants (and reads what they name) while it analyses.
                check_parsed_query(_parsed_json(parsed, where), where)
            try:
                result = self.session.sql(step.query)
            except PySparkException as e:
                raise InvalidQueryError(f"{where}: {describe_spark_error(e).message}") from None
            if not checked:
                check_query_plan(result, where)
            if step.alias and i < len(steps):
                self.register(step.alias, result)
        assert result is not None
        _remember_checked(key)
        return plain_geometry(result) if gis else result

    def _check_key(self, steps: Sequence[_Step], ansi: str) -> str:
        """What the checks of :meth:`run` depend on: the SQL of every step, the views' schemas (odfproj's
        own frames: the checks find nothing in them) and the scope's settings."""
        text = json.dumps(
            [
                [[step.alias, step.query] for step in steps],
                sorted((name, _schema_json(frame)) for name, frame in self._views.items()),
                sorted(self._sql_conf.items()),
                ansi,
            ]
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def close(self) -> None:
        for name in self._views:
            with suppress(Exception):  # best effort: the next scope replaces a view of the same name
                self.session.catalog.dropTempView(name)  # a plain name here, not an identifier
        self._views.clear()
        if self._configured and self._ansi_changed:  # a session that outlives the scope
            self.session.conf.set(ANSI_KEY, self._sql_conf.get(ANSI_KEY, "true"))


def _schema_json(frame: DataFrame) -> str:
    """``frame``'s schema as JSON (PySpark keeps it once read); read in the JVM for a geometry column,
    whose type only Sedona's Python package, which odfproj does not need, could parse (``engine.gis``)."""
    from pyspark.errors import PySparkValueError

    try:
        return frame.schema.json()
    except (PySparkValueError, ImportError):  # ImportError: a UDT's Python class names a missing module
        return str(frame._jdf.schema().json())  # type: ignore[attr-defined]


def _with_gis(session: SparkSession, queries: list[str]) -> bool:
    """Whether ``queries`` call GIS functions; if so, they are loaded into ``session`` (``engine.gis``)."""
    if not gis_functions_in(queries):
        return False
    try:
        ensure_gis(session)
    except PackageUnavailableError as e:
        raise InvalidQueryError(str(e)) from None
    return True


#: The transforms that passed :meth:`QueryScope.run`'s checks, by :meth:`QueryScope._check_key`. An
#: update runs the same query over several frames (the rows added, the rows withdrawn, the terms of a
#: join), and the warm engine and ``watch`` run it again on every update: the SQL policy and the
#: analysed plan's determinism checks (two plan serialisations, about 60 ms in all) run once per query
#: and inputs' schemas. Only the frames odfproj builds are registered as views, and they hold no
#: refused node, so the same SQL over the same schemas passes or fails the same way. At most
#: ``_CHECKED_KEPT`` keys, forgotten all at once when full.
_CHECKED: set[str] = set()
_CHECKED_KEPT = 4096


def _remember_checked(key: str) -> None:
    if len(_CHECKED) >= _CHECKED_KEPT:
        _CHECKED.clear()
    _CHECKED.add(key)


class ConnectQueryScope(QueryScope):
    """A scope on a Spark Connect server, whose queries are checked in the local sandbox first.

    ``sandbox`` is a classic scope on the analysis session (in this process, or the warm engine's
    :class:`WarmSandbox`): every view registered here is mirrored there as an empty frame of the same
    schema, and :meth:`run` runs the whole transform there (parse, SQL policy, analysis, determinism)
    before any step reaches the server. The checks are thus the very ones of a classic target, in one
    place. Views are left in place at the end: a Connect DataFrame resolves them when it runs, and its
    child session is released with the holder.
    """

    def __init__(
        self,
        parent: SparkSession,
        sql_conf: Mapping[str, str],
        child: SparkSession,
        sandbox: QueryScope | WarmSandbox,
    ) -> None:
        super().__init__(parent, sql_conf, child)
        self.sandbox = sandbox

    def register(self, name: str, df: DataFrame) -> None:
        super().register(name, df)
        self.sandbox.register_schema(name, df.schema)

    def run(self, transform: model.TransformSql) -> DataFrame:
        from pyspark.errors import PySparkException

        self.sandbox.run(transform)  # raises InvalidQueryError for anything a classic target refuses
        self.session.conf.set(ANSI_KEY, "false" if is_spark(transform) else "true")
        steps = _steps(to_spark(transform))
        result: DataFrame | None = None
        for i, step in enumerate(steps, start=1):
            try:
                result = self.session.sql(step.query)
            except PySparkException as e:
                raise InvalidQueryError(f"query step {i}: {describe_spark_error(e).message}") from None
            if step.alias and i < len(steps):
                self.register(step.alias, result)
        assert result is not None
        return self._to_parent(result)

    def _to_parent(self, result: DataFrame) -> DataFrame:
        """``result`` as a DataFrame of the parent session, which Connect requires to join or union it
        with the parent's frames; through a global view, kept (and dropped) as the child session is."""
        bridge = f"odfproj_{uuid.uuid4().hex}"
        result.createGlobalTempView(bridge)
        keep_until_stop(self.parent, lambda: self.parent.catalog.dropGlobalTempView(bridge))
        return self.parent.table(f"global_temp.{bridge}")

    def close(self) -> None:
        self._views.clear()
        self.sandbox.close()


class WarmSandbox:
    """The analysis sandbox of the warm engine's server, seen from a command: the views' schemas are
    collected here and the whole transform is checked there (:func:`check_in_sandbox`) in one request."""

    def __init__(self, server: ServerInfo) -> None:
        self.server = server
        self._views: dict[str, str] = {}

    def register_schema(self, name: str, schema: StructType) -> None:
        self._views[name] = schema.json()

    def run(self, transform: model.TransformSql) -> None:
        call(self.server, CHECK_QUERY, dict(self._views), transform)

    def close(self) -> None:
        self._views.clear()


#: The warm server's request that checks a query as the analysis sandbox does (:func:`check_in_sandbox`).
CHECK_QUERY = "check_query"


def check_in_sandbox(session: SparkSession, views: Mapping[str, str], transform: model.TransformSql) -> None:
    """In the warm server: ``transform`` checked over empty views of these schemas (JSON), in a child
    session with the analysis sandbox's settings, exactly as a command's local sandbox checks it."""
    from pyspark.sql.types import StructType

    scope = QueryScope(session, analysis_settings().effective_conf())
    try:
        for name, schema in views.items():
            scope.register_schema(name, StructType.fromJson(json.loads(schema)))
        scope.run(transform)
    finally:
        scope.close()


# --- the engine -----------------------------------------------------------------------------------------

#: Work that reads at most this many records (counted from the chain, no job) is *small work*
#: (:meth:`SparkEngine.small_work`): an everyday derivative update or ingest of a few files.
SMALL_WORK_RECORDS = 50_000


#: Each thread's small-work session (:meth:`SparkEngine._small_session`), with the shared session and
#: the settings it was made for, and whether a scope of the thread uses it (:meth:`SparkEngine.scope`).
_SMALL_SESSIONS = threading.local()


class SparkEngine:
    """Spark SQL for derivative queries and preprocess steps, each in its own scope."""

    def __init__(self, holder: SparkSessionHolder, *, rows_per_file: int | None = None) -> None:
        self.holder = holder
        self._rows_per_file = rows_per_file
        self._sandbox: SparkSessionHolder | None = None
        #: Per thread: whether its operations are small work (:meth:`small_work`).
        self._thread = threading.local()

    @property
    def session(self) -> SparkSession:
        """The shared session, created on first use; inside :meth:`small_work`, this thread's small-work
        child (:meth:`_small_session`).

        For a Connect target the local sandbox is started first: PySpark launches a JVM through a
        ``preexec_fn``, Python code in a forked child, which can die before it runs Java once gRPC's
        threads exist in the parent (seen as ``JAVA_GATEWAY_EXITED``).
        """
        if self.holder.settings.is_connect and not self.holder.created and not self._warm:
            self._sandbox_holder().get()
        shared = self.holder.get()  # always asked: a warm run's holder sets the thread's job group here
        if not self.is_small_work:
            return shared
        return self._small_session(shared)

    def _small_session(self, shared: SparkSession) -> SparkSession:
        """This thread's small-work session: a child of ``shared`` with the small-work settings, made
        once per thread and settings (again if the shared session changes).

        One per thread, not one for all: a query's scope can then register its views in the very
        session the thread's frames come from (:meth:`scope`), instead of making a child session per
        query and passing every frame to it through a global temporary view (four catalog commands a
        frame; about 15 ms a query, a tenth of a small update's time, measured on bench_dag's re-run).
        Two threads never see each other's views. Kept by the thread, not by the engine: a run makes an
        engine per dataset, and a new session (its function registry cloned, its settings applied)
        cost every update about 5 ms. The session goes with its thread.
        """
        conf = self._conf()
        key = tuple(sorted(conf.items()))
        held: tuple[SparkSession, tuple, SparkSession] | None = getattr(_SMALL_SESSIONS, "held", None)
        if held is None or held[0] is not shared or held[1] != key:
            small = child_session(shared)
            apply_sql_conf(small, conf)
            mark_small_work(small)
            held = (shared, key, small)
            _SMALL_SESSIONS.held = held
        return held[2]

    @contextmanager
    def small_work(self, small: bool = True) -> Iterator[None]:
        """Run this thread's operations inside as *small work*, when ``small`` and the target is ``local``.

        Small work runs in a child session with :data:`~odfproj.engine.session.SMALL_WORK_CONF`:
        expressions interpreted (no Java code generated and compiled per plan), few tasks, no
        broadcast jobs. The caller says what is small (an update that reads few records, counted from
        the chain); every frame it builds inside comes from that one session, so the two settings never
        meet in one plan. Elsewhere than on a ``local`` master (a cluster's executors, Spark Connect)
        it changes nothing.
        """
        previous = self.is_small_work
        self._thread.small = small and self.holder.settings.is_local  # a Connect master is sc://
        try:
            yield
        finally:
            self._thread.small = previous

    @property
    def is_small_work(self) -> bool:
        """Whether this thread is inside :meth:`small_work` (on a target where it applies)."""
        return bool(getattr(self._thread, "small", False))

    def _conf(self) -> dict[str, str]:
        """The target's settings, with the small-work ones inside :meth:`small_work`."""
        conf = self.holder.settings.effective_conf()
        if self.is_small_work:
            conf.update(SMALL_WORK_CONF)
        return conf

    @property
    def _warm(self) -> bool:
        """Whether the session is the warm engine's, whose server checks the queries (no local JVM)."""
        return isinstance(self.holder, WarmSessionHolder)

    def split_bytes_before_start(self, size: int) -> int | None:
        """The split size (``engine.file_splits``) the session will give a file of ``size`` bytes, while it
        is not started: ``None`` once it is up (the reader asks it), on a warm engine or a non-local master."""
        if self._warm or self.holder.created:
            return None
        return split_bytes_before_start(self.holder.settings.master, self._conf(), size)

    @property
    def rows_per_file(self) -> int:
        """Records per data file: as given, else the target's ``spark.sql.files.maxRecordsPerFile`` (``engine.slices``)."""
        if self._rows_per_file is not None:
            return self._rows_per_file
        return rows_per_file(self.holder.settings.effective_conf())

    @contextmanager
    def scope(self) -> Iterator[QueryScope]:
        """A scope for one operation's views: its own child session, or inside :meth:`small_work` the
        thread's small-work session itself (already configured), when no other scope of this thread
        uses it; the scope drops its views and puts the session's settings back when it closes."""
        conf = self._conf()
        if self.is_small_work and not getattr(_SMALL_SESSIONS, "in_scope", False):
            _SMALL_SESSIONS.in_scope = True  # the thread's session, whichever engine opened the scope
            scope = QueryScope(self.session, conf, self.session, configured=True)
            try:
                yield scope
            finally:
                scope.close()
                _SMALL_SESSIONS.in_scope = False
            return
        if self.holder.settings.is_connect:
            check: QueryScope | WarmSandbox
            if isinstance(self.holder, WarmSessionHolder):
                check = WarmSandbox(self.holder.server())
            else:
                check = QueryScope(self._sandbox_holder().get(), analysis_settings().effective_conf())
            scope: QueryScope = ConnectQueryScope(self.session, conf, child_session(self.session), check)
        else:
            scope = QueryScope(self.session, conf)
        try:
            yield scope
        finally:
            scope.close()

    def _sandbox_holder(self) -> SparkSessionHolder:
        """The local analysis session that checks a Connect target's queries; started on first need."""
        if self._sandbox is None:
            self._sandbox = SparkSessionHolder(analysis_settings(verbose=self.holder.settings.verbose))
        return self._sandbox

    # -- DataFrame-level API (raises) --

    def output_schema(self, inputs: Mapping[str, pa.Schema], transform: model.TransformSql) -> pa.Schema:
        """The result schema of ``transform`` over empty inputs of these schemas; nothing is executed."""
        with self.scope() as scope:
            for name, schema in inputs.items():
                empty = scope.session.createDataFrame([], spark_schema_from_arrow(schema))
                scope.register(name, empty)
            result = scope.run(transform)
            return arrow_schema_from_spark(result.schema)

    def query(self, inputs: Mapping[str, DataFrame], transform: model.TransformSql) -> DataFrame:
        """``transform`` over DataFrames exposed as views under their names; lazy, like any DataFrame."""
        with self.scope() as scope:
            for name, df in inputs.items():
                scope.register(name, in_one_partition(df))
            return scope.run(transform)

    def preprocess(self, df: DataFrame, transform: model.TransformSql) -> DataFrame:
        """The ingest preprocess step: ``transform`` over ``df`` exposed as the view ``input``.

        In a GIS query, the ``geometry`` column of GeoJSON and shapefile reads (GeoJSON text) is a
        geometry, as Sedona's readers give it to kamu's Spark engine.
        """
        if is_spark(transform) and _with_gis(df.sparkSession, [s.query for s in _steps(transform)]):
            df = geometry_from_geojson(df, GEOMETRY_COLUMN)
        return self.query({INPUT_VIEW: df}, transform)


def frame_from_arrow(session: SparkSession, table: pa.Table, scratch: Path) -> DataFrame:
    """``table`` as a DataFrame, through a Parquet file in ``scratch`` (which must outlive the DataFrame).

    ``createDataFrame(arrow_table)`` ships the rows through Python and took about 5 s for a 1M-row state
    (bench_snapshot_merge); writing one Parquet file that the JVM reads natively is several times faster.
    """
    schema = spark_schema_from_arrow(table.schema)
    if not table.num_rows:
        return session.createDataFrame([], schema)
    path = Path(scratch) / f"arrow-{uuid.uuid4().hex}.parquet"
    pq.write_table(table, path)
    return session.read.schema(schema).parquet(exchange_of(session).reads_at(path))


__all__: Sequence[str] = (
    "CHECK_QUERY",
    "FORBIDDEN_NODES",
    "INPUT_VIEW",
    "SMALL_WORK_RECORDS",
    "ConnectQueryScope",
    "QueryScope",
    "SparkEngine",
    "SparkFailure",
    "WarmSandbox",
    "analysed_plan",
    "analysed_plan_json",
    "check_in_sandbox",
    "check_query_plan",
    "describe_spark_error",
    "is_spark_error",
    "spark_failures",
    "translating_errors",
)
