"""Newer ODF manifest forms: rewritten to the exact 0.35 event, or refused naming construct and version."""

from __future__ import annotations

import pytest

from odfproj.odf.validation import check_manifest
from odfproj.odf.yaml_codec import manifest_from_data

HEADER = """kind: DatasetSnapshot
version: 1
content:
  name: com.example.pools
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: https://example.com/pools.ndjson
"""


def manifest(read: str, merge: str = "      merge:\n        kind: Append\n") -> bytes:
    return (HEADER + read + merge).encode()


NEWER = """      read:
        kind: NdJson
        schema:
          fields:
            - name: pool
              type: String
            - name: poolMeta
              type:
                kind: Option
                inner: String
            - name: tokens
              type:
                kind: Option
                inner:
                  kind: List
                  itemType: String
            - name: apy
              type:
                kind: Decimal
                precision: 18
                scale: 4
            - name: at
              type: timestamp
            - name: detail
              type:
                kind: Struct
                fields:
                  - name: chain id
                    type: Int64
"""

OLDER = """      read:
        kind: NdJson
        schema:
          - pool STRING NOT NULL
          - poolMeta STRING
          - tokens ARRAY<STRING NOT NULL>
          - apy DECIMAL(18,4) NOT NULL
          - at TIMESTAMP(3) NOT NULL
          - "detail STRUCT<`chain id`: BIGINT NOT NULL> NOT NULL"
"""


def snapshot(data: bytes):
    checked = check_manifest(data, "m.yaml")
    assert not checked.problems, [str(p) for p in checked.problems]
    return manifest_from_data(checked.document, expected_kind="DatasetSnapshot")[0]


def test_a_data_schema_mapping_becomes_the_same_event_as_its_ddl():
    newer, older = snapshot(manifest(NEWER)), snapshot(manifest(OLDER))
    assert newer == older
    assert newer.metadata[0].read.schema[:2] == ("pool STRING NOT NULL", "poolMeta STRING")


def test_ddl_schema_is_the_newer_name_of_the_ddl_list():
    renamed = OLDER.replace("        schema:\n", "        ddlSchema:\n")
    assert snapshot(manifest(renamed)) == snapshot(manifest(OLDER))


@pytest.mark.parametrize(
    ("read", "merge", "line", "message"),
    [
        (
            NEWER.replace(
                "type: timestamp",
                "type:\n                kind: Timestamp\n                timezone: Europe/Paris",
            ),
            None,
            35,
            "field 'at': a Timestamp in time zone 'Europe/Paris' (0.35: UTC only) needs ODF 0.38",
        ),
        (
            NEWER.replace("type: String\n", "type: Float16\n", 1),
            None,
            16,
            "field 'pool': type Float16 needs ODF 0.38",
        ),
        (
            NEWER.replace(
                "            - name: pool\n", "            - name: pool\n              extra: {a/b: 1}\n"
            ),
            None,
            16,
            "field 'pool': an `extra` mapping needs ODF 0.38",
        ),
        (
            NEWER,
            "      merge:\n        kind: UpsertStream\n        primaryKey: [pool]\n",
            None,
            "merge strategy UpsertStream needs ODF 0.37",
        ),
        (
            OLDER.replace("        schema:\n", "        ddlSchema: [a INT]\n        schema:\n"),
            None,
            13,
            "both ddlSchema and schema",
        ),
    ],
)
def test_what_has_no_exact_035_meaning_is_refused_by_name(read, merge, line, message):
    data = manifest(read, merge) if merge else manifest(read)
    problems = check_manifest(data, "m.yaml").problems
    assert len(problems) == 1, [str(p) for p in problems]
    assert message in problems[0].message and problems[0].file == "m.yaml"
    if line is not None:
        assert problems[0].line == line
    if "needs ODF" in message:
        assert problems[0].message.endswith('(odf_version: "0.39" in odfproj.yaml)')


def test_plain_035_manifests_are_untouched():
    checked = check_manifest(manifest(OLDER), "m.yaml")
    assert checked.document["content"]["metadata"][0]["read"]["schema"][0] == "pool STRING NOT NULL"
