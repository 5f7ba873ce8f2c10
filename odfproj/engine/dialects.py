"""SQL written for another ODF engine, translated to Spark SQL, or refused with the construct named.

A manifest's ``Transform::Sql`` names its engine. odfproj runs Spark only, and Spark reads other dialects
differently without complaint: ``"id"`` is an identifier in DataFusion but a string in Spark, ``5 / 2`` is
``2`` in DataFusion, Flink and RisingWave but ``2.5`` in Spark, ``1.5`` is a double in DataFusion and a
decimal in Spark. Running such SQL as Spark SQL gives wrong data and no error, so every query goes
through :func:`to_spark` before it reaches Spark: ``spark`` passes unchanged, ``datafusion``, ``flink``
and ``risingwave`` are parsed by sqlglot in their own dialect, rewritten where the meaning differs and
printed as Spark SQL; an unknown engine, or a construct this module cannot translate faithfully, raises
:class:`UntranslatableQueryError` naming the engine and the construct.

Translation is deliberately conservative: a function sqlglot does not know (an engine's extension such
as DataFusion's ``json_get_json``) is refused rather than passed through on the hope that Spark has a
function of that name with the same meaning. Spark still analyses the translated query (plan's query
check, or the run), so a function Spark lacks is an error there, never silently different data.

Pure Python (no JVM): ``validate`` and ``plan`` call it on untrusted manifests.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.dialects.risingwave import RisingWave
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from odfproj.engine.errors import InvalidQueryError
from odfproj.odf import model

__all__ = [
    "ENGINES",
    "SPARK",
    "TRANSLATED_ENGINES",
    "TranslatedQuery",
    "UntranslatableQueryError",
    "is_spark",
    "to_spark",
    "translate",
    "translated_queries",
]

SPARK = "spark"
#: Engines whose SQL is translated to Spark SQL.
TRANSLATED_ENGINES = ("datafusion", "flink", "risingwave")
ENGINES = (SPARK, *TRANSLATED_ENGINES)


class UntranslatableQueryError(InvalidQueryError):
    """A query of another engine that cannot run on Spark with the same meaning."""

    def __init__(self, engine: str, construct: str, why: str) -> None:
        self.engine = engine
        self.construct = construct
        super().__init__(f"engine {engine}: cannot translate {construct} to Spark SQL: {why}")


@dataclass(frozen=True)
class TranslatedQuery:
    """One query step as written and as Spark will run it."""

    alias: str | None
    source: str
    spark: str


def is_spark(transform: model.TransformSql) -> bool:
    return transform.engine.strip().lower() == SPARK


def to_spark(transform: model.TransformSql) -> model.TransformSql:
    """``transform`` as Spark SQL (``engine: spark``): the one door every query goes through to Spark.

    Raises :class:`UntranslatableQueryError` for an unknown engine, an engine-specific construct
    without a faithful Spark equivalent, or SQL that does not parse in its engine's dialect.
    """
    if is_spark(transform):
        return transform
    steps = translated_queries(transform)
    queries = tuple(model.SqlQueryStep(alias=s.alias, query=s.spark) for s in steps)
    return replace(transform, engine=SPARK, version=None, query=None, queries=queries, temporal_tables=None)


def translated_queries(transform: model.TransformSql) -> tuple[TranslatedQuery, ...]:
    """Every query step of ``transform`` with the Spark SQL it runs as (``query`` is one unnamed step)."""
    engine = transform.engine.strip().lower()
    if engine not in ENGINES:
        raise UntranslatableQueryError(
            engine or "''",
            "the query",
            f"the engine is unknown; odfproj runs {SPARK} and translates {', '.join(TRANSLATED_ENGINES)}",
        )
    if engine != SPARK and transform.temporal_tables:
        raise UntranslatableQueryError(
            engine,
            "temporalTables",
            "Flink temporal tables (FOR SYSTEM_TIME AS OF joins) have no Spark equivalent",
        )
    if transform.query is not None:
        steps = [(None, transform.query)]
    else:
        steps = [(q.alias, q.query) for q in transform.queries or ()]
    return tuple(
        TranslatedQuery(alias, sql, sql if engine == SPARK else translate(sql, engine))
        for alias, sql in steps
    )


def translate(sql: str, engine: str) -> str:
    """One query of ``engine`` as Spark SQL."""
    engine = engine.strip().lower()
    if engine == SPARK:
        return sql
    dialect = _DIALECTS.get(engine)
    if dialect is None:
        raise UntranslatableQueryError(engine, "the query", "the engine is unknown")
    emit = _EMIT_ON_WINDOW_CLOSE.search(sql)
    if emit is not None:
        raise UntranslatableQueryError(
            engine,
            "EMIT ON WINDOW CLOSE",
            "it emits only the windows a watermark has closed, and a Spark batch has no watermark",
        )
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect.sqlglot) if s is not None]
    except SqlglotError as e:
        raise UntranslatableQueryError(engine, "the query", f"it does not parse: {_first_line(e)}") from None
    if len(statements) != 1:
        raise UntranslatableQueryError(engine, "the query", "it must be exactly one SELECT statement")
    tree = statements[0]
    _refuse_unsupported(tree, dialect)
    tree = tree.transform(lambda node: _rewrite(node, dialect), copy=True)
    try:
        return tree.sql(dialect="spark", pretty=True)
    except SqlglotError as e:  # pragma: no cover - sqlglot refuses to print a node for Spark
        raise UntranslatableQueryError(engine, "the query", _first_line(e)) from None


_EMIT_ON_WINDOW_CLOSE = re.compile(r"\bemit\s+on\s+window\s+close\b", re.IGNORECASE)


def _first_line(error: Exception) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    return next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)


# --- dialects ---------------------------------------------------------------------------------------


class _DataFusionSql(Postgres):
    """DataFusion's SQL as sqlparser-rs reads it: PostgreSQL-like, with chrono format strings."""

    class Parser(Postgres.Parser):
        FUNCTIONS: ClassVar = {
            **Postgres.Parser.FUNCTIONS,
            # Postgres's TO_TIMESTAMP takes epoch seconds or a Postgres format; DataFusion's takes text
            # (or seconds) and chrono formats, so it is kept as a plain call and rewritten below.
            "TO_TIMESTAMP": lambda args: exp.Anonymous(this="to_timestamp", expressions=args),
        }


