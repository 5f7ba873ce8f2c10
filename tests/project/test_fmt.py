"""``odfproj fmt``: canonical key order and indentation, comments kept, semantics preserved, idempotent."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from odfproj.odf import model
from odfproj.odf.yaml_codec import dump_yaml, load_yaml, parse_manifest
from odfproj.project.fmt import (
    FormatError,
    FormatStatus,
    TemplateNotYamlError,
    format_text,
)
from odfproj.run.fmt import format_files
from tests.conftest import REFERENCE_MANIFESTS_DIR

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project" / "datasets"


def reference_files() -> list[Path]:
    files = sorted(REFERENCE_MANIFESTS_DIR.glob("*.yaml"))
    assert files, f"no reference manifests in {REFERENCE_MANIFESTS_DIR}"
    return files


@pytest.fixture
def reference_copy(tmp_path: Path) -> list[Path]:
    copies = []
    for source in reference_files():
        target = tmp_path / source.name
        shutil.copyfile(source, target)
        copies.append(target)
    return copies


# ------------------------------------------------------------------------------------------------
# A checker of the canonical order, written independently of fmt's own walk


_VARIANT_TABLES = {
    union: {
        spelling: table
        for tag, table in spec.variants
        for spelling in (tag, tag.lower(), tag[:1].lower() + tag[1:])
    }
    for union, spec in model.UNIONS.items()
}


def _assert_keys_in(keys: list[str], expected: list[str], where: str) -> None:
    known = [k for k in keys if k in expected]
    assert known == sorted(known, key=expected.index), f"{where}: {keys} not in order {expected}"
    unknown = [k for k in keys if k not in expected]
    assert keys == known + unknown, f"{where}: unknown keys must come last: {keys}"


def assert_canonical(data: dict[str, Any]) -> None:
    assert list(data) == [k for k in ("kind", "version", "content") if k in data]
    _check_table(data["content"], "DatasetSnapshot", "content", tagged=False)


def _check_table(node: Any, table: str, where: str, *, tagged: bool) -> None:
    if not isinstance(node, dict):
        return
    fields = model.TABLES[table].fields
    _assert_keys_in(list(node), (["kind"] if tagged else []) + [f.yaml for f in fields], where)
    for f in fields:
        if f.kind not in ("table", "union") or f.yaml not in node:
            continue
        values = node[f.yaml] if f.vector else [node[f.yaml]]
        for i, value in enumerate(values):
            sub = f"{where}.{f.yaml}[{i}]"
            if f.kind == "table":
                _check_table(value, f.ref, sub, tagged=False)
            elif isinstance(value, dict) and value.get("kind") in _VARIANT_TABLES[f.ref]:
                _check_table(value, _VARIANT_TABLES[f.ref][value["kind"]], sub, tagged=True)


def comments(text: str) -> Counter[str]:
    """Every comment's text: full-line ones, and end-of-line ones (`` # ...`` after a value)."""
    found: Counter[str] = Counter()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            found[stripped] += 1
        else:
            found.update(m.strip() for m in re.findall(r"\s(#\s.*)$", line))
    return found


# ------------------------------------------------------------------------------------------------
# Reference manifests


def test_reference_manifests_keep_meaning_and_comments_and_are_idempotent(reference_copy: list[Path]) -> None:
    before = {p: p.read_text(encoding="utf-8") for p in reference_copy}
    report = format_files(reference_copy)
    assert not report.with_status(FormatStatus.FAILED), report.results
    assert not report.with_status(FormatStatus.SKIPPED)
    assert report.with_status(FormatStatus.REFORMATTED), "some reference manifests are not canonical"
    for path, original in before.items():
        after = path.read_text(encoding="utf-8")
        assert parse_manifest(after) == parse_manifest(original), path.name
        assert load_yaml(after) == load_yaml(original), path.name
        assert comments(after) == comments(original), path.name
        assert_canonical(load_yaml(after))
    again = format_files(reference_copy)
    assert {r.status for r in again.results} == {FormatStatus.UNCHANGED}
    assert all(
        p.read_text(encoding="utf-8") == format_text(p.read_text(encoding="utf-8")) for p in reference_copy
    )


@pytest.mark.parametrize("source", reference_files(), ids=lambda p: p.stem)
def test_any_key_order_gives_the_same_canonical_text(source: Path) -> None:
    """Reversing every mapping's keys is undone by fmt: the order depends only on the schema."""
    data = load_yaml(source.read_text(encoding="utf-8"))

    def reverse(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: reverse(node[k]) for k in reversed(list(node))}
        if isinstance(node, list):
            return [reverse(v) for v in node]
        return node

    assert format_text(dump_yaml(reverse(data))) == format_text(dump_yaml(data))


