"""Data tests on real Spark: in ``odfproj run`` (blocking its downstream) and ``odfproj test``."""

from __future__ import annotations

import json

import pytest

from odfproj.plan.sources import PlanRequest
from odfproj.project.config import load_project
from odfproj.quality.definitions import DataTest
from odfproj.quality.execute import Outcome, run_tests
from odfproj.run.run import RUN_RESULTS_FILE, Status, run_project
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import cli_in
from tests.quality.project import make_project
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def ran(spark, tmp_path_factory):
    """The project after one ``run``: cities pass their tests, visits fails one with severity error."""
    root = make_project(tmp_path_factory.mktemp("quality") / "p")
    config = load_project(root)
    result = run_project(config, PlanRequest(), holder=RecordingHolder(spark))  # type: ignore[arg-type]
    return config, result


def test_run_runs_each_datasets_tests_and_a_blocking_failure_stops_its_downstream(ran):
    config, result = ran
    runs = {r.dataset: r for r in result.results}
    assert runs["cities"].status is Status.SUCCESS
    assert {t["status"] for t in runs["cities"].tests} == {"pass"} and len(runs["cities"].tests) == 4
    visits = runs["visits"]
    assert visits.status is Status.ERROR and visits.records_added == 3
    assert visits.message == (
        "1 data test(s) failed: relationships(city -> cities.name); its new data stays committed "
        "(the chain is append-only) and its downstream datasets are not updated"
    )
    assert runs["visits.copy"].status is Status.SKIPPED
    assert runs["visits.copy"].message == "upstream dataset visits failed"
    # The data stays: the chain is append-only.
    assert Workspace(config.workspace()).open("visits").projection().last_offset == 2
    written = json.loads((config.workspace() / RUN_RESULTS_FILE).read_text())
    tests = {t["name"]: t for r in written["results"] for t in r["tests"]}
    assert tests["relationships(city -> cities.name)"] | {"message": ""} == {
        "dataset": "visits",
        "name": "relationships(city -> cities.name)",
        "kind": "relationships",
        "severity": "error",
        "status": "fail",
        "failures": 1,
        "message": "",
        "defined_at": "tests/data.yaml:9:5",
    }
    assert tests["no_negative_amounts"]["status"] == "warn"


def test_the_test_command_prints_failing_rows_and_exits_1(ran, spark, monkeypatch):
    config, _ = ran
    odfproj = cli_in(spark, monkeypatch, lambda: config.root)
    code, out = odfproj("test")
    assert code == 1, out
    assert "FAIL visits: relationships(city -> cities.name) (tests/data.yaml:9:5): 1 failing row(s)" in out
    assert "Atlantis" in out and "Oslo" not in out.split("relationships")[1].split("WARN")[0]
    assert "WARN visits: no_negative_amounts (tests/data.yaml:10:5): 1 failing row(s)" in out
    assert "8 data test(s): 6 passed, 1 failed, 1 warned, 0 could not run" in out
    # Selectors narrow the tests; warnings alone do not fail the command.
    assert odfproj("test", "cities")[0] == 0
    # As known before anything was ingested: no rows, no ingest yet.
    code, out = odfproj("test", "cities", "--as-at", "2000-01-01T00:00:00Z")
    assert code == 1
    assert "FAIL cities: row_count(2..10) (tests/data.yaml:4:5): 0 row(s), expected 2..10" in out
    assert (
        "FAIL cities: freshness(ingest within 1d) (tests/data.yaml:5:5): the dataset has no last ingest yet"
        in out
    )
    code, out = odfproj("test", "--as-at", "yesterday")
    assert code == 1 and out.strip().endswith(
        "--as-at 'yesterday': expected an RFC 3339 time, e.g. 2024-01-31T00:00:00Z"
    )


def test_custom_sql_passes_the_query_allowlist(ran, engine):
    config, _ = ran
    workspace = Workspace(config.workspace())
    reading = DataTest(
        dataset="cities",
        kind="sql",
        args={
            "query": "SELECT * FROM `cities` WHERE reflect('java.lang.System', 'getenv', 'HOME') IS NOT NULL"
        },
        name="sneaky",
    )
    unknown = DataTest(dataset="cities", kind="not_null", args={"columns": ("nmae",)}, name="typo")
    missing = DataTest(dataset="nowhere", kind="not_null", args={"columns": ("x",)}, name="gone")
    results = run_tests([reading, unknown, missing], workspace, engine)
    assert [r.outcome for r in results] == [Outcome.ERROR] * 3
    assert "reflect" in results[0].message and "not allowed" in results[0].message
    assert "nmae" in results[1].message
    assert results[2].message == "the dataset is not in the workspace (run it first)"
    assert all(r.blocks for r in results)


def test_show_tells_definition_numbers_rows_and_last_run(ran, spark, monkeypatch):
    config, _ = ran
    odfproj = cli_in(spark, monkeypatch, lambda: config.root)
    code, out = odfproj("show", "visits")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("visits (Root) did:odf:")
    assert "source: polling: FetchStepFilesGlob data/visits/*.csv" in lines
    assert "primary key: id" in lines and "records: 3, 3 current row(s)" in lines
    last = next(line for line in lines if line.startswith("last run: "))
    assert last.startswith("last run: error at ") and ", data tests 2/4 passed: 1 data test(s) failed" in last
    assert "Atlantis" in out
    code, out = odfproj("show", "VISITS.COPY")
    assert code == 0, out
    assert "inputs: visits" in out and "query: SELECT * FROM src" in out
    assert "schema: (no data yet)" in out and "last run: skipped" in out
    code, out = odfproj("show", "nowhere")
    assert code == 1 and "nowhere" in out and "Traceback" not in out


def test_retry_reruns_the_failed_dataset_and_its_skipped_downstream(ran, spark, monkeypatch):
    """Last in this module: it changes the shared project (the failing test becomes a warning)."""
    config, _ = ran
    tests = config.root / "tests" / "data.yaml"
    tests.write_text(
        tests.read_text().replace(
            "  - relationships: {column: city, to: cities, field: name}\n",
            "  - relationships: {column: city, to: cities, field: name}\n    severity: warn\n",
        )
    )
    odfproj = cli_in(spark, monkeypatch, lambda: config.root)
    code, out = odfproj("retry")
    assert code == 0, out
    assert out.startswith("retrying 2 dataset(s): visits, visits.copy\n")
    written = json.loads((config.workspace() / RUN_RESULTS_FILE).read_text())
    assert {r["unique_id"]: r["status"] for r in written["results"]} == {
        "visits": "success",
        "visits.copy": "success",
    }
    assert odfproj("retry") == (
        0,
        "nothing to retry: the last run left no dataset failed, skipped by a failure or cancelled\n",
    )
