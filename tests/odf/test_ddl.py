"""Schema DDL <-> Arrow: the spec's types, the spellings real manifests use, errors, and round trips."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from odfproj.errors import InvalidValueError
from odfproj.odf.ddl import format_ddl_schema, format_ddl_type, parse_ddl_schema, parse_ddl_type
from tests.conftest import REFERENCE_MANIFESTS_DIR

# --- the spec's type table ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ddl", "arrow"),
    [
        ("BOOLEAN", pa.bool_()),
        ("INT", pa.int32()),
        ("BIGINT", pa.int64()),
        ("DECIMAL(18,10)", pa.decimal128(18, 10)),
        ("DECIMAL(38, 0)", pa.decimal128(38, 0)),
        ("FLOAT", pa.float32()),
        ("DOUBLE", pa.float64()),
        ("UUID", pa.binary(16)),
        ("STRING", pa.utf8()),
        ("TIMESTAMP", pa.timestamp("ms", tz="UTC")),
        ("TIMESTAMP(0)", pa.timestamp("s", tz="UTC")),
        ("TIMESTAMP(1)", pa.timestamp("ms", tz="UTC")),
        ("TIMESTAMP(3)", pa.timestamp("ms", tz="UTC")),
        ("TIMESTAMP(4)", pa.timestamp("us", tz="UTC")),
        ("TIMESTAMP(6)", pa.timestamp("us", tz="UTC")),
        ("TIMESTAMP(7)", pa.timestamp("ns", tz="UTC")),
        ("TIMESTAMP(9)", pa.timestamp("ns", tz="UTC")),
        ("DATE", pa.date32()),
        ("TIME", pa.time32("ms")),
        ("TIME(0)", pa.time32("s")),
        ("TIME(2)", pa.time32("ms")),
        ("TIME(3)", pa.time32("ms")),
        ("TIME(5)", pa.time64("us")),
        ("TIME(6)", pa.time64("us")),
        ("TIME(8)", pa.time64("ns")),
        ("TIME(9)", pa.time64("ns")),
    ],
)
def test_spec_types(ddl: str, arrow: pa.DataType) -> None:
    assert parse_ddl_type(ddl) == arrow


@pytest.mark.parametrize(
    ("ddl", "arrow"),
    [
        ("boolean", pa.bool_()),
        ("Bool", pa.bool_()),
        ("TINYINT", pa.int8()),
        ("BYTE", pa.int8()),
        ("SMALLINT", pa.int16()),
        ("SHORT", pa.int16()),
        ("integer", pa.int32()),
        ("LONG", pa.int64()),
        ("UTINYINT", pa.uint8()),
        ("USMALLINT", pa.uint16()),
        ("UINTEGER", pa.uint32()),
        ("UBIGINT", pa.uint64()),
        ("REAL", pa.float32()),
        ("Int64", pa.int64()),
        ("INT32", pa.int32()),
        ("UInt32", pa.uint32()),
        ("Float64", pa.float64()),
        ("float32", pa.float32()),
        ("INT UNSIGNED", pa.uint32()),
        ("BIGINT UNSIGNED", pa.uint64()),
        ("DOUBLE PRECISION", pa.float64()),
        ("TEXT", pa.utf8()),
        ("VARCHAR", pa.utf8()),
        ("VARCHAR(200)", pa.utf8()),
        ("CHAR(1)", pa.utf8()),
        ("BINARY", pa.binary()),
        ("DECIMAL", pa.decimal128(10, 0)),
        ("DECIMAL(5)", pa.decimal128(5, 0)),
        ("NUMERIC(7,2)", pa.decimal128(7, 2)),
        ("DEC(7,2)", pa.decimal128(7, 2)),
        ("DECIMAL(39,2)", pa.decimal256(39, 2)),
        ("DECIMAL(76,76)", pa.decimal256(76, 76)),
        ("TIMESTAMP_LTZ", pa.timestamp("ms", tz="UTC")),
        ("timestamp(6)", pa.timestamp("us", tz="UTC")),
        (" TIMESTAMP ( 6 ) ", pa.timestamp("us", tz="UTC")),
    ],
)
def test_aliases_and_spellings(ddl: str, arrow: pa.DataType) -> None:
    assert parse_ddl_type(ddl) == arrow


@pytest.mark.parametrize(
    ("ddl", "arrow"),
    [
        ("ARRAY<STRING>", pa.list_(pa.utf8())),
        ("array<int not null>", pa.list_(pa.field("item", pa.int32(), nullable=False))),
        ("ARRAY<ARRAY<INT>>", pa.list_(pa.list_(pa.int32()))),
        ("STRUCT<>", pa.struct([])),
        ("STRUCT<a: INT, b STRING>", pa.struct([("a", pa.int32()), ("b", pa.utf8())])),
        (
            "STRUCT<`my field`: DECIMAL(18,10) NOT NULL, b: ARRAY<STRUCT<c: DATE>>>",
            pa.struct(
                [
                    pa.field("my field", pa.decimal128(18, 10), nullable=False),
                    pa.field("b", pa.list_(pa.struct([("c", pa.date32())]))),
                ]
            ),
        ),
        ("MAP<STRING, BIGINT>", pa.map_(pa.utf8(), pa.int64())),
        ("MAP<STRING NOT NULL, ARRAY<INT>>", pa.map_(pa.utf8(), pa.list_(pa.int32()))),
        ("MAP<INT, DOUBLE NOT NULL>", pa.map_(pa.int32(), pa.field("value", pa.float64(), nullable=False))),
    ],
)
def test_nested_types(ddl: str, arrow: pa.DataType) -> None:
    assert parse_ddl_type(ddl) == arrow


# --- columns and schemas --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column",
    ["city STRING", "city: STRING", "city:STRING", "  city   string  ", "`city` STRING", '"city" STRING'],
)
def test_column_forms(column: str) -> None:
    assert parse_ddl_schema([column]) == pa.schema([("city", pa.utf8())])


def test_quoted_names_may_hold_anything_and_escape_their_quote() -> None:
    schema = parse_ddl_schema(["`my col, <weird>` INT", "`a``b` INT", '"x""y" INT'])
    assert schema.names == ["my col, <weird>", "a`b", 'x"y']


def test_not_null_makes_a_column_non_nullable() -> None:
    schema = parse_ddl_schema(["id BIGINT NOT NULL", "name STRING NULL", "x INT not null"])
    assert [f.nullable for f in schema] == [False, True, False]


def test_several_columns_in_one_entry_like_spark() -> None:
    schema = parse_ddl_schema(
        ["a INT, b DECIMAL(18,10), c STRUCT<x: INT, y: MAP<STRING, INT>>, `d, e` STRING", "f DATE"]
    )
    assert schema == pa.schema(
        [
            ("a", pa.int32()),
            ("b", pa.decimal128(18, 10)),
            ("c", pa.struct([("x", pa.int32()), ("y", pa.map_(pa.utf8(), pa.int32()))])),
            ("d, e", pa.utf8()),
            ("f", pa.date32()),
        ]
    )


def test_a_lone_string_is_one_entry() -> None:
    assert parse_ddl_schema("a INT, b STRING") == pa.schema([("a", pa.int32()), ("b", pa.utf8())])


def test_empty_list_gives_an_empty_schema() -> None:
    assert parse_ddl_schema([]) == pa.schema([])


def test_spec_example_with_trailing_commas() -> None:
    example = """
        registration_time TIMESTAMP(3),
        registration_id UUID,
        email STRING,
        first_name STRING,
        last_name STRING,
        date_of_birth DATE,
    """
    expected = pa.schema(
        [
            ("registration_time", pa.timestamp("ms", tz="UTC")),
            ("registration_id", pa.binary(16)),
            ("email", pa.utf8()),
            ("first_name", pa.utf8()),
            ("last_name", pa.utf8()),
            ("date_of_birth", pa.date32()),
        ]
    )
    lines = [line.strip() for line in example.strip().splitlines()]
    assert parse_ddl_schema(lines) == expected
    assert parse_ddl_schema([example]) == expected


def _read_schemas(node: Any) -> list[list[str]]:
    """Every ``read.schema`` list anywhere in a parsed manifest."""
    found: list[list[str]] = []
    if isinstance(node, dict):
        read = node.get("read")
        if isinstance(read, dict) and "schema" in read:
            found.append(read["schema"])
        for value in node.values():
            found.extend(_read_schemas(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_read_schemas(item))
    return found


REFERENCE_MANIFESTS = sorted(REFERENCE_MANIFESTS_DIR.glob("*.yaml"))


@pytest.mark.parametrize("path", REFERENCE_MANIFESTS, ids=lambda p: p.name)
def test_reference_manifest_schemas_parse(path: Path) -> None:
    for columns in _read_schemas(yaml.safe_load(path.read_text())):
        schema = parse_ddl_schema(columns)
        assert len(schema) == len(columns)
        assert parse_ddl_schema(format_ddl_schema(schema)) == schema


def test_reference_manifests_contain_schemas() -> None:
    counts = {p.name: len(_read_schemas(yaml.safe_load(p.read_text()))) for p in REFERENCE_MANIFESTS}
    assert sum(counts.values()) >= 5
    # The manifest whose schema lines carry YAML comments.
    raw = parse_ddl_schema(
        _read_schemas(yaml.safe_load((REFERENCE_MANIFESTS_DIR / "org.geonames.cities.raw.yaml").read_text()))[
            0
        ]
    )
    assert raw.field("geonameid").type == pa.int64()
    assert raw.field("modification_date").type == pa.utf8()


def test_bank_of_canada_schema() -> None:
    manifest = yaml.safe_load(
        (REFERENCE_MANIFESTS_DIR / "ca.bankofcanada.exchange-rates.daily.yaml").read_text()
    )
    schema = parse_ddl_schema(_read_schemas(manifest)[0])
    assert schema.field("date").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("fxusdcad").type == pa.decimal128(18, 10)


# --- errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["city STRNG"], "unknown type 'STRNG' in column 'city STRNG': did you mean STRING?"),
        (["a INT", "b FOOBAR"], "unknown type 'FOOBAR' in column 'b FOOBAR'"),
        (["city"], "missing type in column 'city': expected 'name TYPE'"),
        (["city:"], "missing type in column 'city:'"),
        (["a INT, b"], "missing type in column 'b'"),
        (["x TIMESTAMP_NTZ"], "unsupported type 'TIMESTAMP_NTZ' in column 'x TIMESTAMP_NTZ': ODF timestamps"),
        (["a DECIMAL(0,0)"], "DECIMAL precision must be 1..76, got 0 in column 'a DECIMAL(0,0)'"),
        (["a DECIMAL(77,0)"], "DECIMAL precision must be 1..76, got 77"),
        (["a DECIMAL(5,6)"], "DECIMAL scale 6 is larger than its precision 5"),
        (["a DECIMAL(1,2,3)"], "type DECIMAL takes 0..2 arguments, got 3"),
        (["a DECIMAL(x)"], "expected a number in DECIMAL(...) but found 'x'"),
        (["a TIMESTAMP(10)"], "TIMESTAMP precision must be 0..9 fractional digits, got 10"),
        (["a TIME(1,2)"], "type TIME takes 1..1 arguments, got 2"),
        (["a INT(3)"], "type INT takes no arguments in column 'a INT(3)'"),
        (["a VARCHAR(0)"], "VARCHAR length must be at least 1"),
        (["a ARRAY<INT"], "expected '>' to close ARRAY< but found the end of the text"),
        (["a ARRAY<>"], "expected a type but found '>' at position 8"),
        (["a ARRAY INT"], "expected '<' after ARRAY but found 'INT'"),
        (["a MAP<INT>"], "expected ',' between the MAP key and value types"),
        (["a STRUCT<x INT y INT>"], "expected ',' between STRUCT fields but found 'y'"),
        (["a STRUCT<x INT, x INT>"], "duplicate STRUCT field name 'x'"),
        (["a INT b"], "unexpected 'b' at position 6 in column 'a INT b'"),
        (["a INT NOT"], "expected NULL after NOT"),
        (["a INT", "A STRING"], "duplicate column name 'A' (same as 'a' ignoring case) in column 'A STRING'"),
        (["a INT, a INT"], "duplicate column name 'a' in column 'a INT'"),
        (["`a INT"], "unterminated `-quoted name starting at position 0"),
        (["`` INT"], "a column name must not be empty"),
        (["a ti-mestamp"], "unexpected character '-' at position 4"),
        (["a INT,,b INT"], "empty column definition in 'a INT,,b INT'"),
        ([""], "empty column definition in ''"),
        ([", a INT"], "empty column definition"),
        (["(a) INT"], "expected a column name but found '('"),
        ([42], "invalid schema column 42: expected a string"),
        (["a " + "ARRAY<" * 100 + "INT" + ">" * 100], "types are nested deeper than 64 levels"),
    ],
)
def test_errors_name_the_column_and_the_problem(columns: list[Any], message: str) -> None:
    with pytest.raises(InvalidValueError) as info:
        parse_ddl_schema(columns)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("STRNG", "unknown type 'STRNG' in type 'STRNG': did you mean STRING?"),
        ("INT INT", "unexpected 'INT' at position 4 in type 'INT INT'"),
        ("", "expected a type but found the end of the text in type ''"),
        ("STRUCT<a INT", "expected ',' between STRUCT fields but found the end of the text"),
        ("ARRAY<INT>>", "unexpected '>' at position 10"),
    ],
)
def test_type_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError) as info:
        parse_ddl_type(text)
    assert message in str(info.value)


# --- formatting -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arrow", "ddl"),
    [
        (pa.bool_(), "BOOLEAN"),
        (pa.int8(), "TINYINT"),
        (pa.int32(), "INT"),
        (pa.uint64(), "UBIGINT"),
        (pa.float32(), "FLOAT"),
        (pa.utf8(), "STRING"),
        (pa.binary(16), "UUID"),
        (pa.decimal128(18, 10), "DECIMAL(18,10)"),
        (pa.decimal256(50, 2), "DECIMAL(50,2)"),
        (pa.timestamp("ms", tz="UTC"), "TIMESTAMP(3)"),
        (pa.timestamp("ns", tz="UTC"), "TIMESTAMP(9)"),
        (pa.time32("s"), "TIME(0)"),
        (pa.time64("us"), "TIME(6)"),
        (pa.list_(pa.field("element", pa.int32(), nullable=False)), "ARRAY<INT NOT NULL>"),
        (pa.struct([("a b", pa.int32()), ("c", pa.utf8())]), "STRUCT<`a b`: INT, c: STRING>"),
        (pa.map_(pa.utf8(), pa.float64()), "MAP<STRING, DOUBLE>"),
    ],
)
def test_format_type_is_canonical(arrow: pa.DataType, ddl: str) -> None:
    assert format_ddl_type(arrow) == ddl
    assert parse_ddl_type(ddl) == arrow


def test_format_schema() -> None:
    schema = pa.schema(
        [
            pa.field("offset", pa.uint64(), nullable=False),
            pa.field("op", pa.uint8(), nullable=False),
            ("system_time", pa.timestamp("ms", tz="UTC")),
            ("my col", pa.utf8()),
            ("1st", pa.int32()),
            ("a`b", pa.int32()),
        ]
    )
    assert format_ddl_schema(schema) == [
        "offset UBIGINT NOT NULL",
        "op UTINYINT NOT NULL",
        "system_time TIMESTAMP(3)",
        "`my col` STRING",
        "`1st` INT",
        "`a``b` INT",
    ]
    assert parse_ddl_schema(format_ddl_schema(schema)) == schema


@pytest.mark.parametrize(
    ("arrow", "message"),
    [
        (pa.large_utf8(), "Arrow type large_string has no DDL spelling"),
        (pa.timestamp("ms"), "ODF timestamps have time zone 'UTC'"),
        (pa.timestamp("ms", tz="Europe/Paris"), "has no DDL spelling"),
        (pa.decimal256(10, 2), "has no DDL spelling"),
        (pa.decimal128(10, -2), "has no DDL spelling"),
        (pa.binary(8), "has no DDL spelling"),
        (pa.float16(), "has no DDL spelling"),
        (pa.date64(), "has no DDL spelling"),
        (pa.large_list(pa.int32()), "has no DDL spelling"),
        (pa.map_(pa.utf8(), pa.int32(), keys_sorted=True), "has no DDL spelling"),
        (pa.list_(pa.large_utf8()), "Arrow type large_string has no DDL spelling"),
    ],
)
def test_format_rejects_types_ddl_cannot_express(arrow: pa.DataType, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        format_ddl_type(arrow)


def test_format_schema_names_the_column() -> None:
    with pytest.raises(InvalidValueError, match="cannot write column 'x' as DDL: Arrow type large_string"):
        format_ddl_schema(pa.schema([("x", pa.large_utf8())]))


# --- round trips ----------------------------------------------------------------------------------------

_leaf_types = st.one_of(
    st.sampled_from(
        [
            pa.bool_(),
            pa.int8(),
            pa.int16(),
            pa.int32(),
            pa.int64(),
            pa.uint8(),
            pa.uint16(),
            pa.uint32(),
            pa.uint64(),
            pa.float32(),
            pa.float64(),
            pa.utf8(),
            pa.binary(),
            pa.binary(16),
            pa.date32(),
            pa.time32("s"),
            pa.time32("ms"),
            pa.time64("us"),
            pa.time64("ns"),
        ]
    ),
    st.sampled_from(["s", "ms", "us", "ns"]).map(lambda unit: pa.timestamp(unit, tz="UTC")),
    st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: pa.decimal128(p, s))),
    st.integers(39, 76).flatmap(lambda p: st.integers(0, p).map(lambda s: pa.decimal256(p, s))),
)
_names = st.text(min_size=1, max_size=8)


def _fields(children: st.SearchStrategy[pa.DataType], max_size: int) -> st.SearchStrategy[list[pa.Field]]:
    return st.lists(
        st.tuples(_names, children, st.booleans()), max_size=max_size, unique_by=lambda f: f[0].lower()
    ).map(lambda fs: [pa.field(n, t, nullable=nullable) for n, t, nullable in fs])


ddl_types = st.recursive(
    _leaf_types,
    lambda children: st.one_of(
        st.tuples(children, st.booleans()).map(lambda x: pa.list_(pa.field("item", x[0], nullable=x[1]))),
        _fields(children, 4).map(pa.struct),
        st.tuples(_leaf_types, children, st.booleans()).map(
            lambda x: pa.map_(x[0], pa.field("value", x[1], nullable=x[2]))
        ),
    ),
    max_leaves=8,
)


@given(ddl_types)
def test_type_round_trip(data_type: pa.DataType) -> None:
    text = format_ddl_type(data_type)
    assert parse_ddl_type(text) == data_type
    assert format_ddl_type(parse_ddl_type(text)) == text


@given(_fields(ddl_types, 6).map(pa.schema), st.booleans())
def test_schema_round_trip(schema: pa.Schema, one_entry: bool) -> None:
    columns = format_ddl_schema(schema)
    parsed = parse_ddl_schema([", ".join(columns)] if one_entry and columns else columns)
    assert parsed.equals(schema)
    assert [f.nullable for f in parsed] == [f.nullable for f in schema]


@given(st.text(max_size=30))
def test_any_text_is_parsed_or_rejected_cleanly(text: str) -> None:
    with contextlib.suppress(InvalidValueError):
        parse_ddl_schema([text])