def _parse_window_function(self: Spark.Parser, name: str) -> exp.Expression:
    """Flink's ``TUMBLE(TABLE t, DESCRIPTOR(ts), size)`` window TVFs and ``TUMBLE(ts, size)`` group windows."""
    args: list[exp.Expression] = []
    while True:
        if self._match(TokenType.TABLE):
            args.append(self._parse_table_parts())
        elif self._match_text_seq("DESCRIPTOR"):
            self._match(TokenType.L_PAREN)
            args.append(self._parse_column())
            self._match(TokenType.R_PAREN)
        else:
            args.append(self._parse_assignment())
        if not self._match(TokenType.COMMA):
            break
    return exp.Anonymous(this=name, expressions=args)


class _FlinkSql(Spark):
    """Flink SQL (Calcite): back-quoted identifiers, single-quoted strings with no backslash escapes."""

    class Tokenizer(Spark.Tokenizer):
        QUOTES: ClassVar = ["'"]
        STRING_ESCAPES: ClassVar = ["'"]
        IDENTIFIERS: ClassVar = ["`"]
        # SESSION(ts, gap) is a group window function in Flink, not the SESSION keyword
        KEYWORDS: ClassVar = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "SESSION"}

    class Parser(Spark.Parser):
        FUNCTIONS: ClassVar = {
            **Spark.Parser.FUNCTIONS,
            "TO_TIMESTAMP": lambda args: exp.Anonymous(this="to_timestamp", expressions=args),
        }
        FUNCTION_PARSERS: ClassVar = {
            **Spark.Parser.FUNCTION_PARSERS,
            **{
                name: (lambda n: lambda self: _parse_window_function(self, n))(name)
                for name in ("TUMBLE", "HOP", "CUMULATE", "SESSION")
            },
        }


