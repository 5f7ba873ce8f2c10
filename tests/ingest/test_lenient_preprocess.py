"""The lenient reading the spec allows, as docs/guide/manifests.md shows it ("Malformed input rows").

ODF 0.35's ReadStep::Csv has no option to skip bad rows; the way that stays within the spec is to read a
column as STRING and convert it in a Spark preprocess query, which runs non-ANSI as in the reference, so a
value that does not parse is NULL and a WHERE clause drops its row. The manifest below is the guide's.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.cli_inprocess import cli_in

pytestmark = pytest.mark.spark

MANIFEST = """\
kind: DatasetSnapshot
version: 1
content:
  name: lenient
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {kind: FilesGlob, path: data/*.csv}
      read: {kind: Csv, header: true, schema: [id STRING, at STRING]}
      preprocess:
        kind: Sql
        engine: spark
        query: |
          SELECT CAST(id AS BIGINT) AS id, to_timestamp(at) AS at FROM input
          WHERE CAST(id AS BIGINT) IS NOT NULL AND to_timestamp(at) IS NOT NULL
      merge: {kind: Ledger, primaryKey: [id]}
    - kind: SetVocab
      eventTimeColumn: at
"""


def test_the_guide_s_lenient_preprocess_drops_the_rows_that_do_not_parse(spark, monkeypatch, tmp_path: Path):
    (tmp_path / "datasets").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "odfproj.yaml").write_text("name: lenient\n")
    (tmp_path / "datasets" / "lenient.yaml").write_text(MANIFEST)
    (tmp_path / "data" / "a.csv").write_text(
        "id,at\n1,2026-01-01T00:00:00Z\nx,2026-01-02T00:00:00Z\n3,yesterday\n4,2026-01-04T00:00:00Z\n"
    )
    invoke = cli_in(spark, monkeypatch, lambda: tmp_path)
    code, out = invoke("run")
    assert code == 0, out
    code, out = invoke("query", "lenient", "--format", "csv")
    assert code == 0, out
    assert sorted(int(r["id"]) for r in csv.DictReader(io.StringIO(out))) == [1, 4]
