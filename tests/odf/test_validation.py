"""Manifest validation: real manifests pass, and each kind of mistake is reported once, where it is.

Malformed inputs live in ``tests/fixtures/malformed/`` when they are readable YAML; inputs whose point
is a specific byte (tabs, invalid UTF-8, BOM, empty) are written inline so no editor can "fix" them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odfproj.odf.validation import Problem, check_manifest, validate_manifest
from odfproj.odf.yaml_source import load_yaml_document
from tests.conftest import REFERENCE_MANIFESTS_DIR

MALFORMED_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "malformed"
REFERENCE_MANIFESTS = sorted(REFERENCE_MANIFESTS_DIR.glob("*.yaml"))


def _problems(name: str) -> list[Problem]:
    return validate_manifest((MALFORMED_DIR / name).read_bytes(), name)


def _only_problem(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


def _manifest(events: str | None = None, *, kind: str = "Root", version: int = 1) -> bytes:
    """A snapshot manifest; ``events`` are list items under ``metadata:`` (line 7 on), None for ``[]``."""
    head = f"kind: DatasetSnapshot\nversion: {version}\ncontent:\n  name: example.dataset\n  kind: {kind}\n"
    return (head + (f"  metadata:\n{events}" if events is not None else "  metadata: []\n")).encode()


POLLING_SOURCE = """\
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: https://example.com/data.csv
      read:
        kind: Csv
      merge:
        kind: Append
