"""The spec's schema DDL (``name TYPE`` per column) to and from Arrow types.

The spec names eleven types; real manifests are written by people used to Spark SQL, so the parser
also takes Spark's spellings (``a: INT``, backtick-quoted names, ``ARRAY<T>``, ``STRUCT<...>``,
``MAP<K, V>``, ``NOT NULL``, several columns in one comma-separated entry), those of the reference
implementation's DataFusion-based parser (``BOOL``, ``Int64``, ``Float64``, ``BIGINT UNSIGNED``,
``DOUBLE PRECISION``) and common aliases. Each
alias maps to the closest Arrow type; length limits such as ``VARCHAR(10)`` are accepted and dropped,
since Arrow strings have no length.

Decisions worth knowing:

- ``TIMESTAMP`` without precision is ``timestamp(ms, "UTC")``, the unit of ODF's system columns.
  ``TIME`` without precision is likewise ``time32(ms)``.
- ``TIMESTAMP_NTZ`` is rejected: the spec does not allow timestamps that are not adjusted to UTC yet.
  ``TIMESTAMP_LTZ`` (Spark's name for an instant) is the same as ``TIMESTAMP``.
- ``DECIMAL`` without arguments is Spark's ``DECIMAL(10,0)``; precision above 38 gives decimal256.
- Unsigned integers use DuckDB's names (``UTINYINT`` ... ``UBIGINT``) so that ODF's own ``offset``
  (uint64) and ``op`` (uint8) columns can be written down.

Formatting produces one canonical spelling per type and raises for Arrow types that have none, so that
``parse(format(t)) == t`` always holds. Field metadata and list item names are not part of DDL and are
dropped when formatting.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from odfproj.errors import InvalidValueError

_WORD_RE = re.compile(r"[A-Za-z0-9_]+")
_BARE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PUNCTUATION = "<>(),:"
_QUOTES = '`"'

_MAX_DECIMAL128_PRECISION = 38
_MAX_DECIMAL256_PRECISION = 76
_UTC = "UTC"
_MAX_DEPTH = 64  # far beyond any real schema; keeps hostile input from exhausting the Python stack


class _DdlError(Exception):
    """A problem inside one column or type; the public functions add which text it was in."""

    def __init__(self, problem: str, hint: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.hint = hint


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "name" (quoted), "punct" or "end"
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char in _PUNCTUATION:
            tokens.append(_Token("punct", char, i))
            i += 1
        elif char in _QUOTES:
            name, end = _read_quoted(text, i)
            tokens.append(_Token("name", name, i))
            i = end
        elif match := _WORD_RE.match(text, i):
            tokens.append(_Token("word", match.group(), i))
            i = match.end()
        else:
            raise _DdlError(f"unexpected character {char!r} at position {i}")
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _read_quoted(text: str, start: int) -> tuple[str, int]:
    """Read a quoted identifier; a doubled quote character inside stands for itself (as in Spark)."""
    quote = text[start]
    parts: list[str] = []
    i = start + 1
    while True:
        end = text.find(quote, i)
        if end < 0:
            raise _DdlError(f"unterminated {quote}-quoted name starting at position {start}")
        parts.append(text[i:end])
        if text.startswith(quote * 2, end):
            parts.append(quote)
            i = end + 2
        else:
            return "".join(parts), end + 1


# --- types ----------------------------------------------------------------------------------------------

_UNIT_BY_PRECISION = {0: "s", **dict.fromkeys((1, 2, 3), "ms"), **dict.fromkeys((4, 5, 6), "us")}
_PRECISION_BY_UNIT = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _time_unit(name: str, args: list[int]) -> str:
    if not args:
        return "ms"
    _expect_args(name, args, 1, 1)
    precision = args[0]
    if precision > 9:
        raise _DdlError(f"{name} precision must be 0..9 fractional digits, got {precision}")
    return _UNIT_BY_PRECISION.get(precision, "ns")


def _timestamp(name: str, args: list[int]) -> pa.DataType:
    return pa.timestamp(_time_unit(name, args), tz=_UTC)


def _time(name: str, args: list[int]) -> pa.DataType:
    unit = _time_unit(name, args)
    return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)


def _decimal(name: str, args: list[int]) -> pa.DataType:
    _expect_args(name, args, 0, 2)
    precision = args[0] if args else 10  # Spark's default for a bare DECIMAL
    scale = args[1] if len(args) == 2 else 0
    if not 1 <= precision <= _MAX_DECIMAL256_PRECISION:
        raise _DdlError(f"{name} precision must be 1..{_MAX_DECIMAL256_PRECISION}, got {precision}")
    if scale > precision:
        raise _DdlError(f"{name} scale {scale} is larger than its precision {precision}")
    if precision <= _MAX_DECIMAL128_PRECISION:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


def _sized_string(name: str, args: list[int]) -> pa.DataType:
    _expect_args(name, args, 0, 1)
    if args and args[0] < 1:
        raise _DdlError(f"{name} length must be at least 1, got {args[0]}")
    return pa.utf8()


def _ntz(name: str, args: list[int]) -> pa.DataType:
    raise _DdlError(
        f"unsupported type {name!r}",
        "ODF timestamps are always adjusted to UTC; use TIMESTAMP",
    )


def _plain(t: pa.DataType) -> Callable[[str, list[int]], pa.DataType]:
    def build(name: str, args: list[int]) -> pa.DataType:
        _expect_args(name, args, 0, 0)
        return t

    return build


def _expect_args(name: str, args: list[int], least: int, most: int) -> None:
    if not least <= len(args) <= most:
        if most == 0:
            raise _DdlError(f"type {name} takes no arguments")
        raise _DdlError(f"type {name} takes {least}..{most} arguments, got {len(args)}")


_TYPES: dict[str, Callable[[str, list[int]], pa.DataType]] = {
    "BOOLEAN": _plain(pa.bool_()),
    "BOOL": _plain(pa.bool_()),
    "TINYINT": _plain(pa.int8()),
    "BYTE": _plain(pa.int8()),
    "SMALLINT": _plain(pa.int16()),
    "SHORT": _plain(pa.int16()),
    "INT": _plain(pa.int32()),
    "INTEGER": _plain(pa.int32()),
    "BIGINT": _plain(pa.int64()),
    "LONG": _plain(pa.int64()),
    "UTINYINT": _plain(pa.uint8()),
    "USMALLINT": _plain(pa.uint16()),
    "UINTEGER": _plain(pa.uint32()),
    "UBIGINT": _plain(pa.uint64()),
    # The spellings of the reference implementation's parser (DataFusion's SQL types).
    "INT8": _plain(pa.int8()),
    "INT16": _plain(pa.int16()),
    "INT32": _plain(pa.int32()),
    "INT64": _plain(pa.int64()),
    "UINT8": _plain(pa.uint8()),
    "UINT16": _plain(pa.uint16()),
    "UINT32": _plain(pa.uint32()),
    "UINT64": _plain(pa.uint64()),
    "FLOAT32": _plain(pa.float32()),
    "FLOAT64": _plain(pa.float64()),
    "FLOAT": _plain(pa.float32()),
    "REAL": _plain(pa.float32()),
    "DOUBLE": _plain(pa.float64()),
    "DECIMAL": _decimal,
    "DEC": _decimal,
    "NUMERIC": _decimal,
    "STRING": _plain(pa.utf8()),
    "TEXT": _plain(pa.utf8()),
    "VARCHAR": _sized_string,
    "CHAR": _sized_string,
    "BINARY": _plain(pa.binary()),
    "UUID": _plain(pa.binary(16)),
    "DATE": _plain(pa.date32()),
    "TIME": _time,
    "TIMESTAMP": _timestamp,
    "TIMESTAMP_LTZ": _timestamp,
    "TIMESTAMP_NTZ": _ntz,
}
_NESTED = ("ARRAY", "STRUCT", "MAP")
_UNSIGNED = {
    "TINYINT": "UTINYINT",
    "SMALLINT": "USMALLINT",
    "INT": "UINTEGER",
    "INTEGER": "UINTEGER",
    "BIGINT": "UBIGINT",
}

# The one spelling format_ddl_type writes for each argument-less type.
_CANONICAL: list[tuple[pa.DataType, str]] = [
    (_TYPES[name](name, []), name)
    for name in (
        *("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"),
        *("UBIGINT", "FLOAT", "DOUBLE", "STRING", "BINARY", "UUID", "DATE"),
    )
]


class _Parser:
    """Recursive descent over the tokens of one column or one type."""

    def __init__(self, text: str):
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        if token.kind != "end":
            self.i += 1
        return token

    def accept(self, punct: str) -> bool:
        if self.peek.kind == "punct" and self.peek.text == punct:
            self.i += 1
            return True
        return False

    def expect(self, punct: str, context: str) -> None:
        if not self.accept(punct):
            raise _DdlError(f"expected '{punct}' {context} but found {_describe(self.peek)}")

    def expect_end(self) -> None:
        if self.peek.kind != "end":
            raise _DdlError(f"unexpected {_describe(self.peek)}")

    def accept_word(self, word: str) -> bool:
        if self.peek.kind == "word" and self.peek.text.upper() == word:
            self.i += 1
            return True
        return False

    def column(self) -> pa.Field:
        """``name [:] TYPE [NOT NULL]``, also used for STRUCT members."""
        token = self.take()
        if token.kind not in ("word", "name"):
            raise _DdlError(f"expected a column name but found {_describe(token)}")
        if not token.text:
            raise _DdlError("a column name must not be empty")
        self.accept(":")
        if self.peek.kind == "end" or (self.peek.kind == "punct" and self.peek.text in ",>"):
            raise _DdlError("missing type", "expected 'name TYPE'")
        data_type = self.data_type()
        return pa.field(token.text, data_type, nullable=self.nullability())

    def nullability(self) -> bool:
        if self.accept_word("NOT"):
            if not self.accept_word("NULL"):
                raise _DdlError(f"expected NULL after NOT but found {_describe(self.peek)}")
            return False
        self.accept_word("NULL")
        return True

    def data_type(self) -> pa.DataType:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _DdlError(f"types are nested deeper than {_MAX_DEPTH} levels")
        try:
            return self._data_type()
        finally:
            self.depth -= 1

    def _data_type(self) -> pa.DataType:
        token = self.take()
        if token.kind != "word":
            raise _DdlError(f"expected a type but found {_describe(token)}")
        name = token.text.upper()
        if name == "ARRAY":
            self.expect("<", "after ARRAY")
            item = self.data_type()
            item_field = pa.field("item", item, nullable=self.nullability())
            self.expect(">", "to close ARRAY<")
            return pa.list_(item_field)
        if name == "STRUCT":
            return self.struct()
        if name == "MAP":
            self.expect("<", "after MAP")
            key = self.data_type()
            self.nullability()  # map keys are never null; writing NOT NULL is allowed and changes nothing
            self.expect(",", "between the MAP key and value types")
            value = self.data_type()
            value_field = pa.field("value", value, nullable=self.nullability())
            self.expect(">", "to close MAP<")
            return pa.map_(pa.field("key", key, nullable=False), value_field)
        if name in _UNSIGNED and self.accept_word("UNSIGNED"):
            name = _UNSIGNED[name]  # MySQL's spelling, which the reference's parser takes
        elif name == "DOUBLE":
            self.accept_word("PRECISION")
        build = _TYPES.get(name)
        if build is None:
            close = difflib.get_close_matches(name, [*_TYPES, *_NESTED], n=1)
            raise _DdlError(f"unknown type {token.text!r}", f"did you mean {close[0]}?" if close else None)
        return build(name, self.arguments(name))

    def struct(self) -> pa.DataType:
        self.expect("<", "after STRUCT")
        fields: list[pa.Field] = []
        if not self.accept(">"):
            while True:
                fields.append(self.column())
                if self.accept(">"):
                    break
                self.expect(",", "between STRUCT fields")
        _check_unique([f.name for f in fields], "STRUCT field")
        return pa.struct(fields)

    def arguments(self, name: str) -> list[int]:
        if not self.accept("("):
            return []
        args: list[int] = []
        while True:
            token = self.take()
            if token.kind != "word" or not token.text.isdigit():
                raise _DdlError(f"expected a number in {name}(...) but found {_describe(token)}")
            args.append(int(token.text))
            if self.accept(")"):
                return args
            self.expect(",", f"between {name} arguments")


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the text"
    return f"{token.text!r} at position {token.pos}"


def _check_unique(names: Sequence[str], what: str) -> None:
    """Reject repeated names ignoring case, because Spark resolves column names case-insensitively."""
    seen: dict[str, str] = {}
    for name in names:
        key = name.lower()
        if key in seen:
            other = seen[key]
            same = "" if other == name else f" (same as {other!r} ignoring case)"
            raise _DdlError(f"duplicate {what} name {name!r}{same}")
        seen[key] = name


def _split_columns(entry: str) -> list[str]:
    """Split at commas outside quotes, ``<...>`` and ``(...)``: ``a DECIMAL(18,10), b STRUCT<x: INT, y: INT>``."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    for i, char in enumerate(entry):
        if quote:
            if char == quote:
                quote = None  # a doubled quote closes and reopens, which is harmless here
        elif char in _QUOTES:
            quote = char
        elif char in "<(":
            depth += 1
        elif char in ">)":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append(entry[start:i])
            start = i + 1
    parts.append(entry[start:])
    return parts


