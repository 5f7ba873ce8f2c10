"""``odfproj run`` says which path each derivative took, why full, and what would make it incremental.

The project of issue 35: a filter, a GROUP BY with ``sum`` over a DOUBLE, a GROUP BY over a join.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from odfproj.plan.render import render_text
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.run import RUN_RESULTS_FILE
from odfproj.storage.update_record import read_update_record
from odfproj.storage.workspace import Workspace
from tests import manifests
from tests.cli_inprocess import cli_in

pytestmark = pytest.mark.spark

HINT = "sum a DECIMAL to make it incremental: sum(CAST(amount AS DECIMAL(p,s)))"
FLOAT_SUM = "sum over a floating-point value"

DATASETS = {
    "sales": manifests.root(
        "sales", path="data/sales/*.csv", schema=("id BIGINT", "city STRING", "amount DOUBLE")
    ),
    "cities": manifests.root(
        "cities",
        path="data/cities/*.csv",
        schema=("city STRING", "country STRING"),
        merge={"kind": "Snapshot", "primaryKey": ["city"]},
    ),
    "big-sales": manifests.derivative(
        "big-sales", {"s": "sales"}, "SELECT event_time, id, city, amount FROM s WHERE amount > 2"
    ),
    "by-city": manifests.derivative(
        "by-city",
        {"s": "sales"},
        "SELECT city, count(*) AS n, sum(amount) AS total, max(event_time) AS event_time FROM s GROUP BY city",
    ),
    "by-country": manifests.derivative(
        "by-country",
        {"s": "sales", "c": "cities"},
        "SELECT c.country, count(*) AS n, max(s.event_time) AS event_time "
        "FROM s JOIN c ON s.city = c.city GROUP BY c.country",
    ),
}


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    for folder in ("datasets", "data/sales", "data/cities"):
        (root / folder).mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: paths\n")
    for name, text in DATASETS.items():
        (root / "datasets" / f"{name}.yaml").write_text(text)
    (root / "data" / "sales" / "1.csv").write_text("id,city,amount\n1,Oslo,10.5\n2,Lima,3\n3,Oslo,1\n")
    (root / "data" / "cities" / "1.csv").write_text("city,country\nOslo,NO\nLima,PE\n")
    return root


def _line(output: str, dataset: str) -> str:
    """What the run printed for ``dataset``'s transform, after its time."""
    found = re.search(
        rf"^SUCCESS {re.escape(dataset)} \(transform\) in [0-9.]+s: (.*)$", output, re.MULTILINE
    )
    assert found, output
    return found.group(1)


def _results(project: Path) -> dict[str, dict]:
    saved = json.loads((project / ".odf" / RUN_RESULTS_FILE).read_text())
    return {r["unique_id"]: r for r in saved["results"]}


def test_run_says_the_path_each_derivative_took_and_plan_shows_it(project, spark, monkeypatch) -> None:
    odfproj = cli_in(spark, monkeypatch, lambda: project)
    code, output = odfproj("run")
    assert code == 0, output
    # The first update of each is full (no data yet); the query's own mode is said too.
    assert _line(output, "big-sales") == "2 record(s), path: full (it had no data yet); mode: stateless"
    assert (
        _line(output, "by-country")
        == "2 record(s), path: full (it had no data yet); mode: grouped over a join"
    )
    assert _line(output, "by-city") == (
        f"2 record(s), path: full (it had no data yet); mode: full: {FLOAT_SUM}; hint: {HINT}"
    )

    (project / "data" / "sales" / "2.csv").write_text("id,city,amount\n4,Lima,5\n5,Oslo,2\n")
    code, output = odfproj("run")
    assert code == 0, output
    expected = {
        "big-sales": "1 record(s), path: stateless",
        "by-city": f"4 record(s), path: full ({FLOAT_SUM}); hint: {HINT}",
        "by-country": "4 record(s), path: grouped over a join",
    }
    assert {name: _line(output, name) for name in expected} == expected
    # The summary, all a terminal keeps once the live view is gone: each path, and why the full query is.
    assert re.search(r"Dataset\W+Work\W+Status\W+Path\W+Records", output), output  # \W: the table's rules
    assert re.search(r"by-country\W+transform\W+success\W+grouped over a join\W", output), output
    assert f"\nby-city: path full: {FLOAT_SUM}; hint: {HINT}\n" in output
    assert "big-sales: path" not in output
    results = _results(project)
    assert {name: (r["path"], r["why_full"], r["mode"], r["hint"]) for name, r in results.items()} == {
        "sales": (None, None, None, None),
        "cities": (None, None, None, None),
        "big-sales": ("stateless", None, "stateless", None),
        "by-city": ("full", FLOAT_SUM, f"full: {FLOAT_SUM}", HINT),
        "by-country": ("grouped over a join", None, "grouped over a join", None),
    }
    log = Path(json.loads((project / ".odf" / RUN_RESULTS_FILE).read_text())["log_file"]).read_text()
    for name, text in expected.items():
        assert re.search(rf"SUCCESS {re.escape(name)} \(transform\) in [0-9.]+s: {re.escape(text)}\n", log), (
            log
        )

    # Nothing new: no query runs, and the record keeps the last run's path.
    code, output = odfproj("run")
    assert code == 0, output
    assert _line(output, "by-city") == "0 record(s), no new input data"
    workspace = Workspace(load_project(project).workspace())
    by_city = workspace.open("by-city")
    record = read_update_record(by_city, by_city.projection())
    assert record is not None and (record.path, record.why_full, record.hint) == ("full", FLOAT_SUM, HINT)

    # plan, without the engine: each unchanged query's mode as its last run found it.
    text = render_text(plan_project(load_project(project), PlanRequest())[0])
    assert "  transform big-sales\n" in text and "    # mode: stateless (last run)\n" in text
    assert f"    # mode: full: {FLOAT_SUM} (last run)\n    # hint: {HINT}\n" in text
    assert "    # mode: grouped over a join (last run)\n" in text