@dataclass(frozen=True)
class _Dialect:
    name: str
    sqlglot: type[sqlglot.Dialect]
    #: Plain calls this engine has and sqlglot does not know, by lower-case name: the Spark rewrite.
    functions: dict[str, Callable[[exp.Anonymous, _Dialect], exp.Expression]]
    #: Whether ``1.5`` is a double (DataFusion) rather than a decimal (Flink, PostgreSQL, Spark).
    float_literals: bool = False
    #: The type of an integer literal.
    integer_literal: str = "INT"


# --- refusals ---------------------------------------------------------------------------------------


def _refuse_unsupported(tree: exp.Expression, dialect: _Dialect) -> None:
    if not isinstance(tree, exp.Query):
        raise UntranslatableQueryError(
            dialect.name, f"the {tree.key.upper()} statement", "a transform must be a query (SELECT)"
        )
    for node in tree.walk():
        if isinstance(node, exp.Version):
            raise UntranslatableQueryError(
                dialect.name, "FOR SYSTEM_TIME AS OF", "temporal joins have no Spark equivalent"
            )
        if isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name == "table" and dialect.name == "flink":
                continue
            if name not in dialect.functions:
                raise UntranslatableQueryError(
                    dialect.name,
                    f"function {node.name}",
                    "it is not a function the translator knows in this engine (an extension, or a UDF)",
                )


# --- rewrites ---------------------------------------------------------------------------------------


def _rewrite(node: exp.Expression, dialect: _Dialect) -> exp.Expression:
    if isinstance(node, exp.Anonymous):
        handler = dialect.functions.get(node.name.lower())
        return handler(node, dialect) if handler is not None else node
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous):
        return _window_table(node, dialect)
    if isinstance(node, exp.Div):
        return _division(node, dialect)
    if (
        isinstance(node, exp.Literal)
        and not node.is_string
        and dialect.float_literals
        and re.search(r"[.eE]", node.this)
        and not isinstance(node.parent, exp.Interval)
    ):
        return exp.cast(node, exp.DataType.build("DOUBLE"))
    if isinstance(node, exp.Alias) and _is_int_literal(node.this) and dialect.integer_literal != "INT":
        return exp.alias_(exp.cast(node.this.copy(), dialect.integer_literal), node.args["alias"].copy())
    if isinstance(node, exp.Case) and dialect.integer_literal != "INT" and _integer_results(node):
        # CASE WHEN ... THEN 1 ELSE 0 END is Int64 in DataFusion, INT in Spark
        return exp.cast(node.copy(), dialect.integer_literal)
    if isinstance(node, exp.DataType) and node.this in exp.DataType.TEMPORAL_TYPES and node.expressions:
        return exp.DataType(this=node.this)  # TIMESTAMP(3): Spark timestamps have no precision argument
    return node


def _integer_results(case: exp.Case) -> bool:
    results = [when.args.get("true") for when in case.args.get("ifs") or ()]
    if case.args.get("default") is not None:
        results.append(case.args["default"])
    values = [r for r in results if not isinstance(r, exp.Null)]
    return bool(values) and all(_is_int_literal(r) for r in values)


def _is_int_literal(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string and node.this.lstrip("-").isdigit()


_INTEGERS = {
    exp.DataType.Type.TINYINT: 1,
    exp.DataType.Type.SMALLINT: 2,
    exp.DataType.Type.INT: 3,
    exp.DataType.Type.BIGINT: 4,
}
_INTEGER_NAMES = {1: "TINYINT", 2: "SMALLINT", 3: "INT", 4: "BIGINT"}
_FRACTIONAL_FUNCTIONS = (exp.Avg, exp.Pow, exp.Sqrt, exp.Ln, exp.Exp, exp.Log)


def _numeric_kind(node: exp.Expression, dialect: _Dialect) -> int | str | None:
    """An integer width rank (1-4), ``"fraction"``, or ``None`` when the type is not known statically."""
    if isinstance(node, exp.Paren | exp.Neg):
        return _numeric_kind(node.this, dialect)
    if isinstance(node, exp.Literal) and not node.is_string:
        if _is_int_literal(node):
            return 4 if dialect.integer_literal == "BIGINT" else 3
        return "fraction"
    if isinstance(node, exp.Cast):
        to = node.to.this
        if to in _INTEGERS:
            return _INTEGERS[to]
        if to in exp.DataType.REAL_TYPES:
            return "fraction"
        return None
    if isinstance(node, exp.Count):
        return 4
    if isinstance(node, _FRACTIONAL_FUNCTIONS):
        return "fraction"
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod | exp.IntDiv):
        left, right = _numeric_kind(node.this, dialect), _numeric_kind(node.expression, dialect)
        if "fraction" in (left, right):
            return "fraction"
        if isinstance(left, int) and isinstance(right, int):
            return max(left, right)
        return None
    return None


