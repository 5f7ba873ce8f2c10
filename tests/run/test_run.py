"""``odfproj run`` on a real project: apply, ingest in order, isolate failures, write run results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odfproj.odf import model
from odfproj.plan.model import Transform
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.run import RUN_RESULTS_FILE, Status, run_project
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/{name}/*.csv
      read:
        kind: Csv
        header: true
        schema:
          - id BIGINT
          - city STRING
      merge:
        kind: Ledger
        primaryKey: [id]
"""

PUSH_ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: main
      read:
        kind: NdJson
        schema:
          - id BIGINT
          - v STRING
      merge:
        kind: Append
"""

DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {input}
          alias: src
      transform:
        kind: Sql
        engine: spark
        query: SELECT * FROM src
"""


def make_project(root: Path) -> Path:
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: runs\n")
    manifests = {
        "good": ROOT.format(name="good"),
        "bad": ROOT.format(name="bad"),
        "pushed": PUSH_ROOT.format(name="pushed"),
        "good.view": DERIVATIVE.format(name="good.view", input="good"),
        "bad.view": DERIVATIVE.format(name="bad.view", input="bad"),
    }
    for name, text in manifests.items():
        (root / "datasets" / f"{name}.yaml").write_text(text)
    for name in ("good", "bad"):
        (root / "data" / name).mkdir(parents=True)
    (root / "data" / "good" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    (root / "data" / "bad" / "1.csv").write_text("id,city\nnot-a-number,Oslo\n")
    return root


def by_name(result) -> dict:
    return {r.dataset: r for r in result.results}


def test_run_ingests_in_order_and_isolates_failures(spark, tmp_path):
    root = make_project(tmp_path / "proj")
    config = load_project(root)
    events = []
    holder = RecordingHolder(spark)
    result = run_project(
        config,
        PlanRequest(),
        holder=holder,  # type: ignore[arg-type]
        threads=2,
        on_event=events.append,
    )
    runs = by_name(result)
    assert [r.dataset for r in result.results].index("good") < [r.dataset for r in result.results].index(
        "good.view"
    )
    assert runs["good"].status is Status.SUCCESS and runs["good"].records_added == 2
    assert runs["bad"].status is Status.ERROR
    message = runs["bad"].message
    assert message.startswith("dataset 'bad', source 'default'") and "data/bad/1.csv" in message
    assert "\n" not in message
    assert (
        runs["bad.view"].status is Status.SKIPPED
        and "upstream dataset bad failed" in runs["bad.view"].message
    )
    assert runs["pushed"].status is Status.SKIPPED
    assert runs["good.view"].status in (Status.SUCCESS, Status.SKIPPED)  # transforms may not exist yet
    assert not result.ok and len(result.failed) == 1
    assert {(e.dataset, e.phase) for e in events} >= {
        ("good", "start"),
        ("good", "finish"),
        ("bad", "finish"),
    }

    ws = Workspace(config.workspace())
    bad = ws.open("bad")
    assert [type(b.event).__name__ for _, b in bad.iter_blocks()] == ["SetPollingSource", "Seed"]
    for name in ws.list_datasets():
        assert verify_dataset(ws.open(name)) == [], name
    good = ws.open("good")
    data = [
        good.layout.data_path(b.event.new_data.physical_hash)
        for _, b in good.iter_blocks()
        if isinstance(b.event, model.AddData) and b.event.new_data is not None
    ]
    assert pq.read_table(data[0]).column("city").to_pylist() == ["Oslo", "Lima"]

    saved = json.loads((ws.root / RUN_RESULTS_FILE).read_text())
    statuses = {r["unique_id"]: r["status"] for r in saved["results"]}
    assert statuses["good"] == "success" and statuses["bad"] == "error" and statuses["bad.view"] == "skipped"

    # Nothing new for the selected root: no Spark session is created, nothing is committed.
    head = good.head()
    fresh = RecordingHolder(spark)
    again = run_project(config, PlanRequest(select=("good",)), holder=fresh, threads=2)  # type: ignore[arg-type]
    assert by_name(again)["good"].status is Status.SUCCESS and by_name(again)["good"].message == "up to date"
    assert good.head() == head and not fresh.created


def _cli(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "odfproj", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=env,
        timeout=300,
    )


def test_cli_run_reports_failure_per_dataset_without_starting_spark(tmp_path):
    """The failing root fails in its fetch (no files), so this run needs no JVM at all."""
    root = make_project(tmp_path / "proj")
    (root / "data" / "bad" / "1.csv").unlink()
    (root / "data" / "good" / "1.csv").unlink()
    (root / "data" / "good" / "x.txt").write_text("not matched by the glob\n")
    proc = _cli("run", "--select", "bad", cwd=root)
    out = proc.stdout.decode()
    assert proc.returncode == 1, out + proc.stderr.decode()
    assert "ERROR bad (ingest)" in out and "no files match" in out
    assert "Traceback" not in out + proc.stderr.decode()
    assert (root / ".odf" / RUN_RESULTS_FILE).is_file()


def test_cli_ingest_from_stdin(tmp_path):
    root = make_project(tmp_path / "proj")
    applied = _cli("apply", "--auto-approve", "--select", "pushed", cwd=root)
    assert applied.returncode == 0, applied.stderr.decode()
    proc = _cli("ingest", "pushed", "-", cwd=root, stdin=b'{"id": 1, "v": "a"}\n{"id": 2, "v": "b"}\n')
    assert proc.returncode == 0, proc.stderr.decode()
    assert "added 2 record(s) from source main" in proc.stdout.decode()
    bad = _cli("ingest", "pushed", "-", "--source", "other", cwd=root, stdin=b"")
    assert bad.returncode == 1 and "no such push source" in bad.stderr.decode()
    assert "Traceback" not in bad.stderr.decode()
    ws = Workspace(load_project(root).workspace())
    assert verify_dataset(ws.open("pushed"), integrity=True) == []
    assert ws.open("pushed").projection().last_offset == 1


def test_run_results_json_is_written_for_an_empty_selection(tmp_path):
    root = make_project(tmp_path / "proj")
    text = textwrap.dedent("""\
        name: runs
        """)
    (root / "odfproj.yaml").write_text(text)
    result = run_project(
        load_project(root),
        PlanRequest(select=("pushed",)),
        holder=RecordingHolder(None),  # type: ignore[arg-type]
    )
    assert by_name(result)["pushed"].status is Status.SKIPPED
    assert json.loads((root / ".odf" / RUN_RESULTS_FILE).read_text())["results"][0]["unique_id"] == "pushed"


def test_run_executes_exactly_the_plans_steps_in_order(spark, tmp_path):
    """The plan drives the run: its definitions are applied, then its data steps run, and nothing else."""
    root = make_project(tmp_path / "proj")
    for name in ("bad", "bad.view"):
        (root / "datasets" / f"{name}.yaml").unlink()
    config = load_project(root)
    planned, _ = plan_project(config, PlanRequest())
    started = []
    result = run_project(
        config,
        PlanRequest(),
        holder=RecordingHolder(spark),  # type: ignore[arg-type]
        on_event=lambda e: started.append(e.step) if e.phase == "start" else None,
    )
    assert result.ok and result.plan is not None
    assert tuple(started) == result.plan.data_steps
    # run checks the queries on the engine, so its plan knows their modes; a plan without it does not.
    assert [s.mode for s in started if isinstance(s, Transform)] == ["stateless"]
    assert (
        tuple(replace(s, mode=None) if isinstance(s, Transform) else s for s in started) == planned.data_steps
    )
    assert [type(s).__name__ for s in started] == ["Ingest", "Transform"]
    assert result.apply is not None
    assert [s.dataset for s in result.apply.steps] == [s.dataset for s in planned.definitions]
    runs = by_name(result)
    assert runs["good.view"].records_added == 2 and runs["pushed"].status is Status.SKIPPED
