"""Query Evolution in plan and run: the engine reports a changed query's schema; only additions pass.

A real project in a temporary folder, the shared SparkSession, and the same code paths as the CLI
(plan_project with the Spark query checker, run_project, verify --reproduce).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from odfproj.plan.engine_checks import query_checker
from odfproj.plan.model import Action, Transform
from odfproj.plan.planfile import plan_from_data, plan_schema, plan_to_data, plan_to_json
from odfproj.plan.render import MODE_UNKNOWN, render_text
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.run import run_project
from odfproj.state.read import read_changelog
from odfproj.storage.update_record import UPDATE_RECORD
from odfproj.storage.workspace import Workspace
from odfproj.transform.reproduce import reproduce_all
from tests import manifests
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

ROOT = manifests.root(
    "sales",
    path="data/*.csv",
    schema=("id BIGINT", "city STRING", "amount DOUBLE", "day DATE"),
    merge=manifests.ledger("id"),
)

BY_CITY = "SELECT max(event_time) AS event_time, city, count(*) AS n FROM s GROUP BY city"


def _derived(name: str, query: str, source: str = "sales") -> str:
    return manifests.derivative(name, {"s": source}, query)


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> Path:
    """``sales`` (a Ledger root) and ``by-city`` (an aggregation), run once for the module."""
    root = tmp_path_factory.mktemp("evolution") / "proj"
    (root / "datasets").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "odfproj.yaml").write_text("name: evolution\n")
    (root / "datasets" / "sales.yaml").write_text(ROOT)
    (root / "datasets" / "by-city.yaml").write_text(_derived("by-city", BY_CITY))
    (root / "data" / "1.csv").write_text(
        "id,city,amount,day\n1,Oslo,10.5,2026-01-01\n2,Lima,3.25,2026-01-02\n3,Oslo,1.0,2026-01-03\n"
    )
    result = run_project(load_project(root), PlanRequest(), holder=RecordingHolder(spark))
    assert result.ok, [r.message for r in result.results]
    return root


@pytest.fixture
def project(built, tmp_path) -> Path:
    """A private copy of the built project (manifests, data and workspace) for one test to change."""
    return Path(shutil.copytree(built, tmp_path / "proj"))


def _plan(root: Path, engine, **request):
    return plan_project(load_project(root), PlanRequest(**request), query_checker=query_checker(engine))[0]


def _step(plan, name: str):
    return next(s for s in plan.definitions if s.dataset == name)


def _set_query(root: Path, name: str, query: str, source: str = "sales") -> None:
    (root / "datasets" / f"{name}.yaml").write_text(_derived(name, query, source))


def test_validated_schema_is_the_schema_run_commits(project, engine):
    """For a new derivative the plan's output schema is exactly what a run then writes."""
    query = (
        "SELECT CAST(day AS TIMESTAMP) AS event_time, id, upper(city) AS city, amount * 2 AS doubled, day "
        "FROM s WHERE amount > 2"
    )
    _set_query(project, "big", query)
    plan = _plan(project, engine)
    step = _step(plan, "big")
    assert step.action is Action.CREATE
    assert step.output_schema is not None and step.output_schema.before is None
    assert step.output_schema.after == (
        "event_time timestamp[ms, tz=UTC]",
        "id int64",
        "city string",
        "doubled double",
        "day date32[day]",
    )
    assert run_project(load_project(project), PlanRequest(), holder=RecordingHolder(engine.session)).ok
    committed = Workspace(project / ".odf").open("big").projection().arrow_schema
    from odfproj.plan.queries import columns_of

    assert columns_of(committed) == step.output_schema.after
    assert _step(_plan(project, engine), "big").action is Action.UNCHANGED