def _division(node: exp.Div, dialect: _Dialect) -> exp.Expression:
    """``a / b``: integer division when both operands are integers, as in the source engine."""
    left, right = _numeric_kind(node.this, dialect), _numeric_kind(node.expression, dialect)
    if "fraction" in (left, right):
        return exp.Div(this=node.this, expression=node.expression)
    if isinstance(left, int) and isinstance(right, int):
        quotient = exp.IntDiv(this=_operand(node.this), expression=_operand(node.expression))
        return exp.cast(quotient, _INTEGER_NAMES[max(left, right)])
    raise UntranslatableQueryError(
        dialect.name,
        f"the division {node.sql(dialect=dialect.sqlglot)}",
        f"{dialect.name} divides integers without remainder and Spark does not, and the operands' types "
        "are not known before the query runs; cast an operand (CAST(x AS DOUBLE) for a fractional "
        "result, CAST(x AS BIGINT) on both for an integer one)",
    )


def _operand(node: exp.Expression) -> exp.Expression:
    return exp.paren(node) if isinstance(node, exp.Binary) else node


def _call(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def _args(node: exp.Anonymous, dialect: _Dialect, least: int, most: int) -> list[exp.Expression]:
    args = list(node.expressions)
    if not least <= len(args) <= most:
        count = str(least) if least == most else f"{least} to {most}"
        raise UntranslatableQueryError(
            dialect.name, f"{node.name} with {len(args)} argument(s)", f"it takes {count} here"
        )
    return args


def _renamed(spark_name: str, count: int = 1) -> Callable[[exp.Anonymous, _Dialect], exp.Expression]:
    def rewrite(node: exp.Anonymous, dialect: _Dialect) -> exp.Expression:
        return _call(spark_name, *_args(node, dialect, count, count))

    return rewrite


# chrono (DataFusion) format directives -> java.time patterns (Spark); anything else is refused.
_CHRONO = {
    "Y": "yyyy",
    "y": "yy",
    "m": "MM",
    "d": "dd",
    "e": "d",
    "H": "HH",
    "I": "hh",
    "M": "mm",
    "S": "ss",
    "p": "a",
    "b": "MMM",
    "h": "MMM",
    "B": "MMMM",
    "a": "EEE",
    "A": "EEEE",
    "j": "DDD",
    "z": "xx",
    ":z": "xxx",
    "Z": "zzz",
    "3f": "SSS",
    "6f": "SSSSSS",
    "9f": "SSSSSSSSS",
    ".3f": ".SSS",
    ".6f": ".SSSSSS",
    ".9f": ".SSSSSSSSS",
    "F": "yyyy-MM-dd",
    "T": "HH:mm:ss",
    "D": "MM/dd/yy",
    "R": "HH:mm",
    "%": "%",
}
_CHRONO_RE = re.compile(r"%(:z|\.[369]f|[369]f|.)")


def _java_pattern(chrono: str, dialect: _Dialect) -> str:
    out: list[str] = []
    pos = 0
    for match in _CHRONO_RE.finditer(chrono):
        out.append(_java_literal(chrono[pos : match.start()]))
        directive = match.group(1)
        if directive not in _CHRONO:
            raise UntranslatableQueryError(
                dialect.name, f"the time format directive %{directive}", "it has no Spark pattern equivalent"
            )
        pattern = _CHRONO[directive]
        out.append("'%'" if pattern == "%" else pattern)
        pos = match.end()
    out.append(_java_literal(chrono[pos:]))
    return "".join(out)


def _java_literal(text: str) -> str:
    """Literal text of a java.time pattern: letters must be quoted, a quote doubled."""
    if not text:
        return ""
    if re.search(r"[A-Za-z']", text):
        return "'" + text.replace("'", "''") + "'"
    return text


def _format_literal(node: exp.Expression, dialect: _Dialect, function: str) -> str:
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise UntranslatableQueryError(
            dialect.name, f"{function} with a computed format", "only a literal format can be translated"
        )
    return node.this


def _datafusion_to_timestamp(node: exp.Anonymous, dialect: _Dialect) -> exp.Expression:
    """``to_timestamp(x)``: ISO text as UTC; ``to_timestamp(x, f1, f2, ...)``: the first format that parses.

    DataFusion fails when no format parses, so the last format keeps ``to_timestamp`` (which fails in
    Spark too) and the others use ``try_to_timestamp``.
    """
    args = _args(node, dialect, 1, 64)
    value, formats = args[0], args[1:]
    if not formats:
        return _call("to_timestamp", value)
    patterns = [
        exp.Literal.string(_java_pattern(_format_literal(f, dialect, "to_timestamp"), dialect))
        for f in formats
    ]
    tries: list[exp.Expression] = [_call("try_to_timestamp", value.copy(), p) for p in patterns[:-1]]
    last = _call("to_timestamp", value.copy(), patterns[-1])
    return exp.Coalesce(this=tries[0], expressions=[*tries[1:], last]) if tries else last


def _to_unixtime(node: exp.Anonymous, dialect: _Dialect) -> exp.Expression:
    (value,) = _args(node, dialect, 1, 1)
    return _call("unix_seconds", exp.cast(value, "TIMESTAMP"))


#: DataFusion's JSON functions (the datafusion-functions-json extension kamu registers): the value at a
#: path when it is JSON of the function's kind, else NULL. By name: the Spark type, the names of Spark's
#: variant types of that kind, and whether a negative number is NULL (see :func:`_json_get`).
_JSON_GETTERS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "json_get_str": ("STRING", ("STRING",), False),
    "json_get_int": ("BIGINT", ("TINYINT", "SMALLINT", "INT", "BIGINT"), True),
    "json_get_float": (
        "DOUBLE",
        ("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL", "FLOAT", "DOUBLE"),
        True,
    ),
    "json_get_bool": ("BOOLEAN", ("BOOLEAN",), False),
}


