"""``odfproj sql`` views over a real workspace: state (index or multiset), changelog, as-at, errors."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from odfproj.engine.errors import InvalidQueryError
from odfproj.plan.sources import PlanRequest
from odfproj.project.config import load_project
from odfproj.run.run import run_project
from odfproj.state.read import read_changelog, read_state
from odfproj.state.views import referenced_views, run_sql
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import cli_in, run_main_split
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

# Data system times after the definitions' (apply stamps now, and system time never goes backwards).
T1 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
T2 = T1 + timedelta(days=1)

PRICES = """\
kind: DatasetSnapshot
version: 1
content:
  name: prices
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/*.csv
        eventTime:
          kind: FromSystemTime
      read:
        kind: Csv
        header: true
        schema:
          - id BIGINT
          - item STRING
          - price DOUBLE
      merge:
        kind: Snapshot
        primaryKey: [id]
"""

TOTALS = """\
kind: DatasetSnapshot
version: 1
content:
  name: price.totals
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: prices
          alias: p
      transform:
        kind: Sql
        engine: spark
        query: SELECT max(event_time) AS event_time, count(*) AS items, sum(price) AS total FROM p
"""


@pytest.fixture(scope="module")
def workspace(spark, tmp_path_factory) -> Workspace:
    """Two snapshots of ``prices`` (one price changed, one item gone, one new) and an aggregation."""
    root = tmp_path_factory.mktemp("views") / "proj"
    (root / "datasets").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "odfproj.yaml").write_text("name: views\n")
    (root / "datasets" / "prices.yaml").write_text(PRICES)
    (root / "datasets" / "price.totals.yaml").write_text(TOTALS)
    (root / "data" / "1.csv").write_text("id,item,price\n1,tea,2.0\n2,milk,1.5\n3,bread,3.0\n")
    config = load_project(root)
    first = run_project(config, PlanRequest(), holder=RecordingHolder(spark), system_time=T1)
    assert first.ok, [r.message for r in first.results]
    (root / "data" / "2.csv").write_text("id,item,price\n1,tea,2.5\n3,bread,3.0\n4,jam,4.0\n")
    assert run_project(config, PlanRequest(), holder=RecordingHolder(spark), system_time=T2).ok
    return Workspace(config.workspace())


def _rows(table, *columns: str) -> Counter:
    return Counter(tuple(row[c] for c in columns) for row in table.to_pylist())


def test_state_of_a_keyed_dataset_is_the_index_state(workspace, engine):
    got = run_sql(engine, workspace, "SELECT * FROM `prices`")
    assert got.column_names == ["event_time", "id", "item", "price"]
    expected = read_state(workspace.open("prices"))
    assert _rows(got, "id", "item", "price") == _rows(expected, "id", "item", "price")
    assert _rows(got, "id", "price") == Counter({(1, 2.5): 1, (3, 3.0): 1, (4, 4.0): 1})


def test_state_of_a_derivative_is_what_was_not_retracted(workspace, engine):
    changelog = read_changelog(workspace.open("price.totals"))
    assert sorted(changelog.column("op").to_pylist()) == [0, 0, 1]  # the first total was retracted
    got = run_sql(engine, workspace, "SELECT items, total FROM `price.totals`")
    assert got.to_pylist() == [{"items": 3, "total": 9.5}]


def test_changelog_view_has_every_record_with_system_columns(workspace, engine):
    got = run_sql(engine, workspace, "SELECT offset, op, system_time FROM `prices$changelog` ORDER BY offset")
    stored = read_changelog(workspace.open("prices"))
    assert got.column("offset").to_pylist() == stored.column("offset").to_pylist()
    assert got.column("op").to_pylist() == stored.column("op").to_pylist()


def test_as_at_shows_what_was_known_then(workspace, engine):
    between = T1 + timedelta(hours=12)
    keyed = run_sql(engine, workspace, "SELECT id, price FROM `prices`", as_at=between)
    assert _rows(keyed, "id", "price") == Counter({(1, 2.0): 1, (2, 1.5): 1, (3, 3.0): 1})
    derived = run_sql(engine, workspace, "SELECT items, total FROM `price.totals`", as_at=between)
    assert derived.to_pylist() == [{"items": 3, "total": 6.5}]
    log = run_sql(engine, workspace, "SELECT count(*) AS n FROM `prices$changelog`", as_at=between)
    assert log.to_pylist() == [{"n": 3}]
    before = run_sql(
        engine, workspace, "SELECT count(*) AS n FROM `prices`", as_at=datetime(2020, 1, 1, tzinfo=UTC)
    )
    assert before.to_pylist() == [{"n": 0}]


def test_a_join_across_datasets_and_limit(workspace, engine):
    sql = "SELECT p.item, t.total FROM `prices` p CROSS JOIN `price.totals` t ORDER BY p.item"
    assert run_sql(engine, workspace, sql, limit=2).to_pylist() == [
        {"item": "bread", "total": 9.5},
        {"item": "jam", "total": 9.5},
    ]


def test_only_mentioned_datasets_are_views():
    names = ["prices", "price.totals", "other"]
    views = referenced_views("SELECT * FROM `price.totals$changelog` JOIN `prices`", names)
    assert {(v.name, v.changelog) for v in views} == {("price.totals$changelog", True), ("prices", False)}


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM `nope`", "Datasets are views named after them"),
        ("SELECT rand() FROM `prices`", "not deterministic"),
        ("DROP TABLE `prices`", "query"),
        ("SELECT * FROM parquet.`/etc/passwd`", "query"),
    ],
)
def test_bad_queries_are_refused_with_one_line(workspace, engine, sql, message):
    with pytest.raises(InvalidQueryError, match=message) as caught:
        run_sql(engine, workspace, sql)
    assert "\n" not in str(caught.value)


def test_cli_sql(workspace, spark, monkeypatch):
    """``odfproj sql`` through the real entry point, in-process on the shared session (no JVM per call)."""
    root = workspace.root.parent
    cli_in(spark, monkeypatch, lambda: root)  # the command's Spark session holder: the test session
    monkeypatch.chdir(root)
    monkeypatch.setenv("COLUMNS", "200")
    cmd = ["sql", "--format", "csv"]
    code, stdout, stderr = run_main_split(*cmd, "SELECT id, item FROM `prices` ORDER BY id")
    assert code == 0, stderr
    assert stdout.splitlines() == ['"id","item"', '1,"tea"', '3,"bread"', '4,"jam"']
    assert stderr == ""
    code, _, stderr = run_main_split(*cmd, "SELECT nope FROM `prices`")
    assert code == 1 and stderr.startswith("error: ") and len(stderr.splitlines()) == 1
    assert "Traceback" not in stderr
