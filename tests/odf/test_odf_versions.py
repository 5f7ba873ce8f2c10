"""Manifests of every ODF version 0.35 to 0.39: each form loads as the 0.35 events it means, or is refused.

Inputs written elsewhere where there are any: kamu-contrib before and after its move to the 0.38 forms,
kamu-cli's golden YAML, the 0.39 spec's examples (tests/fixtures/*/SOURCES.md). The constructs no public
manifest uses yet (the 0.37 merge strategies, the types without a 0.35 equivalent) are written here from
the spec's schemas. No JVM.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from odfproj.odf.ddl import parse_ddl_schema
from odfproj.odf.upgrade import Newer, refusal_for, upgrade_document
from odfproj.odf.validation import check_manifest
from odfproj.odf.yaml_codec import manifest_from_data
from tests import manifests

FIXTURES = Path(__file__).parents[1] / "fixtures"
CONTRIB = FIXTURES / "kamu-contrib"
VERSIONS = FIXTURES / "odf-versions"

NEEDS = '(odf_version: "0.39" in odfproj.yaml)'


def snapshot(data: bytes, odf_version: str = "0.35"):
    checked = check_manifest(data, "m.yaml", odf_version=odf_version)
    assert not checked.problems, [str(p) for p in checked.problems]
    return manifest_from_data(checked.document, expected_kind="DatasetSnapshot")[0]


def only_problem(data: bytes, odf_version: str = "0.35") -> str:
    problems = check_manifest(data, "datasets/x.yaml", odf_version=odf_version).problems
    assert len(problems) == 1, [str(p) for p in problems]
    assert "\n" not in str(problems[0])
    return str(problems[0])


# ------------------------------------------------------------------------------------------------
# kamu-contrib: the 0.38 DataSchema forms mean the columns of the 0.35 DDL they replaced

#: Manifests whose columns kamu changed on purpose in the same commit, with its own note.
CHANGED_BY_KAMU = {
    # "# TODO: Use DECIMAL type": the DECIMAL(18,10) rates became float64 and the columns were renamed.
    "ca.bankofcanada/ca.bankofcanada.exchange-rates.daily.yaml",
}


def _read_schemas(path: Path) -> list[pa.Schema]:
    snap = snapshot(path.read_bytes())
    return [
        parse_ddl_schema(e.read.schema) for e in snap.metadata if getattr(e, "read", None) and e.read.schema
    ]


def _nullable(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field and nested field nullable: the 0.35 DDL did not say NOT NULL."""
    return pa.schema([_nullable_field(f) for f in schema])


def _nullable_field(field: pa.Field) -> pa.Field:
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_nullable_field(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_nullable_field(t.value_field))
    return pa.field(field.name, t, nullable=True)


REWRITTEN = sorted(
    p.relative_to(CONTRIB / "a9abeb9").as_posix() for p in (CONTRIB / "a9abeb9").rglob("*.yaml")
)


@pytest.mark.parametrize("rel_path", REWRITTEN)
def test_kamu_contribs_data_schemas_upgrade_to_the_columns_of_their_ddl(rel_path):
    before, after = (
        _read_schemas(CONTRIB / "a9abeb9" / rel_path),
        _read_schemas(CONTRIB / "15059c7" / rel_path),
    )
    assert "fields:" in (CONTRIB / "15059c7" / rel_path).read_text()  # the 0.38 form, upgraded
    assert before and len(before) == len(after)
    same = [_nullable(a) == _nullable(b) for a, b in zip(before, after, strict=True)]
    assert all(same) is (rel_path not in CHANGED_BY_KAMU), (before, after)
    for schema in after:  # a type that is not Option is required, as the DataSchema says
        assert any(not f.nullable for f in schema) or rel_path in CHANGED_BY_KAMU


def test_the_rewritten_list_is_what_kamu_changed():
    assert len(REWRITTEN) == 25 and set(REWRITTEN) >= CHANGED_BY_KAMU


# ------------------------------------------------------------------------------------------------
# kamu-cli's golden YAML and the 0.39 spec's examples


@pytest.mark.parametrize("odf_version", ["0.35", "0.39"])
def test_kamu_clis_golden_snapshot_loads_in_every_workspace(odf_version):
    data = (VERSIONS / "kamu-cli-serde_dataset_snapshot_root.yaml").read_bytes()
    snap = snapshot(data, odf_version)
    assert snap.name == "kamu.test" and type(snap.metadata[0].fetch.cache).__name__ == "SourceCachingForever"