def test_example_project_manifests_are_canonical_after_one_pass() -> None:
    for path in sorted(EXAMPLE.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        once = format_text(text)
        assert format_text(once) == once
        assert parse_manifest(once) == parse_manifest(text)


# ------------------------------------------------------------------------------------------------
# Comments move with their keys

MESSY = """\
# yaml-language-server: $schema=x
version: 1   # envelope version
# the content
content:
  # metadata first!
  metadata:
  # polling
  -   read:
          header: true   # has header
          # the schema
          schema: [a INT]
          kind: Csv
      # fetch it
      fetch: {kind: Url, url: "http://x"}
      kind: SetPollingSource
  -   kind: SetInfo
      # keywords
      keywords:
      - a
      description: 'hi'
  # the kind
  kind: Root
  name: a.b   # the name
# kind last
kind: DatasetSnapshot
# eof
"""

MESSY_FORMATTED = """\
# yaml-language-server: $schema=x
# kind last
kind: DatasetSnapshot
version: 1   # envelope version
# the content
content:
  # metadata first!
  name: a.b   # the name
  # the kind
  kind: Root
  metadata:
    # polling
    - kind: SetPollingSource
      # fetch it
      fetch: {kind: Url, url: "http://x"}
      read:
        kind: Csv
        # the schema
        schema: [a INT]
        header: true     # has header
    - kind: SetInfo
      description: 'hi'
      # keywords
      keywords:
        - a
# eof
"""


def test_comments_travel_with_the_key_below_them() -> None:
    formatted = format_text(MESSY)
    assert formatted == MESSY_FORMATTED
    assert format_text(formatted) == formatted
    assert comments(formatted) == comments(MESSY)
    assert load_yaml(formatted) == load_yaml(MESSY)


def test_comment_above_an_events_kind_goes_before_its_dash() -> None:
    source = """\
kind: DatasetSnapshot
version: 1
content:
  name: a.b
  kind: Root
  metadata:
    # first event
    - eventTimeColumn: x
      # vocab kind
      kind: SetVocab
    - description: d   # eol
      # info kind
      kind: SetInfo
"""
    assert (
        format_text(source)
        == """\
kind: DatasetSnapshot
version: 1
content:
  name: a.b
  kind: Root
  metadata:
    # first event
    # vocab kind
    - kind: SetVocab
      eventTimeColumn: x
    # info kind
    - kind: SetInfo
      description: d   # eol
"""
    )


def test_unknown_keys_stay_after_known_ones_in_their_order() -> None:
    source = (
        "content:\n  zeta: 1\n  metadata: []\n  alpha: 2\n  name: a.b\nkind: DatasetSnapshot\nversion: 1\n"
    )
    assert format_text(source) == (
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: a.b\n  metadata: []\n  zeta: 1\n  alpha: 2\n"
    )


def test_indentation_is_normalised_to_two_spaces() -> None:
    source = (
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n    name: a.b\n    kind: Root\n    metadata:\n"
        "    - kind: SetVocab\n      eventTimeColumn: t\n"
    )
    assert format_text(source) == (
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: a.b\n  kind: Root\n  metadata:\n"
        "    - kind: SetVocab\n      eventTimeColumn: t\n"
    )


def test_crlf_and_document_start_are_normalised_idempotently(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(b"---\r\nversion: 1\r\nkind: DatasetSnapshot\r\ncontent:\r\n  name: a.b\r\n")
    assert format_files([path]).results[0].status is FormatStatus.REFORMATTED
    assert path.read_bytes() == b"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: a.b\n"
    assert format_files([path]).results[0].status is FormatStatus.UNCHANGED


# ------------------------------------------------------------------------------------------------
# Jinja, errors, --check

JINJA_YAML = """\
kind: DatasetSnapshot
version: 1
content:
  kind: Root
  name: "{{ var('prefix') }}.orders"
  metadata:
    - kind: SetPollingSource
      fetch:
        path: "{{ landing('orders') }}"
        kind: FilesGlob
"""


def test_jinja_that_parses_as_yaml_is_formatted_with_its_tags_intact() -> None:
    formatted = format_text(JINJA_YAML)
    assert formatted.index("name:") < formatted.index("  kind: Root")
    assert "\"{{ var('prefix') }}.orders\"" in formatted
    assert "\"{{ landing('orders') }}\"" in formatted
    assert format_text(formatted) == formatted


@pytest.mark.parametrize(
    "template",
    [
        JINJA_YAML.replace("\"{{ landing('orders') }}\"", "{{ landing('orders') }}"),
        JINJA_YAML.replace("  metadata:\n", "  metadata:\n{% if target == 'prod' %}\n") + "{% endif %}\n",
    ],
    ids=["unquoted-expression", "if-block"],
)
def test_jinja_that_is_not_yaml_is_skipped_with_a_warning(tmp_path: Path, template: str) -> None:
    with pytest.raises(TemplateNotYamlError):
        format_text(template)
    path = tmp_path / "t.yaml"
    path.write_text(template, encoding="utf-8")
    result = format_files([path]).results[0]
    assert result.status is FormatStatus.SKIPPED
    assert "Jinja" in result.message
    assert path.read_text(encoding="utf-8") == template
    assert format_files([path], check=True).ok


def test_invalid_yaml_and_non_manifests_fail_with_a_position(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: DatasetSnapshot\ncontent: [\n", encoding="utf-8")
    config = tmp_path / "odfproj.yaml"
    config.write_text("name: x\n", encoding="utf-8")
    missing = tmp_path / "missing.yaml"
    report = format_files([broken, config, missing], display_root=tmp_path)
    by_name = {r.shown: r for r in report.results}
    assert by_name["broken.yaml"].status is FormatStatus.FAILED
    assert re.match(r"\d+:\d+: invalid YAML", by_name["broken.yaml"].message)
    assert "not a DatasetSnapshot manifest" in by_name["odfproj.yaml"].message
    assert by_name["missing.yaml"].message == "no such file"
    assert not report.ok
    with pytest.raises(FormatError, match="invalid YAML"):
        format_text("a: b: c\n")


def test_check_writes_nothing_and_reports_what_would_change(tmp_path: Path) -> None:
    messy, clean = tmp_path / "messy.yaml", tmp_path / "clean.yaml"
    messy.write_text(MESSY, encoding="utf-8")
    clean.write_text(MESSY_FORMATTED, encoding="utf-8")
    report = format_files([messy, clean], check=True)
    assert [r.status for r in report.results] == [FormatStatus.REFORMATTED, FormatStatus.UNCHANGED]
    assert not report.ok
    assert messy.read_text(encoding="utf-8") == MESSY
    assert format_files([clean], check=True).ok