def _json_get(node: exp.Anonymous, dialect: _Dialect) -> exp.Expression:
    """``json_get_str(json, key, index, ...)`` and its siblings, over Spark's variant of the parsed text.

    DataFusion gives NULL for text that is not JSON, a missing path, JSON ``null`` and a value of another
    kind (``json_get_str`` of a number, ``json_get_int`` of ``1.5``); ``json_get_float`` takes integers
    too. So the value is taken only where ``schema_of_variant`` names a type of the function's kind. Its
    ``json_get_int`` and ``json_get_float`` also give NULL for a negative number (they look at the first
    character and take ``-`` for not a number), and so does the translation (``-0`` aside).
    """
    spark_type, kinds, non_negative = _JSON_GETTERS[node.name.lower()]
    args = _args(node, dialect, 1, 64)
    path = "$"
    for key in args[1:]:
        literal = key.this if isinstance(key, exp.Cast) else key  # an integer literal may be cast already
        if isinstance(literal, exp.Literal) and literal.is_string and not re.search(r"['\\]", literal.this):
            path += f"['{literal.this}']"
        elif (
            isinstance(literal, exp.Literal) and _is_int_literal(literal) and not literal.this.startswith("-")
        ):
            path += f"[{int(literal.this)}]"
        else:
            raise UntranslatableQueryError(
                dialect.name,
                f"{node.name} with the key {key.sql(dialect=dialect.sqlglot)}",
                "only a literal key (without quote or backslash) or index is translated",
            )
    parsed = _call("try_parse_json", args[0])
    kind = _call("schema_of_variant", _call("variant_get", parsed.copy(), exp.Literal.string(path)))
    named = [k for k in kinds if k != "DECIMAL"]
    accepted: exp.Expression = exp.In(this=kind, expressions=[exp.Literal.string(k) for k in named])
    if "DECIMAL" in kinds:  # DECIMAL(p,s), the type of a JSON number with a fraction
        accepted = exp.or_(accepted, exp.Like(this=kind.copy(), expression=exp.Literal.string("DECIMAL(%")))
    typed = _call("try_variant_get", parsed, exp.Literal.string(path), exp.Literal.string(spark_type))
    if non_negative:
        accepted = exp.and_(exp.paren(accepted), exp.GTE(this=typed.copy(), expression=exp.Literal.number(0)))
    return exp.Case(ifs=[exp.If(this=accepted, true=typed)])