def _fail(error: _DdlError, where: str) -> InvalidValueError:
    message = f"{error.problem} in {where}"
    return InvalidValueError(f"{message}: {error.hint}" if error.hint else message)


# --- public API -----------------------------------------------------------------------------------------


def parse_ddl_type(text: str) -> pa.DataType:
    """Parse one DDL type such as ``DECIMAL(18,10)`` or ``ARRAY<STRING>``."""
    try:
        parser = _Parser(text)
        data_type = parser.data_type()
        parser.expect_end()
    except _DdlError as e:
        raise _fail(e, f"type {text.strip()!r}") from None
    return data_type


def parse_ddl_schema(columns: Sequence[str] | str) -> pa.Schema:
    """Parse a manifest's ``schema`` list; an entry may hold one column or several separated by commas.

    A trailing comma is allowed, as in the spec's own example.
    """
    if isinstance(columns, str):
        columns = [columns]
    fields: list[pa.Field] = []
    for entry in columns:
        if not isinstance(entry, str):
            raise InvalidValueError(f"invalid schema column {entry!r}: expected a string like 'name TYPE'")
        parts = _split_columns(entry)
        if len(parts) > 1 and not parts[-1].strip():
            parts.pop()
        for part in parts:
            text = part.strip()
            if not text:
                raise InvalidValueError(f"empty column definition in {entry.strip()!r}")
            try:
                parser = _Parser(text)
                field = parser.column()
                parser.expect_end()
                _check_unique([*(f.name for f in fields), field.name], "column")
            except _DdlError as e:
                raise _fail(e, f"column {text!r}") from None
            fields.append(field)
    return pa.schema(fields)


