"""The plan checks roots' preprocess queries and new derivatives before any data exists.

Real projects in temporary folders, the shared SparkSession and the CLI's code paths (plan_project with
the Spark checker, run_project). The roots' sources point at files that do not exist (or at a port
nobody listens on), so a plan that fetched or read anything would fail: the checks use only the read
step's declared schema.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.plan.engine_checks import query_checker
from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.run import run_project
from odfproj.state.read import read_changelog
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
        schema: ["id BIGINT", "city STRING", "amount DOUBLE"]
{preprocess}      merge:
        kind: {merge}
"""

PREPROCESS = """\
      preprocess:
        kind: Sql
        engine: {engine}
        query: '{query}'
"""

DERIVED = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {input}
      transform:
        kind: Sql
        engine: {engine}
        query: '{query}'
"""


def _project(tmp_path: Path, manifests: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: checks\n")
    for name, text in manifests.items():
        (root / "datasets" / f"{name}.yaml").write_text(text)
    return root


def _root(
    name: str = "sales", *, engine: str = "spark", query: str | None = None, merge: str = "Append"
) -> str:
    pre = PREPROCESS.format(engine=engine, query=query) if query is not None else ""
    if merge == "Ledger":
        merge = "Ledger\n        primaryKey: [id]"
    return ROOT.format(name=name, preprocess=pre, merge=merge)


def _derived(name: str, query: str, source: str = "sales", engine: str = "spark") -> str:
    return DERIVED.format(name=name, input=source, query=query, engine=engine)


def _plan(root: Path, engine):
    return plan_project(load_project(root), PlanRequest(), query_checker=query_checker(engine))[0]


def _step(plan, name: str):
    return next(s for s in plan.definitions if s.dataset == name)


def _notes(step) -> list[str]:
    return [n for c in step.changes for n in c.notes]


def test_a_preprocess_query_that_would_fail_is_refused_in_the_plan(tmp_path, engine):
    root = _project(tmp_path, {"sales": _root(query="SELECT id, town FROM input")})
    step = _step(_plan(root, engine), "sales")
    assert step.action is Action.REFUSED
    assert len(step.reasons) == 1
    assert step.reasons[0].startswith("the ingest would fail: the preprocess query: [UNRESOLVED_COLUMN")
    assert "town" in step.reasons[0]


def test_a_preprocess_that_drops_the_primary_key_is_refused(tmp_path, engine):
    root = _project(tmp_path, {"sales": _root(query="SELECT city, amount FROM input", merge="Ledger")})
    step = _step(_plan(root, engine), "sales")
    assert step.action is Action.REFUSED
    assert step.reasons == (
        "the ingest would fail: the merge's primaryKey column(s) id are not among the "
        "preprocess query's columns (city, amount)",
    )


def test_a_valid_preprocess_passes_and_reads_nothing(tmp_path, engine):
    root = _project(tmp_path, {"sales": _root(query="SELECT id, upper(city) AS city FROM input")})
    plan = _plan(root, engine)
    assert _step(plan, "sales").action is Action.CREATE
    assert not (root / ".odf").exists()  # the plan wrote nothing


def test_preprocess_of_another_engine_is_translated_for_the_check(tmp_path, engine):
    """DataFusion's "id" is the column; checked as Spark SQL it would be the string 'id' and still pass."""
    root = _project(
        tmp_path, {"sales": _root(engine="datafusion", query='SELECT "id" AS id, "town" AS t FROM input')}
    )
    step = _step(_plan(root, engine), "sales")
    assert step.action is Action.REFUSED
    assert "town" in step.reasons[0]


def test_the_issue_ledger_case_runs_with_the_real_ids(tmp_path, engine):
    """issue 16: `SELECT "id" AS id` under DataFusion merged on [id] committed one row with id='id'."""
    root = _project(
        tmp_path,
        {
            "sales": _root(
                engine="datafusion", query='SELECT "id" AS id, "city" AS city FROM input', merge="Ledger"
            )
        },
    )
    (root / "data" / "sales").mkdir(parents=True)
    (root / "data" / "sales" / "1.csv").write_text("id,city,amount\n1,Oslo,2.5\n2,Lima,1.0\n3,Oslo,4.0\n")
    assert _step(_plan(root, engine), "sales").action is Action.CREATE
    result = run_project(load_project(root), PlanRequest(), holder=RecordingHolder(engine.session))
    assert result.ok, [r.message for r in result.results]
    rows = read_changelog(Workspace(root / ".odf").open("sales")).to_pylist()
    assert sorted((r["id"], r["city"]) for r in rows) == [(1, "Oslo"), (2, "Lima"), (3, "Oslo")]