def _flink_to_timestamp(node: exp.Anonymous, dialect: _Dialect) -> exp.Expression:
    """Flink's ``TO_TIMESTAMP(text[, format])``: java-style formats, ``yyyy-MM-dd HH:mm:ss`` by default."""
    args = _args(node, dialect, 1, 2)
    pattern = args[1] if len(args) == 2 else exp.Literal.string("yyyy-MM-dd HH:mm:ss")
    _format_literal(pattern, dialect, "TO_TIMESTAMP")
    return _call("to_timestamp", args[0], pattern)


def _flink_to_timestamp_ltz(node: exp.Anonymous, dialect: _Dialect) -> exp.Expression:
    args = _args(node, dialect, 1, 2)
    precision = args[1].name if len(args) == 2 else "3"
    spark = {"0": "timestamp_seconds", "3": "timestamp_millis"}.get(precision)
    if spark is None:
        raise UntranslatableQueryError(
            dialect.name, f"TO_TIMESTAMP_LTZ with precision {precision}", "only 0 and 3 are translated"
        )
    return _call(spark, args[0])


# --- windows ----------------------------------------------------------------------------------------


def _duration(node: exp.Expression, dialect: _Dialect) -> exp.Literal:
    """An interval literal as the duration string Spark's ``window`` wants ('1 day')."""
    if isinstance(node, exp.Interval) and isinstance(node.this, exp.Literal):
        unit = node.unit
        if unit is None:
            return exp.Literal.string(node.this.name)
        if isinstance(unit, exp.Var):
            return exp.Literal.string(f"{node.this.name} {unit.name.lower()}")
    raise UntranslatableQueryError(
        dialect.name, f"the window size {node.sql()}", "window sizes must be simple interval literals"
    )


def _spark_window(
    time: exp.Expression, size: exp.Expression, slide: exp.Expression | None, dialect: _Dialect
):
    args = [time, _duration(size, dialect)]
    if slide is not None:
        args.append(_duration(slide, dialect))
    return _call("window", *args)


def _group_window(kind: str, part: str | None) -> Callable[[exp.Anonymous, _Dialect], exp.Expression]:
    """Flink's legacy group windows: ``TUMBLE(ts, size)`` in GROUP BY, ``TUMBLE_START(ts, size)`` in SELECT.

    Both become Spark's ``window(ts, 'size')``; ``_START``/``_END`` its ``start``/``end``; ``_ROWTIME``
    the inclusive end Flink gives (end minus one millisecond).
    """

    def rewrite(node: exp.Anonymous, dialect: _Dialect) -> exp.Expression:
        if kind == "tumble":
            time, size = _args(node, dialect, 2, 2)
            window = _spark_window(time, size, None, dialect)
        elif kind == "hop":
            time, slide, size = _args(node, dialect, 3, 3)
            window = _spark_window(time, size, slide, dialect)
        else:
            time, gap = _args(node, dialect, 2, 2)
            window = _call("session_window", time, _duration(gap, dialect))
        if part is None:
            return window
        if part == "rowtime":
            end = exp.Dot(this=window, expression=exp.to_identifier("end"))
            return exp.Sub(
                this=end, expression=exp.Interval(this=exp.Literal.string("1"), unit=exp.var("MILLISECOND"))
            )
        return exp.Dot(this=window, expression=exp.to_identifier(part))

    return rewrite


