"""`odfproj ingest NAME FILE` into a dataset whose manifest was never applied applies it first, as run does."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import cli_in

pytestmark = pytest.mark.spark

MANIFEST = """kind: DatasetSnapshot
version: 1
content:
  name: com.example.pushed
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read:
        kind: NdJson
        schema:
          - id {id_type}
          - day DATE
      merge:
        kind: Ledger
        primaryKey: [id, day]
    - kind: SetVocab
      eventTimeColumn: day
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "odfproj.yaml").write_text("name: pushing\nmanifests: [datasets/*.yaml]\n")
    (tmp_path / "datasets" / "pushed.yaml").write_text(MANIFEST.format(id_type="BIGINT"))
    (tmp_path / "in.ndjson").write_text('{"id": "1", "day": "2026-01-02"}\n{"id": 2, "day": "2026-01-01"}\n')
    return tmp_path


def test_ingest_applies_the_pending_definition_then_pushes(spark, monkeypatch, project):
    invoke = cli_in(spark, monkeypatch, lambda: project)
    code, out = invoke("ingest", "com.example.pushed", "in.ndjson")
    assert code == 0, out
    assert "applied its pending definition" in out and "added 2 record(s)" in out
    dataset = Workspace(project / ".odf").open("com.example.pushed")
    kinds = [type(b.event).__name__ for _, b in dataset.iter_blocks()][::-1]
    assert kinds[:3] == ["Seed", "AddPushSource", "SetVocab"] and kinds[-1] == "AddData"

    # Applied now: a second ingest applies nothing and the Ledger drops the known keys.
    code, out = invoke("ingest", "com.example.pushed", "in.ndjson")
    assert code == 0, out
    assert "applied" not in out and "nothing to add" in out


def test_a_refused_plan_refuses_the_ingest(spark, monkeypatch, project):
    invoke = cli_in(spark, monkeypatch, lambda: project)
    assert invoke("ingest", "com.example.pushed", "in.ndjson")[0] == 0
    head = Workspace(project / ".odf").open("com.example.pushed").head()
    (project / "datasets" / "pushed.yaml").write_text(MANIFEST.format(id_type="STRING"))
    code, out = invoke("ingest", "com.example.pushed", "in.ndjson")
    assert code != 0
    assert "refused" in out and "read schema" in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1
    dataset = Workspace(project / ".odf").open("com.example.pushed")
    assert dataset.head() == head
    assert dataset.projection().push_sources["default"].read.schema == ("id BIGINT", "day DATE")