def test_a_new_derivative_of_a_new_root_is_checked_against_the_read_schema(tmp_path, engine):
    """issue 14 point 5: `sum(amout)` passed plan and apply because the input had no data yet."""
    root = _project(
        tmp_path,
        {
            "sales": _root(),
            "totals": _derived(
                "totals",
                "SELECT max(event_time) AS event_time, city, sum(amout) AS total FROM sales GROUP BY city",
            ),
        },
    )
    step = _step(_plan(root, engine), "totals")
    assert step.action is Action.REFUSED
    assert "amout" in step.reasons[0]

    (root / "datasets" / "totals.yaml").write_text(
        _derived(
            "totals",
            "SELECT max(event_time) AS event_time, city, sum(amount) AS total FROM sales GROUP BY city",
        )
    )
    step = _step(_plan(root, engine), "totals")
    assert step.action is Action.CREATE
    assert step.output_schema.after == ("event_time timestamp[ms, tz=UTC]", "city string", "total double")
    assert any(
        "checked against the schema that input sales will have after its first run" in n for n in _notes(step)
    )


def test_the_planned_schema_is_the_schema_run_writes(tmp_path, engine):
    """What the plan assumed for the root and its derivative is exactly what the first run commits."""
    query = "SELECT max(event_time) AS event_time, city, count(*) AS n, sum(amount) AS total FROM sales GROUP BY city"
    root = _project(
        tmp_path,
        {
            "sales": _root(query="SELECT id, city, amount * 2 AS amount FROM input", merge="Ledger"),
            "totals": _derived("totals", query),
        },
    )
    (root / "data" / "sales").mkdir(parents=True)
    (root / "data" / "sales" / "1.csv").write_text("id,city,amount\n1,Oslo,2.5\n2,Lima,1.0\n")
    planned = _step(_plan(root, engine), "totals").output_schema.after
    result = run_project(load_project(root), PlanRequest(), holder=RecordingHolder(engine.session))
    assert result.ok, [r.message for r in result.results]
    from odfproj.plan.queries import columns_of

    workspace = Workspace(root / ".odf")
    assert columns_of(workspace.open("totals").projection().arrow_schema) == planned


def test_a_derivative_of_a_new_derivative_uses_the_upstream_checked_schema(tmp_path, engine):
    root = _project(
        tmp_path,
        {
            "sales": _root(),
            "by-city": _derived(
                "by-city",
                "SELECT max(event_time) AS event_time, city, count(*) AS n FROM sales GROUP BY city",
            ),
            "busy": _derived(
                "busy", "SELECT event_time, city FROM `by-city` WHERE cnt > 1", source="by-city"
            ),
        },
    )
    plan = _plan(root, engine)
    assert _step(plan, "by-city").action is Action.CREATE
    busy = _step(plan, "busy")
    assert busy.action is Action.REFUSED and "cnt" in busy.reasons[0]


def test_without_a_declared_read_schema_the_derivative_waits_for_run(tmp_path, engine):
    text = _root().replace('        schema: ["id BIGINT", "city STRING", "amount DOUBLE"]\n', "")
    root = _project(
        tmp_path, {"sales": text, "totals": _derived("totals", "SELECT event_time, city FROM sales")}
    )
    step = _step(_plan(root, engine), "totals")
    assert step.action is Action.CREATE and step.output_schema is None
    assert any("validated at run time: input sales has no data schema yet" in n for n in _notes(step))


def test_a_plan_with_no_query_and_no_source_change_starts_no_engine(tmp_path, spark, engine):
    root = _project(tmp_path, {"sales": _root(query="SELECT id, city FROM input")})
    (root / "data" / "sales").mkdir(parents=True)
    (root / "data" / "sales" / "1.csv").write_text("id,city,amount\n1,Oslo,2.5\n")
    assert run_project(load_project(root), PlanRequest(), holder=RecordingHolder(spark)).ok
    from odfproj.engine.spark import SparkEngine

    holder = RecordingHolder(spark)
    plan, _ = plan_project(
        load_project(root), PlanRequest(), query_checker=query_checker(SparkEngine(holder))
    )
    assert _step(plan, "sales").action is Action.UNCHANGED
    assert not holder.created


def test_event_time_named_by_the_vocabularies(tmp_path, engine):
    """A root and a derivative that both name their event time `reading_time` (as the scaffold does)."""
    vocab = "    - kind: SetVocab\n      eventTimeColumn: reading_time\n"
    root_text = _root().replace('"amount DOUBLE"]', '"amount DOUBLE", "reading_time TIMESTAMP"]') + vocab
    query = "SELECT max(reading_time) AS reading_time, city, count(*) AS n FROM sales GROUP BY city"
    root = _project(tmp_path, {"sales": root_text, "by-city": _derived("by-city", query) + vocab})
    step = _step(_plan(root, engine), "by-city")
    assert step.action is Action.CREATE, step.reasons
    assert step.output_schema.after == ("reading_time timestamp[ms, tz=UTC]", "city string", "n int64")
