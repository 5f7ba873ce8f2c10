"""Real manifests run unchanged: each corpus entry through validate, plan and run, as tests/corpus/expected.yaml says.

The manifests are verbatim copies from public repositories (tests/corpus/SOURCES.md) but for their data
URL, which points at a small stand-in file under tests/corpus/data/. The whole CLI runs in-process on the
shared Spark session (tests/cli_inprocess.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from odfproj.odf import model
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import cli_in

CORPUS = Path(__file__).parent
ENTRIES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "expected.yaml").read_text())["entries"]

pytestmark = pytest.mark.spark


def test_the_corpus_is_large_and_every_manifest_has_an_entry():
    files = {str(p.relative_to(CORPUS / "manifests")) for p in (CORPUS / "manifests").rglob("*.yaml")}
    assert files == {e["manifest"] for e in ENTRIES}
    assert len(ENTRIES) >= 30
    listed = (CORPUS / "SOURCES.md").read_text()
    assert all(f in listed for f in files)


def _project(tmp_path: Path, entry: dict[str, Any]) -> Path:
    root = tmp_path / "project"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: corpus\nmanifests: [datasets/*.yaml]\n")
    for i, rel in enumerate([entry["manifest"], *entry.get("with", [])]):
        shutil.copy(CORPUS / "manifests" / rel, root / "datasets" / f"{i}-{Path(rel).name}")
    shutil.copytree(CORPUS / "data", root / "data")
    return root


def _name(path: Path) -> str:
    return yaml.safe_load(path.read_text())["content"]["name"]


def _records(dataset) -> pa.Table | None:
    tables = [
        pq.read_table(dataset.layout.data_path(b.event.new_data.physical_hash))
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData | model.ExecuteTransform) and b.event.new_data is not None
    ]
    return pa.concat_tables(tables) if tables else None


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["manifest"] for e in ENTRIES])
def test_corpus_manifest(entry, spark, monkeypatch, tmp_path):
    root = _project(tmp_path, entry)
    invoke = cli_in(spark, monkeypatch, lambda: root)
    code, out = invoke("validate")
    if entry.get("at") == "validate":
        assert entry["expect"] == "refused" and code == 1, out
        assert entry["reason"] in out and "Traceback" not in out, out
        return
    assert code == 0, out
    name = _name(CORPUS / "manifests" / entry["manifest"])
    if entry["expect"] == "refused":
        code, out = invoke("plan")
        assert code == 1, out
        refused = entry.get("refused", name)
        lines = [line for line in out.splitlines() if refused in line or "!" in line]
        assert any(entry["reason"] in line for line in out.splitlines()), out
        assert refused in out and lines, out
        code, out = invoke("run")  # run refuses the same plan before anything is written
        assert code != 0 and "refused" in out and "Traceback" not in out, out
        assert not (root / ".odf").exists() or not Workspace(root / ".odf").list_datasets()
        return
    code, out = invoke("plan")
    assert code == 0, out
    for push in entry.get("push", []):
        code, out = invoke("ingest", push["dataset"], f"data/{push['file']}")
        assert code == 0, out
    code, out = invoke("run")
    dataset = Workspace(root / ".odf").open(name)
    if entry["expect"] == "fails":
        assert code == 1 and "Traceback" not in out, out
        error = next(line for line in out.splitlines() if line.startswith(f"error {name}"))
        assert entry["reason"] in error and "file:data/" in error, error
        assert _records(dataset) is None
        return
    assert code == 0, out
    table = _records(dataset)
    assert (0 if table is None else table.num_rows) == entry["records"]
    if "columns" in entry:
        assert table is not None and table.schema.names == entry["columns"]
    if "rows" in entry:
        assert table is not None
        names = list(entry["rows"][0])
        assert table.select(names).to_pylist()[: len(entry["rows"])] == entry["rows"]
    if "event_time" in entry:
        assert table is not None and str(table.schema.field(3).type) == entry["event_time"]