def test_kamu_clis_short_long_and_full_timestamps_keep_their_defaults():
    schema = yaml.safe_load((VERSIONS / "kamu-cli-serde_enum_short_form.data-schema.yaml").read_text())
    manifest = _root(read={"kind": "NdJson", "schema": schema})
    columns = parse_ddl_schema(snapshot(manifest).metadata[0].read.schema)
    # The 0.38 defaults: unit Millisecond, timezone UTC; not Option: required.
    assert columns.field("long") == columns.field("short").with_name("long")
    assert columns.field("long").type == pa.timestamp("ms", tz="UTC") and not columns.field("long").nullable
    assert columns.field("full").type == pa.timestamp("ns", tz="UTC")


RESOURCES = sorted(VERSIONS.glob("odf-v0.39.0-*.yaml"))


@pytest.mark.parametrize("path", RESOURCES, ids=[p.name for p in RESOURCES])
def test_039_resource_manifests_are_refused_naming_the_version_or_not_supported_yet(path):
    kind = yaml.safe_load(path.read_text())["$schema"].rsplit("/", 1)[1]
    name = yaml.safe_load(path.read_text())["headers"]["name"]
    line = only_problem(path.read_bytes())
    assert line.startswith(f"datasets/x.yaml:2:10: {name}: the {kind} resource manifest form")
    assert line.endswith(f"needs ODF 0.39 {NEEDS}")
    assert only_problem(path.read_bytes(), "0.39").endswith("(ODF 0.39) is not supported yet by odfproj")


# ------------------------------------------------------------------------------------------------
# Every 0.36-0.39 form the changelog lists, one by one


def _root(*, read=None, merge=None, fetch=None, events=()) -> bytes:
    source = {
        "kind": "SetPollingSource",
        "fetch": fetch or {"kind": "Url", "url": "https://example.com/x.csv"},
        "read": read or {"kind": "Csv", "header": True},
        "merge": merge or {"kind": "Append"},
    }
    return manifests.snapshot("org.example.x", "Root", [source, *events]).encode()


def _fields(*types) -> dict:
    return {"fields": [{"name": f"c{i}", "type": t} for i, t in enumerate(types)]}


#: Each DataType in its short or long 0.38 form, the same type in its other form, and its 0.35 meaning.
TYPES = [
    ("Bool", {"kind": "Bool"}, pa.bool_()),
    ("int8", {"kind": "Int8"}, pa.int8()),
    ("Int16", {"kind": "int16"}, pa.int16()),
    ("Int32", {"kind": "Int32"}, pa.int32()),
    ("Int64", {"kind": "Int64"}, pa.int64()),
    ("UInt8", {"kind": "UInt8"}, pa.uint8()),
    ("UInt16", {"kind": "UInt16"}, pa.uint16()),
    ("UInt32", {"kind": "UInt32"}, pa.uint32()),
    ("UInt64", {"kind": "UInt64"}, pa.uint64()),
    ("Float32", {"kind": "Float32"}, pa.float32()),
    ("float64", {"kind": "Float64"}, pa.float64()),
    ("String", {"kind": "String"}, pa.utf8()),
    ("Binary", {"kind": "Binary"}, pa.binary()),
    ("Date", {"kind": "Date"}, pa.date32()),
    ("Time", {"kind": "Time", "unit": "Millisecond"}, pa.time32("ms")),
    ({"kind": "Time", "unit": "Microsecond"}, {"kind": "time", "unit": "Microsecond"}, pa.time64("us")),
    ("Timestamp", {"kind": "Timestamp", "unit": "Millisecond", "timezone": "UTC"}, pa.timestamp("ms", "UTC")),
    (
        {"kind": "Timestamp", "unit": "Second"},
        {"kind": "Timestamp", "unit": "Second", "timezone": "+00:00"},
        pa.timestamp("s", "UTC"),
    ),
    (
        {"kind": "Decimal", "precision": 18, "scale": 4},
        {"kind": "decimal", "precision": 18, "scale": 4},
        pa.decimal128(18, 4),
    ),
    (
        {"kind": "Decimal", "precision": 60, "scale": 2},
        {"kind": "Decimal", "precision": 60, "scale": 2},
        pa.decimal256(60, 2),
    ),
    (
        {"kind": "List", "itemType": "String"},
        {"kind": "List", "itemType": {"kind": "String"}},
        pa.list_(pa.field("item", pa.utf8(), nullable=False)),
    ),
    (
        {"kind": "List", "itemType": {"kind": "Option", "inner": "Int32"}},
        {"kind": "List", "itemType": {"kind": "Option", "inner": {"kind": "Int32"}}},
        pa.list_(pa.int32()),
    ),
    (
        {"kind": "Struct", "fields": [{"name": "a b", "type": "Int64"}]},
        {"kind": "Struct", "fields": [{"name": "a b", "type": {"kind": "Int64"}}]},
        pa.struct([pa.field("a b", pa.int64(), nullable=False)]),
    ),
    (
        {"kind": "Map", "keyType": "String", "valueType": {"kind": "Option", "inner": "Float64"}},
        {
            "kind": "Map",
            "keyType": {"kind": "String"},
            "valueType": {"kind": "Option", "inner": {"kind": "Float64"}},
        },
        pa.map_(pa.utf8(), pa.float64()),
    ),
]


