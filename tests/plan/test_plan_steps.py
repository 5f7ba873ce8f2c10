"""Typed plan steps: the data work a run does is part of the plan, listed without fetching anything.

JVM-free: real projects in temporary folders, real chains; a previous ingest is stood in for by an
``AddData`` block that records only the source's state (what a FilesGlob ingest leaves behind).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from odfproj.engine.session import SparkSessionHolder
from odfproj.odf import model
from odfproj.plan.model import AppendDefinitions, Ingest, Plan, Transform, TransformInput
from odfproj.plan.planfile import plan_from_data, plan_to_data
from odfproj.plan.render import colourize, render_markdown, render_text
from odfproj.plan.sources import PlanRequest, load_project_state, plan_project
from odfproj.project.config import load_project, spark_settings
from odfproj.run.apply import apply_plan
from odfproj.run.run import Status, run_project
from odfproj.storage.workspace import Workspace
from tests.plan.test_plan_cli import run
from tests.run.test_run import DERIVATIVE, ROOT


def make_project(root: Path) -> Path:
    (root / "datasets").mkdir(parents=True)
    (root / "data" / "cities").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: steps\n")
    (root / "datasets" / "cities.yaml").write_text(ROOT.format(name="cities"))
    (root / "datasets" / "cities.view.yaml").write_text(DERIVATIVE.format(name="cities.view", input="cities"))
    for name in ("2024-01.csv", "2024-02.csv"):
        (root / "data" / "cities" / name).write_text("id,city\n1,Oslo\n")
    return root


def plan_of(root: Path):
    return plan_project(load_project(root), PlanRequest())[0]


def apply(root: Path) -> Workspace:
    workspace = Workspace(load_project(root).workspace())
    with workspace.lock():
        apply_plan(plan_of(root), workspace)
    return workspace


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
        "data/cities/*.csv",
        files=("data/cities/2024-01.csv", "data/cities/2024-02.csv"),
    )
    assert transform == Transform(
        "cities.view", "datasets/cities.view.yaml", (TransformInput("cities", None, None, None),)
    )
    text = render_text(plan)
    assert "  ingest cities  (FilesGlob data/cities/*.csv)\n    # reads data/cities/2024-01.csv\n" in text
    assert "  transform cities.view\n    # input cities: not in the workspace yet" in text
    assert "# reads data/cities/2024-02.csv" in render_markdown(plan)
    assert plan_from_data(json.loads(json.dumps(plan_to_data(plan)))) == plan

    # Once applied, the transform's input is known by id; it has no data yet.
    workspace = apply(root)
    [transform] = [s for s in plan_of(root).data_steps if isinstance(s, Transform)]
    [inp] = transform.inputs
    assert inp.dataset_id == workspace.open("cities").dataset_id.as_did_str() and not transform.has_new_data


def test_plan_lists_only_new_files_and_warns_about_files_that_sort_before_the_last(tmp_path) -> None:
    """Issue 14 point 6: a file FilesGlob will never ingest is a plan warning naming it and the rule."""
    root = make_project(tmp_path / "proj")
    apply(root)
    record_ingested(root, "data/cities/2024-01.csv", "data/cities/2024-02.csv")
    (root / "data" / "cities" / "2024-03.csv").write_text("id,city\n2,Lima\n")
    (root / "data" / "cities" / "2023-12.csv").write_text(
        "id,city\n3,Rome\n"
    )  # late: sorts before the last one
    [ingest] = [s for s in plan_of(root).data_steps if isinstance(s, Ingest)]
    assert ingest.files == ("data/cities/2024-03.csv",)
    [warning] = ingest.warnings
    assert "data/cities/2023-12.csv" in warning and "2024-01" not in warning
    assert "sort after the last ingested one (data/cities/2024-02.csv, order by name)" in warning

    proc = run(["plan"], root)
    assert proc.returncode == 0, proc.stderr
    assert "    ! warning: dataset 'cities', source 'default': 1 file(s)" in proc.stdout
    assert "will never be ingested: data/cities/2023-12.csv" in proc.stdout


def test_plan_does_not_list_files_outside_the_project(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    secret = tmp_path / "secret.csv"
    secret.write_text("id,city\n9,Nowhere\n")
    os.symlink(secret, root / "data" / "cities" / "2024-09.csv")
    [ingest] = [s for s in plan_of(root).data_steps if isinstance(s, Ingest)]
    assert ingest.files == ()
    assert ingest.notes == (
        "data/cities/2024-09.csv refused: resolves outside the project folder through a symlink; only files inside it are read",
    )

    absolute = ROOT.format(name="cities").replace("path: data/cities/*.csv", f"path: {tmp_path}/*.csv")
    (root / "datasets" / "cities.yaml").write_text(absolute)
    [ingest] = [s for s in plan_of(root).data_steps if isinstance(s, Ingest)]
    assert ingest.files == () and "outside the project folder" in ingest.notes[0]


def test_a_narrowed_plan_reads_only_the_selected_chains_and_their_inputs(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    (root / "datasets" / "other.yaml").write_text(ROOT.format(name="other"))
    apply(root)
    config = load_project(root)
    narrowed = load_project_state(config, PlanRequest(select=("cities.view",)))
    assert narrowed.state.names == ("cities", "cities.view")
    assert load_project_state(config, PlanRequest()).state.names == ("cities", "cities.view", "other")


def test_text_lists_the_first_files_of_a_long_glob_and_json_all_of_them() -> None:
    files = tuple(f"data/{i:03}.csv" for i in range(25))
    plan = Plan("p", "/w", (Ingest("r", "datasets/r.yaml", "FilesGlob", "data/*.csv", files=files),))
    text = render_text(plan)
    assert "# reads data/019.csv" in text and "data/020.csv" not in text
    assert "# ... and 5 more file(s) (all in --format json)" in text
    assert plan_to_data(plan)["steps"][0]["files"] == list(files)


def test_colours_mark_creates_updates_and_refusals_only() -> None:
    text = "odfproj will perform the following actions:\n\n+ a [Root]\n    ~ SetInfo\n! b [Root]  # refused\n  # note"
    lines = colourize(text).split("\n")
    assert lines[2] == "\x1b[32m+ a [Root]\x1b[0m" and lines[3] == "\x1b[33m    ~ SetInfo\x1b[0m"
    assert lines[4].startswith("\x1b[31m! b") and lines[0] == text.split("\n")[0] and lines[5] == "  # note"


def test_run_warns_about_the_same_late_file_as_the_plan_without_starting_spark(tmp_path) -> None:
    """Run hands the plan's reading of the ingested files to the ingest: the warning is the plan's."""
    root = make_project(tmp_path / "proj")
    apply(root)
    record_ingested(root, "data/cities/2024-01.csv", "data/cities/2024-02.csv")
    (root / "data" / "cities" / "2023-12.csv").write_text("id,city\n3,Rome\n")  # late: sorts first
    [planned] = next(s for s in plan_of(root).data_steps if isinstance(s, Ingest)).warnings
    config = load_project(root)
    holder = SparkSessionHolder(spark_settings(config, None))
    result = run_project(config, PlanRequest(select=("cities",)), holder=holder)
    [cities] = result.results
    assert (cities.status, cities.blocks_added, cities.message) == (Status.SUCCESS, 0, "up to date")
    assert not holder.created
    assert result.log_file is not None and planned in result.log_file.read_text()
