"""A GROUP BY over a join in a real project: ``plan`` names its mode and ``odfproj run`` updates it incrementally."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.plan.engine_checks import query_checker
from odfproj.plan.model import Transform
from odfproj.plan.render import render_text
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.storage.workspace import Workspace
from odfproj.transform.reproduce import reproduce_all
from tests import manifests
from tests.cli_inprocess import cli_in
from tests.transform.helpers import current_rows

pytestmark = pytest.mark.spark

SALES = manifests.root("sales", path="data/sales/*.csv", schema=("id BIGINT", "city STRING", "amount BIGINT"))
CITIES = manifests.root(
    "cities",
    path="data/cities/*.csv",
    schema=("city STRING", "country STRING"),
    merge={"kind": "Snapshot", "primaryKey": ["city"]},
)
BY_COUNTRY = manifests.derivative(
    "by-country",
    {"s": "sales", "c": "cities"},
    "SELECT c.country, count(*) AS n, sum(s.amount) AS total, max(s.event_time) AS event_time "
    "FROM s JOIN c ON s.city = c.city GROUP BY c.country",
)


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    for folder in ("datasets", "data/sales", "data/cities"):
        (root / folder).mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: grouped-join\n")
    for name, text in (("sales", SALES), ("cities", CITIES), ("by-country", BY_COUNTRY)):
        (root / "datasets" / f"{name}.yaml").write_text(text)
    (root / "data" / "sales" / "1.csv").write_text("id,city,amount\n1,Oslo,10\n2,Lima,3\n3,Oslo,1\n")
    (root / "data" / "cities" / "1.csv").write_text("city,country\nOslo,NO\nLima,PE\n")
    return root


def test_the_plan_shows_the_mode(project, engine) -> None:
    plan, _ = plan_project(load_project(project), PlanRequest(), query_checker=query_checker(engine))
    modes = {s.dataset: s.mode for s in plan.data_steps if isinstance(s, Transform)}
    assert modes == {"by-country": "grouped over a join"}
    assert "  transform by-country\n" in render_text(plan)
    assert "    # mode: grouped over a join\n" in render_text(plan)


def test_run_updates_it_from_the_new_sales_and_the_cities_state(
    project, tmp_path, spark, engine, monkeypatch
) -> None:
    """The second run works with the consumed sales files and the derivative's own files moved away:
    it read the new sales, the cities' state and the group state, nothing else."""
    odfproj = cli_in(spark, monkeypatch, lambda: project)
    code, output = odfproj("run")
    assert code == 0, output
    ws = Workspace(load_project(project).workspace())
    aside = {}
    for name in ("sales", "by-country"):
        aside[name] = tmp_path / f"aside-{name}"
        ws.open(name).layout.data_dir.rename(aside[name])
        ws.open(name).layout.data_dir.mkdir()
    (project / "data" / "sales" / "2.csv").write_text("id,city,amount\n4,Lima,5\n5,Oslo,2\n")
    code, output = odfproj("run")
    assert code == 0, output
    assert "SUCCESS by-country (transform)" in output and "full:" not in output
    for name, folder in aside.items():
        for path in folder.iterdir():
            path.rename(ws.open(name).layout.data_dir / path.name)
    rows = [row[1:] for row in current_rows(ws.open("by-country"))]
    assert sorted(rows) == [("NO", 3, 13), ("PE", 2, 8)]
    assert all(reproduce_all(ws, "by-country", engine))