@pytest.mark.parametrize(("short", "long", "arrow"), TYPES, ids=[str(t[2]) for t in TYPES])
def test_each_data_type_in_short_and_long_form_reads_as_its_035_ddl(short, long, arrow):
    def columns(data_type):
        read = {"kind": "Csv", "schema": _fields(data_type, {"kind": "Option", "inner": data_type})}
        return parse_ddl_schema(snapshot(_root(read=read)).metadata[0].read.schema)

    assert columns(short) == columns(long)
    assert columns(short) == pa.schema([pa.field("c0", arrow, nullable=False), pa.field("c1", arrow)])


def test_ddl_schema_and_short_form_unions_are_other_spellings_of_035_events():
    ddl = ["a STRING NOT NULL", "`b c` DECIMAL(18,4)"]
    long = snapshot(
        _root(
            read={"kind": "Csv", "schema": ddl},
            fetch={
                "kind": "Url",
                "url": "https://x/y",
                "eventTime": {"kind": "FromSystemTime"},
                "cache": {"kind": "Forever"},
            },
        )
    )
    newer = _root(
        read={"kind": "Csv", "ddlSchema": ddl},
        fetch={"kind": "Url", "url": "https://x/y", "eventTime": "fromSystemTime", "cache": "Forever"},
    )
    assert snapshot(newer) == long
    glob = {"kind": "FilesGlob", "path": "data/*.csv", "eventTime": "FromMetadata"}
    assert snapshot(_root(fetch=glob)) == snapshot(
        _root(fetch={**glob, "eventTime": {"kind": "FromMetadata"}})
    )


def test_a_short_form_that_needs_fields_is_a_one_line_schema_error():
    line = only_problem(_root(fetch={"kind": "FilesGlob", "path": "d/*.csv", "eventTime": "FromPath"}))
    assert "missing required field 'pattern'" in line and "FromPath" in line


def test_set_data_schema_raw_arrow_schema_is_the_035_schema_renamed():
    event = {"kind": "SetDataSchema", "schema": "AAAA"}
    renamed = {"kind": "SetDataSchema", "rawArrowSchema": "AAAA"}
    assert snapshot(_root(events=[renamed])) == snapshot(_root(events=[event]))


#: Constructs no 0.35 event records: the manifest change, the construct as named, the version it needs.
REFUSED = [
    ({"read": {"kind": "Csv", "schema": _fields("Float16")}}, "read.schema field 'c0': type Float16", "0.38"),
    ({"read": {"kind": "Csv", "schema": _fields({"kind": "Duration"})}}, "type Duration", "0.38"),
    ({"read": {"kind": "Csv", "schema": _fields("Null")}}, "type Null", "0.38"),
    (
        {"read": {"kind": "Csv", "schema": _fields({"kind": "Timestamp", "timezone": "Europe/Paris"})}},
        "a Timestamp in time zone 'Europe/Paris'",
        "0.38",
    ),
    (
        {"read": {"kind": "Csv", "schema": _fields({"kind": "Binary", "fixedLength": 16})}},
        "fixed-size Binary",
        "0.38",
    ),
    (
        {"read": {"kind": "Csv", "schema": _fields({"kind": "List", "itemType": "Int8", "fixedLength": 3})}},
        "a fixed-size List",
        "0.38",
    ),
    (
        {
            "read": {
                "kind": "Csv",
                "schema": _fields(
                    {"kind": "Map", "keyType": "String", "valueType": "Int8", "keysSorted": True}
                ),
            }
        },
        "a Map with sorted keys",
        "0.38",
    ),
    (
        {"read": {"kind": "Csv", "schema": _fields({"kind": "Decimal", "precision": 10, "scale": -2})}},
        "a Decimal with a negative scale",
        "0.38",
    ),
    (
        {
            "read": {
                "kind": "Csv",
                "schema": {**_fields("String"), "extra": {"kamu.dev/archetype": "Collection"}},
            }
        },
        "read.schema: an `extra` mapping",
        "0.38",
    ),
    (
        {"events": [{"kind": "SetDataSchema", "schema": _fields("String")}]},
        "SetDataSchema with an ODF DataSchema",
        "0.37",
    ),
]