def format_ddl_type(data_type: pa.DataType) -> str:
    """The canonical DDL spelling of an Arrow type; raises if DDL cannot express it exactly."""
    t = data_type
    for simple, name in _CANONICAL:
        if t == simple:
            return name
    if pa.types.is_decimal128(t) or (pa.types.is_decimal256(t) and t.precision > _MAX_DECIMAL128_PRECISION):
        if t.scale >= 0:
            return f"DECIMAL({t.precision},{t.scale})"
    elif pa.types.is_timestamp(t) and t.tz == _UTC:
        return f"TIMESTAMP({_PRECISION_BY_UNIT[t.unit]})"
    elif pa.types.is_time(t):
        return f"TIME({_PRECISION_BY_UNIT[t.unit]})"
    elif pa.types.is_list(t):
        return f"ARRAY<{_format_member(t.value_field)}>"
    elif pa.types.is_struct(t):
        members = ", ".join(f"{_quote(f.name)}: {_format_member(f)}" for f in t)
        return f"STRUCT<{members}>"
    elif pa.types.is_map(t) and not t.keys_sorted:
        return f"MAP<{format_ddl_type(t.key_type)}, {_format_member(t.item_field)}>"
    if pa.types.is_timestamp(t):
        raise InvalidValueError(f"Arrow type {t} has no DDL spelling: ODF timestamps have time zone 'UTC'")
    raise InvalidValueError(f"Arrow type {t} has no DDL spelling")


def format_ddl_schema(schema: pa.Schema) -> list[str]:
    """One canonical ``name TYPE [NOT NULL]`` entry per column, the inverse of :func:`parse_ddl_schema`."""
    out: list[str] = []
    for field in schema:
        try:
            out.append(f"{_quote(field.name)} {_format_member(field)}")
        except InvalidValueError as e:
            raise InvalidValueError(f"cannot write column {field.name!r} as DDL: {e}") from None
    return out


def _format_member(field: pa.Field) -> str:
    spelled = format_ddl_type(field.type)
    return spelled if field.nullable else f"{spelled} NOT NULL"


def _quote(name: str) -> str:
    if _BARE_NAME_RE.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"