"""


# ------------------------------------------------------------------------------------------------
# Real manifests


def test_all_reference_manifests_are_present() -> None:
    assert len(REFERENCE_MANIFESTS) == 14


@pytest.mark.parametrize("path", REFERENCE_MANIFESTS, ids=lambda p: p.name)
def test_reference_manifest_is_valid(path: Path) -> None:
    problems = validate_manifest(path.read_bytes(), path.name)
    assert problems == [], "\n".join(map(str, problems))


# ------------------------------------------------------------------------------------------------
# One mistake per fixture: file name, exact line:col, message


@pytest.mark.parametrize(
    ("fixture", "line", "col", "message"),
    [
        ("syntax-error.yaml", 8, 28, "YAML syntax error: mapping values are not allowed here"),
        ("duplicate-key.yaml", 6, 3, "duplicate key 'name': first defined at line 4, again at line 6"),
        (
            "unknown-event-kind.yaml",
            9,
            13,
            "unknown kind 'SetPollingSauce', did you mean 'SetPollingSource'?",
        ),
        (
            "unknown-field.yaml",
            14,
            9,
            "unknown field 'seperator' in ReadStep::Csv (did you mean 'separator'?",
        ),
        ("missing-required-field.yaml", 8, 7, "missing required field 'url' in FetchStep::Url"),
        ("wrong-type.yaml", 13, 17, "field 'header' must be a boolean, got string 'yes please'"),
        ("bad-dataset-name.yaml", 4, 9, "invalid dataset alias 'my_dataset'"),
        ("bad-did.yaml", 10, 23, "invalid dataset id 'did:odf:fed01deadbeef'"),
        ("bad-ddl.yaml", 15, 13, "invalid DDL column definition: unknown type 'DUBLE'"),
        ("comments-only.yaml", 1, 1, "empty manifest"),
        ("multiple-documents.yaml", 8, 1, "a manifest must contain a single YAML document"),
    ],
)
def test_malformed_fixture(fixture: str, line: int, col: int, message: str) -> None:
    problem = _only_problem(_problems(fixture))
    assert str(problem).startswith(f"{fixture}:{line}:{col}: ")
    assert message in problem.message
    assert problem.severity == "error"


def test_unknown_field_lists_the_expected_fields_in_spec_order() -> None:
    problem = _only_problem(_problems("unknown-field.yaml"))
    assert "expected one of: schema, separator, encoding, quote, escape, header," in problem.message


def test_unknown_kind_lists_every_variant_once() -> None:
    problem = _only_problem(_problems("unknown-event-kind.yaml"))
    assert "expected one of: AddData, ExecuteTransform, Seed, SetPollingSource," in problem.message
    assert "setPollingSource" not in problem.message


def test_tab_indentation() -> None:
    data = (
        b"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: example.tabs\n\tkind: Root\n  metadata: []\n"
    )
    problem = _only_problem(validate_manifest(data, "tabs.yaml"))
    assert str(problem) == "tabs.yaml:5:1: tabs are not allowed for indentation, use spaces"


def test_tab_inside_a_literal_block_is_content_not_indentation() -> None:
    data = _manifest(
        "    - kind: SetInfo\n      description: |\n        first\n        \tindented with a tab\n"
    )
    assert validate_manifest(data, "literal.yaml") == []


def test_empty_file() -> None:
    problem = _only_problem(validate_manifest(b"", "empty.yaml"))
    assert str(problem).startswith("empty.yaml:1:1: empty manifest")


def test_non_utf8_bytes_are_located() -> None:
    data = b"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: caf\xe9\n"
    problem = _only_problem(validate_manifest(data, "latin1.yaml"))
    assert str(problem).startswith("latin1.yaml:4:12: not valid UTF-8: byte 0xe9 at offset 53")


def test_columns_count_characters_not_bytes() -> None:
    data = _manifest('    - kind: SetInfo\n      description: "café"\n      kéy: 1\n')
    problem = _only_problem(validate_manifest(data, "utf8.yaml"))
    assert (problem.line, problem.col) == (9, 7)
    assert "unknown field 'kéy' in SetInfo" in problem.message


def test_utf8_bom_is_accepted() -> None:
    data = b"\xef\xbb\xbf" + REFERENCE_MANIFESTS[0].read_bytes()
    assert validate_manifest(data, "bom.yaml") == []


def test_leading_document_marker_is_accepted() -> None:
    assert validate_manifest(b"---\n" + _manifest(), "d.yaml") == []


# ------------------------------------------------------------------------------------------------
# Many problems at once


def test_all_problems_of_a_file_are_reported_in_line_order() -> None:
    problems = _problems("many-problems.yaml")
    expected = [
        (4, "invalid dataset alias 'Bad_Name'"),
        (11, "unknown field 'retries' in FetchStep::Url"),
        (14, "field 'header' must be a boolean, got string 'true'"),
        (17, "invalid DDL column definition: unknown type 'MONEY'"),
        (18, "Transform::Sql needs a 'query'"),
        (21, "missing required field 'primaryKey' in MergeStrategy::Ledger"),
        (23, "SetTransform is not allowed in a Root dataset"),
        (32, "duplicate key 'description': first defined at line 31, again at line 32"),
    ]
    assert len(problems) == len(expected), "\n".join(map(str, problems))
    for (line, message), problem in zip(expected, problems, strict=True):
        assert problem.file == "many-problems.yaml"
        assert problem.line == line, str(problem)
        assert message in problem.message, str(problem)
    assert [p.line for p in problems] == sorted(p.line for p in problems)


# ------------------------------------------------------------------------------------------------
# RFC-013 spellings


@pytest.mark.parametrize(
    ("event_kind", "read_kind", "merge_kind", "dataset_kind"),
    [
        ("SetPollingSource", "Csv", "Append", "Root"),
        ("setPollingSource", "csv", "append", "root"),
        ("setpollingsource", "csv", "append", "root"),
        ("SetPollingSource", "ndJson", "ledger", "Root"),
        ("SetPollingSource", "ndjson", "Snapshot", "Root"),
    ],
)
def test_camel_and_lowercase_kinds_are_accepted(
    event_kind: str, read_kind: str, merge_kind: str, dataset_kind: str
) -> None:
    merge_extra = "" if merge_kind.lower() == "append" else "\n        primaryKey: [id]"
    events = (
        f"    - kind: {event_kind}\n      fetch:\n        kind: url\n        url: https://example.com/a\n"
        f"      prepare:\n        - kind: decompress\n          format: gzip\n"
        f"      read:\n        kind: {read_kind}\n      merge:\n        kind: {merge_kind}{merge_extra}\n"
    )
    assert validate_manifest(_manifest(events, kind=dataset_kind), "spellings.yaml") == []


def test_other_case_variants_are_rejected() -> None:
    problem = _only_problem(validate_manifest(_manifest("    - kind: SETVOCAB\n"), "upper.yaml"))
    assert (problem.line, problem.col) == (7, 13)
    assert "unknown kind 'SETVOCAB'" in problem.message


def test_string_enum_spellings() -> None:
    assert validate_manifest(_manifest(kind="derivative"), "e.yaml") == []
    problem = _only_problem(validate_manifest(_manifest(kind="Leaf"), "e.yaml"))
    assert str(problem).startswith("e.yaml:5:9: invalid DatasetKind value 'Leaf' for field 'kind'")
    assert "expected one of: Root, Derivative" in problem.message


# ------------------------------------------------------------------------------------------------
# Semantic checks


def test_sql_with_both_query_and_queries() -> None:
    events = (
        "    - kind: SetTransform\n      inputs:\n        - datasetRef: a.b\n      transform:\n"
        "        kind: Sql\n        engine: spark\n        query: select 1\n        queries:\n"
        "          - query: select 2\n"
    )
    problem = _only_problem(validate_manifest(_manifest(events, kind="Derivative"), "sql.yaml"))
    assert (problem.line, problem.col) == (14, 9)
    assert "either 'query' or 'queries', not both" in problem.message


def test_derivative_cannot_have_a_polling_source() -> None:
    problem = _only_problem(validate_manifest(_manifest(POLLING_SOURCE, kind="Derivative"), "d.yaml"))
    assert (problem.line, problem.col) == (7, 13)
    assert "SetPollingSource is not allowed in a Derivative dataset" in problem.message


def test_duplicate_ddl_column_points_at_the_second_one() -> None:
    events = POLLING_SOURCE.replace(
        "kind: Csv\n",
        "kind: Csv\n        schema:\n          - a INT\n          - b INT\n          - A STRING\n",
    )
    problems = validate_manifest(_manifest(events), "dup.yaml")
    problem = _only_problem(problems)
    assert problem.line == 16 and "duplicate column name" in problem.message


def test_wrong_manifest_kind_is_the_only_problem() -> None:
    data = b"kind: MetadataBlock\nversion: 2\ncontent:\n  whatever: 1\n"
    problem = _only_problem(validate_manifest(data, "k.yaml"))
    assert str(problem) == "k.yaml:1:7: expected a DatasetSnapshot manifest, got kind 'MetadataBlock'"


def test_unsupported_version() -> None:
    problem = _only_problem(validate_manifest(_manifest(version=2), "v.yaml"))
    assert str(problem) == "v.yaml:2:10: unsupported DatasetSnapshot manifest version 2 (supported: 1)"


def test_manifest_must_be_a_mapping() -> None:
    problem = _only_problem(validate_manifest(b"- a\n- b\n", "list.yaml"))
    assert "a manifest must be a mapping" in problem.message


def test_metadata_block_manifest() -> None:
    block = (
        b"kind: MetadataBlock\nversion: 2\ncontent:\n  systemTime: 2024-01-01T00:00:00Z\n"
        b"  sequenceNumber: 0\n  event:\n    kind: SetVocab\n    eventTimeColumn: date\n"
    )
    assert validate_manifest(block, "b.yaml", expected_kind="MetadataBlock") == []
    bad = block.replace(b"2024-01-01T00:00:00Z", b"yesterday")
    problem = _only_problem(validate_manifest(bad, "b.yaml", expected_kind="MetadataBlock"))
    assert (problem.line, "invalid timestamp 'yesterday'" in problem.message) == (4, True)


def test_unknown_expected_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no schema for manifest kind"):
        validate_manifest(b"", "x.yaml", expected_kind="Plan")


# ------------------------------------------------------------------------------------------------
# Loader details


def test_timestamps_stay_strings_and_yaml11_booleans_are_kept() -> None:
    result = load_yaml_document(b"a: 2024-01-01T00:00:00Z\nb: 2024-01-01\nc: yes\non: 1\n", "t.yaml")
    assert result.ok
    assert result.document == {"a": "2024-01-01T00:00:00Z", "b": "2024-01-01", "c": True, "on": 1}


def test_source_map_has_keys_and_values() -> None:
    path = REFERENCE_MANIFESTS_DIR / "ca.bankofcanada.exchange-rates.daily.yaml"
    result = load_yaml_document(path.read_bytes(), path.name)
    schema_path = ("content", "metadata", 0, "read", "schema", 2)
    assert result.document["content"]["metadata"][0]["read"]["schema"][2] == "fxbrlcad DECIMAL(18,10)"
    assert result.source_map.value_position(schema_path) == (23, 13)
    assert result.source_map.key_position(("content", "metadata", 0, "read")) == (17, 7)
    assert result.source_map[("content", "name")] == (4, 9)
    assert ("content", "nope") not in result.source_map
    assert result.source_map.nearest((*schema_path, "no", "such")) == (23, 13)


def test_a_non_mapping_union_value_is_reported_once() -> None:
    events = POLLING_SOURCE.replace("      read:\n        kind: Csv\n", "      read: csv\n") + "    - 5\n"
    problems = validate_manifest(_manifest(events), "scalar.yaml")
    assert [str(p) for p in problems] == [
        "scalar.yaml:11:13: field 'read' must be a mapping, got string 'csv'",
        "scalar.yaml:14:7: entry 2 of 'metadata' must be a mapping, got integer 5",
    ]


def test_check_manifest_returns_the_document_too() -> None:
    result = check_manifest(REFERENCE_MANIFESTS[0].read_bytes(), REFERENCE_MANIFESTS[0].name)
    assert result.ok and result.document["kind"] == "DatasetSnapshot"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    for problem in validate_manifest(data, "fuzz.yaml"):
        assert problem.line >= 1 and problem.col >= 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_reference_manifests_never_raise(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(REFERENCE_MANIFESTS))
    lines = path.read_bytes().splitlines(keepends=True)
    index = data.draw(st.integers(0, len(lines) - 1))
    replacement = data.draw(st.sampled_from([b"", b"  foo: 1\n", b"- x\n", b"\t\n", lines[index][1:]]))
    damaged = b"".join([*lines[:index], replacement, *lines[index + 1 :]])
    for problem in validate_manifest(damaged, path.name):
        assert str(problem).startswith(f"{path.name}:{problem.line}:{problem.col}: ")