@pytest.mark.parametrize(("change", "construct", "version"), REFUSED, ids=[r[1] for r in REFUSED])
def test_what_no_035_event_records_is_refused_in_one_line(change, construct, version):
    data = _root(**change)
    line = only_problem(data)
    assert re.match(r"^datasets/x\.yaml:\d+:\d+: org\.example\.x: ", line), line
    assert construct in line and line.endswith(f"needs ODF {version} {NEEDS}"), line
    # A 0.39 workspace still refuses it, plainly, until odfproj records 0.39 chains.
    assert only_problem(data, "0.39").endswith(f"(ODF {version}) is not supported yet by odfproj")


#: The CDC merges of ODF 0.37: refused in a 0.35 workspace, recorded as they are in a 0.39 one.
CDC_MERGES = [
    ({"kind": "ChangelogStream", "primaryKey": ["id"]}, "merge strategy ChangelogStream"),
    ({"kind": "upsertStream", "primaryKey": ["id"]}, "merge strategy UpsertStream"),
]


@pytest.mark.parametrize(("merge", "construct"), CDC_MERGES, ids=[m[1] for m in CDC_MERGES])
def test_a_cdc_merge_needs_a_039_workspace_and_loads_there(merge, construct):
    data = _root(merge=merge)
    line = only_problem(data)
    assert construct in line and line.endswith(f"needs ODF 0.37 {NEEDS}"), line
    assert not check_manifest(data, "datasets/x.yaml", odf_version="0.39").problems
    misspelt = _root(merge={**merge, "primaryKeys": ["id"]})
    assert "primaryKeys" in only_problem(misspelt, "0.39")  # validated like any 0.35 variant


def test_the_decision_is_one_function_of_the_construct_and_the_workspace_version():
    merge = Newer(("merge",), "merge strategy ChangelogStream", "0.37", runs=True)
    assert refusal_for(merge, "0.35") == f"merge strategy ChangelogStream needs ODF 0.37 {NEEDS}"
    assert refusal_for(merge, "0.39") is None
    typed = Newer(("read",), "type Float16", "0.38")
    assert refusal_for(typed, "0.39") == "type Float16 (ODF 0.38) is not supported yet by odfproj"
    ethereum = Newer(("fetch",), "the fetch step EthereumLogs", "0.36", "it needs a node")
    assert refusal_for(ethereum, "0.35") == refusal_for(ethereum, "0.39")
    assert refusal_for(ethereum, "0.39").endswith("is not one odfproj runs: it needs a node")


def test_upgrade_rewrites_in_place_and_keeps_035_documents_untouched():
    document = yaml.safe_load(_root(read={"kind": "Csv", "schema": ["a INT"]}))
    before = yaml.safe_dump(document)
    assert upgrade_document(document) == [] and yaml.safe_dump(document) == before


MALFORMED = [
    (
        _fields({"kind": "Decimal", "precision": 3}),
        "field 'c0': a Decimal type needs an integer `precision` and `scale`",
    ),
    (
        _fields({"kind": "Int64", "unit": "Second"}),
        "field 'c0': the Int64 type: unknown key 'unit' (expected: no other key)",
    ),
    (
        {"fields": [{"name": "c0", "type": "Int8", "description": "d"}]},
        "field 'c0': unknown key 'description' (expected: name, type, extra)",
    ),
    (_fields({"kind": "Timestamp", "unit": "Minute"}), "field 'c0': unknown time unit 'Minute'"),
    (_fields("Int128"), "field 'c0': unknown data type kind 'Int128'"),
    ({"columns": []}, "has an unknown key 'columns'"),
]


@pytest.mark.parametrize(("schema", "message"), MALFORMED, ids=[m[1] for m in MALFORMED])
def test_a_malformed_data_schema_is_one_line_naming_the_field_never_a_guess(schema, message):
    line = only_problem(_root(read={"kind": "Csv", "schema": schema}))
    assert line.startswith("datasets/x.yaml:") and line.endswith(f"org.example.x: read.schema {message}"), (
        line
    )
