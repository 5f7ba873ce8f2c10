"""Round trips of every model type through the binary and the YAML forms."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import decode_block, decode_table, encode_block, encode_table
from odfproj.odf.yaml_codec import (
    dump_yaml,
    from_data,
    load_yaml,
    parse_manifest,
    to_data,
    write_manifest,
)
from tests.conftest import REFERENCE_MANIFESTS_DIR
from tests.odf.strategies import blocks_with_event, table

EVENT_TYPES = [table_name for _tag, table_name in model.UNIONS["MetadataEvent"].variants]
ROUNDTRIP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_metadata_event_is_covered() -> None:
    assert len(EVENT_TYPES) == 13


@pytest.mark.parametrize("event", EVENT_TYPES)
@pytest.mark.parametrize("version", [2, 3])
def test_binary_roundtrip_of_blocks(event: str, version: int) -> None:
    @ROUNDTRIP
    @given(blocks_with_event(event))
    def check(block: model.MetadataBlock) -> None:
        data = encode_block(block, version=version)
        decoded, got_version = decode_block(data)
        assert decoded == block
        assert got_version == version
        assert encode_block(decoded, version=version) == data

    check()


@pytest.mark.parametrize("event", EVENT_TYPES)
def test_yaml_roundtrip_of_blocks(event: str) -> None:
    @ROUNDTRIP
    @given(blocks_with_event(event))
    def check(block: model.MetadataBlock) -> None:
        text = write_manifest(block)
        parsed, version = parse_manifest(text, expected_kind="MetadataBlock")
        assert parsed == block
        assert version == 2
        assert write_manifest(parsed) == text

    check()


@pytest.mark.parametrize(
    "type_name", ["TransformRequest", "RawQueryRequest", "TransformResponseSuccess", "DatasetVocabulary"]
)
def test_engine_protocol_messages_roundtrip(type_name: str) -> None:
    @ROUNDTRIP
    @given(table(type_name))
    def check(message: object) -> None:
        assert decode_table(type_name, encode_table(message)) == message
        assert from_data(type_name, load_yaml(dump_yaml(to_data(message)))) == message

    check()


REFERENCE_MANIFESTS = sorted(REFERENCE_MANIFESTS_DIR.glob("*.yaml"))


def test_all_reference_manifests_present() -> None:
    assert len(REFERENCE_MANIFESTS) == 14


@pytest.mark.parametrize("path", REFERENCE_MANIFESTS, ids=lambda p: p.name)
def test_reference_manifest_parses_and_roundtrips(path) -> None:
    snapshot, version = parse_manifest(path.read_bytes(), expected_kind="DatasetSnapshot")
    assert isinstance(snapshot, model.DatasetSnapshot)
    assert version == 1
    written = write_manifest(snapshot)
    reparsed, _ = parse_manifest(written)
    assert reparsed == snapshot
    assert write_manifest(reparsed) == written
    # Same content as the original document, modulo tag spelling: we write PascalCase.
    assert _lower_kinds(load_yaml(written)) == _lower_kinds(load_yaml(path.read_bytes()))


#: Keys whose values are union tags or string enums, which we re-spell in PascalCase (RFC-013).
_ENUM_KEYS = {"kind", "format", "order", "qos"}


def _lower_kinds(value):
    if isinstance(value, dict):
        return {
            k: (v.lower() if k in _ENUM_KEYS and isinstance(v, str) else _lower_kinds(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_lower_kinds(v) for v in value]
    return value


def test_union_tags_are_accepted_in_three_spellings_and_written_in_pascal_case() -> None:
    for spelling in ("SetInfo", "setInfo", "setinfo"):
        text = f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: a\n  kind: root\n  metadata:\n    - kind: {spelling}\n      description: x\n"
        snapshot, _ = parse_manifest(text)
        assert snapshot.metadata == (model.SetInfo(description="x"),)
        assert "kind: SetInfo" in write_manifest(snapshot)
        assert "kind: Root" in write_manifest(snapshot)


def test_timestamps_are_written_as_the_reference_writes_them() -> None:
    text = (
        "kind: MetadataBlock\nversion: 2\ncontent:\n  systemTime: 2020-01-01T13:00:00.5+01:00\n"
        "  sequenceNumber: 0\n  event:\n    kind: SetInfo\n"
    )
    block, _ = parse_manifest(text)
    assert "systemTime: 2020-01-01T12:00:00.500Z\n" in write_manifest(block)