def _window_table(node: exp.Table, dialect: _Dialect) -> exp.Expression:
    """A window table-valued function in FROM, as a subquery with the columns the engine adds.

    Flink: ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))`` and ``HOP(..., slide, size)`` add
    ``window_start``, ``window_end`` and ``window_time`` (end minus one millisecond). RisingWave:
    ``tumble(t, ts, size)`` and ``hop(t, ts, slide, size)`` add ``window_start`` and ``window_end``.
    """
    call = node.this
    assert isinstance(call, exp.Anonymous)
    if dialect.name == "flink":
        if call.name.lower() != "table" or len(call.expressions) != 1:
            raise UntranslatableQueryError(dialect.name, f"the table function {call.name}", "it is unknown")
        call = call.expressions[0]
        if not isinstance(call, exp.Anonymous):
            raise UntranslatableQueryError(dialect.name, "TABLE(...)", "only window functions are translated")
    name = call.name.lower()
    args = list(call.expressions)
    if name not in ("tumble", "hop") or len(args) != (3 if name == "tumble" else 4):
        raise UntranslatableQueryError(
            dialect.name,
            f"the window table function {call.name}",
            "only TUMBLE(table, time, size) and HOP(table, time, slide, size) are translated",
        )
    source, time = args[0], args[1]
    if isinstance(source, exp.Column):
        source = exp.Table(this=source.this.copy())
    if not isinstance(source, exp.Table) or isinstance(source.this, exp.Anonymous):
        raise UntranslatableQueryError(
            dialect.name, f"the window source {source.sql()}", "it must be a table"
        )
    if isinstance(time, exp.Column) and time.table:
        time = exp.column(time.name, quoted=time.this.quoted)
    if name == "tumble":
        window = _spark_window(time, args[2], None, dialect)
    else:
        window = _spark_window(time, args[3], args[2], dialect)
    columns = [
        exp.Star(),
        exp.alias_(exp.Dot(this=window.copy(), expression=exp.to_identifier("start")), "window_start"),
        exp.alias_(exp.Dot(this=window.copy(), expression=exp.to_identifier("end")), "window_end"),
    ]
    if dialect.name == "flink":
        end = exp.Dot(this=window.copy(), expression=exp.to_identifier("end"))
        millisecond = exp.Interval(this=exp.Literal.string("1"), unit=exp.var("MILLISECOND"))
        columns.append(exp.alias_(exp.Sub(this=end, expression=millisecond), "window_time"))
    select = exp.select(*columns).from_(source.copy())
    alias = node.args.get("alias")
    return exp.Subquery(this=select, alias=alias.copy() if alias is not None else None)


# --- the engines ------------------------------------------------------------------------------------


def _group_windows() -> dict[str, Callable[[exp.Anonymous, _Dialect], exp.Expression]]:
    out: dict[str, Callable[[exp.Anonymous, _Dialect], exp.Expression]] = {}
    for kind in ("tumble", "hop", "session"):
        out[kind] = _group_window(kind, None)
        for part in ("start", "end", "rowtime"):
            out[f"{kind}_{part}"] = _group_window(kind, part)
    return out


_DIALECTS: dict[str, _Dialect] = {
    "datafusion": _Dialect(
        "datafusion",
        _DataFusionSql,
        {
            "to_timestamp": _datafusion_to_timestamp,
            "to_timestamp_seconds": _renamed("timestamp_seconds"),
            "to_timestamp_millis": _renamed("timestamp_millis"),
            "to_timestamp_micros": _renamed("timestamp_micros"),
            "from_unixtime": _renamed("timestamp_seconds"),
            "to_unixtime": _to_unixtime,
            **dict.fromkeys(_JSON_GETTERS, _json_get),
        },
        float_literals=True,
        integer_literal="BIGINT",
    ),
    "flink": _Dialect(
        "flink",
        _FlinkSql,
        {
            **_group_windows(),
            "to_timestamp": _flink_to_timestamp,
            "to_timestamp_ltz": _flink_to_timestamp_ltz,
        },
    ),
    "risingwave": _Dialect("risingwave", RisingWave, {"tumble": lambda n, d: n, "hop": lambda n, d: n}),
}
