"""Typed plan steps: the data work a run does is part of the plan, listed without fetching anything.

JVM-free: real projects in temporary folders, real chains; a previous ingest is stood in for by an
``AddData`` block that records only the source's state (what a FilesGlob ingest leaves behind).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from odfproj.odf import model
from odfproj.plan.model import AppendDefinitions, Ingest, Transform, TransformInput
from odfproj.plan.planfile import plan_from_data, plan_to_data
from odfproj.plan.render import render_markdown, render_text
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.apply import apply_plan
from odfproj.storage.workspace import Workspace
from tests.plan.test_plan_cli import run

ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: cities
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/*.csv
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

VIEW = """\
kind: DatasetSnapshot
version: 1
content:
  name: cities.view
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: cities
      transform:
        kind: Sql
        engine: spark
        query: SELECT * FROM cities
"""


def make_project(root: Path) -> Path:
    (root / "datasets").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "odfproj.yaml").write_text("name: steps\n")
    (root / "datasets" / "cities.yaml").write_text(ROOT)
    (root / "datasets" / "cities.view.yaml").write_text(VIEW)
    for name in ("2024-01.csv", "2024-02.csv"):
        (root / "data" / name).write_text("id,city\n1,Oslo\n")
    return root


def plan_of(root: Path):
    return plan_project(load_project(root), PlanRequest())[0]


def record_ingested(root: Path, *names: str) -> None:
    """Leave the chain as an ingest of ``names`` would: one AddData block per file, recording it."""
    dataset = Workspace(load_project(root).workspace()).open("cities")
    for name in names:
        value = json.dumps({"path": name}, separators=(",", ":"))
        state = model.SourceState(source_name="default", kind="odfproj/files-glob", value=value)
        dataset.append([model.AddData(new_source_state=state)])


def test_plan_lists_every_step_a_run_takes_in_order(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    plan = plan_of(root)
    assert [type(s) for s in plan.steps] == [AppendDefinitions, AppendDefinitions, Ingest, Transform]
    ingest, transform = plan.data_steps
    assert ingest == Ingest(
        "cities",
        "datasets/cities.yaml",
        "FilesGlob",
        "data/*.csv",
        files=("data/2024-01.csv", "data/2024-02.csv"),
    )
    assert transform == Transform(
        "cities.view", "datasets/cities.view.yaml", (TransformInput("cities", None, None, None),)
    )
    text = render_text(plan)
    assert "  ingest cities  (FilesGlob data/*.csv)\n    # reads data/2024-01.csv\n" in text
    assert "  transform cities.view\n    # input cities: created by this apply" in text
    assert "# reads data/2024-02.csv" in render_markdown(plan)
    assert plan_from_data(json.loads(json.dumps(plan_to_data(plan)))) == plan

    # Once applied, the transform's input is known by id; it has no data yet.
    workspace = Workspace(load_project(root).workspace())
    with workspace.lock():
        apply_plan(plan, workspace)
    [transform] = [s for s in plan_of(root).data_steps if isinstance(s, Transform)]
    [inp] = transform.inputs
    assert inp.dataset_id == workspace.open("cities").dataset_id.as_did_str() and not transform.has_new_data


def test_plan_lists_only_new_files_and_warns_about_files_that_sort_before_the_last(tmp_path) -> None:
    """Issue 14 point 6: a file FilesGlob will never ingest is a plan warning naming it and the rule."""
    root = make_project(tmp_path / "proj")
    assert run(["apply", "--auto-approve"], root).returncode == 0
    record_ingested(root, "data/2024-01.csv", "data/2024-02.csv")
    (root / "data" / "2024-03.csv").write_text("id,city\n2,Lima\n")
    (root / "data" / "2023-12.csv").write_text("id,city\n3,Rome\n")  # late: sorts before the last one
    [ingest] = [s for s in plan_of(root).data_steps if isinstance(s, Ingest)]
    assert ingest.files == ("data/2024-03.csv",)
    [warning] = ingest.warnings
    assert "data/2023-12.csv" in warning and "2024-01" not in warning
    assert "sort after the last ingested one (data/2024-02.csv, order by name)" in warning

    proc = run(["plan"], root)
    assert proc.returncode == 0, proc.stderr
    assert "! warning: dataset 'cities'" in proc.stdout and "data/2023-12.csv will never" not in proc.stdout
    assert "will never be ingested: data/2023-12.csv" in proc.stdout


def test_plan_does_not_list_files_outside_the_project(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    secret = tmp_path / "secret.csv"
    secret.write_text("id,city\n9,Nowhere\n")
    os.symlink(secret, root / "data" / "2024-09.csv")
    [ingest] = [s for s in plan_of(root).data_steps if isinstance(s, Ingest)]
    assert ingest.files == ()
    assert ingest.notes == (
        "data/2024-09.csv refused: resolves outside the project folder through a symlink; only files inside it are read",
    )

    absolute = ROOT.replace("path: data/*.csv", f"path: {tmp_path}/*.csv")
    (root / "datasets" / "cities.yaml").write_text(absolute)
    [ingest] = [s for s in plan_of(root).data_steps if isinstance(s, Ingest)]
    assert ingest.files == () and "outside the project folder" in ingest.notes[0]