def test_added_column_is_planned_run_and_reproducible(project, engine):
    _set_query(
        project,
        "by-city",
        "SELECT max(event_time) AS event_time, city, count(*) AS n, sum(amount) AS total FROM s GROUP BY city",
    )
    step = _step(_plan(project, engine), "by-city")
    assert step.action is Action.UPDATE
    assert step.output_schema.before == ("event_time timestamp[ms, tz=UTC]", "city string", "n int64")
    assert step.output_schema.after[-1] == "total double"
    notes = [n for c in step.changes for n in c.notes]
    assert any("adds column(s) total" in n for n in notes)

    result = run_project(load_project(project), PlanRequest(), holder=RecordingHolder(engine.session))
    assert result.ok, [r.message for r in result.results]
    workspace = Workspace(project / ".odf")
    dataset = workspace.open("by-city")
    assert dataset.projection().arrow_schema.names[-1] == "total"
    changelog = read_changelog(dataset).to_pylist()
    current = {}
    for row in changelog:  # the last record per city: old rows retracted, new ones carry the total
        current[row["city"]] = row
    assert {c: (r["op"], r["n"], r["total"]) for c, r in current.items()} == {
        "Oslo": (0, 2, 11.5),
        "Lima": (0, 1, 3.25),
    }
    assert sum(1 for r in changelog if r["op"] == 1 and r.get("total") is None) == 2
    assert all(reproduce_all(workspace, "by-city", engine))
    assert _step(_plan(project, engine), "by-city").action is Action.UNCHANGED


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("SELECT max(event_time) AS event_time, city, count(*) AS cnt FROM s GROUP BY city", "column 'n'"),
        (
            "SELECT max(event_time) AS event_time, city, CAST(count(*) AS INT) AS n FROM s GROUP BY city",
            "changes the type of column 'n' from int64 to int32",
        ),
        (
            "SELECT max(event_time) AS event_time, town, count(*) AS n FROM s GROUP BY town",
            "query is invalid",
        ),
        (
            "SELECT max(event_time) AS event_time, city, count(*) AS n, rand() AS r FROM s GROUP BY city",
            "not deterministic",
        ),
        ("SELECT city, count(*) AS n FROM s GROUP BY city", "no 'event_time' column"),
    ],
    ids=["renamed", "retyped", "unknown-column", "rand", "no-event-time"],
)
def test_breaking_or_invalid_query_is_refused_and_run_writes_nothing(project, engine, query, reason):
    _set_query(project, "by-city", query)
    step = _step(_plan(project, engine), "by-city")
    assert step.action is Action.REFUSED
    assert any(reason in r for r in step.reasons), step.reasons
    dataset = Workspace(project / ".odf").open("by-city")
    head = dataset.head()
    with pytest.raises(Exception, match="refused"):
        run_project(load_project(project), PlanRequest(), holder=RecordingHolder(engine.session))
    assert dataset.head() == head


def test_query_on_an_input_created_by_the_same_apply_is_checked_against_its_read_schema(project, engine):
    """issue 14 point 5: the new input's read schema stands in for its data schema (tests/plan/test_preprocess_check.py)."""
    (project / "datasets" / "more.yaml").write_text(ROOT.replace("name: sales", "name: more"))
    _set_query(project, "more.view", BY_CITY, source="more")
    step = _step(_plan(project, engine), "more.view")
    assert step.action is Action.CREATE
    assert step.output_schema.after == ("event_time timestamp[ms, tz=UTC]", "city string", "n int64")
    notes = [n for c in step.changes for n in c.notes]
    assert any("checked against the schema that input more will have after its first run" in n for n in notes)


def test_without_a_checker_no_engine_is_used_and_the_change_is_marked(project, spark):
    _set_query(project, "by-city", BY_CITY.replace("count(*)", "count(id)"))
    holder = RecordingHolder(spark)
    plan, _ = plan_project(load_project(project), PlanRequest())
    step = _step(plan, "by-city")
    assert step.action is Action.UPDATE and step.output_schema.after is None
    assert any("not validated" in n for c in step.changes for n in c.notes)
    assert not holder.created


def test_plan_json_carries_the_output_schema(project, engine):
    _set_query(project, "by-city", BY_CITY.replace("count(*) AS n", "count(*) AS n, min(amount) AS smallest"))
    data = json.loads(json.dumps(plan_to_data(_plan(project, engine))))
    jsonschema.validate(data, plan_schema())
    step = next(s for s in data["steps"] if s["dataset"] == "by-city")
    assert step["output_schema"]["after"][-1] == "smallest double"
    again = plan_from_data(data)
    assert _step(again, "by-city").output_schema.after[-1] == "smallest double"


def test_cli_plan_shows_the_schema_change_and_refuses_with_exit_1(project):
    _set_query(project, "by-city", BY_CITY.replace("count(*) AS n", "count(*) AS cnt"))
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "odfproj", "plan"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert "! the new query removes or renames column 'n'" in done.stdout
    assert "      + cnt int64" in done.stdout and "      - n int64" in done.stdout
    assert done.stderr == "", done.stderr  # no JVM start-up noise, no traceback


def test_the_plan_shows_the_mode_of_a_checked_query_and_says_when_it_does_not_know(project, engine):
    _set_query(project, "ranked", "SELECT event_time, city, rank() OVER (ORDER BY amount) AS r FROM s")
    _set_query(project, "big", "SELECT event_time, id, upper(city) AS city FROM s WHERE amount > 2")
    plan = _plan(project, engine)
    modes = {s.dataset: s.mode for s in plan.data_steps if isinstance(s, Transform)}
    # by-city did not change: the plan did not analyse it; it shows the mode its last run recorded.
    assert modes == {"by-city": None, "ranked": "full: window function", "big": "stateless"}
    text = render_text(plan)
    assert "  transform big\n    # input sales: " in text and "    # mode: stateless\n" in text
    assert "    # mode: grouped (last run)\n" in text
    assert plan_from_data(json.loads(plan_to_json(plan))).steps == plan.steps
    # Without that record (never run here), the plan does not know: run decides.
    (Workspace(load_project(project).workspace()).open("by-city").layout.info_dir / UPDATE_RECORD).unlink()
    assert f"    # mode: {MODE_UNKNOWN}\n" in render_text(_plan(project, engine))
