"""Small work: an update or ingest that reads few records runs on interpreted expressions, with the same result.

``SparkEngine.small_work`` puts a thread's operations in a child session with ``SMALL_WORK_CONF`` (no Java
code generated and compiled per plan); the coordinator uses it for updates that read at most
``SMALL_WORK_RECORDS`` records, the polling and push ingests for small files into small datasets.
Interpreted and generated evaluation are two implementations of every expression in Spark, so the blocks
they give are compared here on every path (full, stateless, grouped, join) and flat column type.
"""

from __future__ import annotations

import threading
from decimal import Decimal

import pyarrow as pa
import pytest

from odfproj.engine.session import SMALL_WORK_CONF, SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SMALL_WORK_RECORDS, SparkEngine
from odfproj.ingest.pipeline import SMALL_INGEST_BYTES, small_ingest
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import update_derivative
from odfproj.transform.reproduce import reproduce_all
from tests.transform.helpers import (
    CF,
    CT,
    A,
    R,
    add_records,
    block_hashes,
    create_derivative,
    create_root,
    hours,
    schema_with,
)

FACTORY_MODE = "spark.sql.codegen.factoryMode"


def test_small_work_applies_only_where_the_driver_runs_the_tasks() -> None:
    """On a cluster or a Connect server the executors compile once for many rows: no small work there."""
    for master in ("spark://127.0.0.1:7077", "sc://127.0.0.1:15002", "yarn"):
        engine = SparkEngine(SparkSessionHolder(SparkSettings(master=master)))
        with engine.small_work():
            assert not engine.is_small_work
    engine = SparkEngine(SparkSessionHolder(SparkSettings(master="local[2]")))
    with engine.small_work():
        assert engine.is_small_work
        with engine.small_work(False):
            assert not engine.is_small_work
        assert engine.is_small_work
    assert not engine.is_small_work
    assert not engine.holder.created  # deciding starts no JVM


def test_an_ingest_is_small_work_for_small_files_into_a_small_dataset(tmp_path) -> None:
    ws = Workspace(tmp_path / "ws")
    root = create_root(ws, "m", DIM)
    small, big, folder = tmp_path / "small.csv", tmp_path / "big.csv", tmp_path / "parts"
    small.write_text("k,label\na,alpha\n")
    with big.open("wb") as f:
        f.truncate(SMALL_INGEST_BYTES + 1)
    folder.mkdir()
    for part in ("a", "b"):  # a folder (a Parquet dataset) counts as its files together
        with (folder / part).open("wb") as f:
            f.truncate(SMALL_INGEST_BYTES // 2 + 1)
    assert small_ingest(root, [small])
    assert not small_ingest(root, [big])
    assert not small_ingest(root, [folder])
    assert not small_ingest(root, [small] * 2 + [big])
    add_records(root, tmp_path / "scratch", [(A, 0, "k", "v")] * (SMALL_WORK_RECORDS + 1), hours(1))
    assert not small_ingest(ws.open("m"), [small])  # a Ledger or Snapshot merge reads what the dataset holds


@pytest.mark.spark
def test_small_work_is_one_interpreted_child_session_for_this_thread_only(engine, spark) -> None:
    with engine.small_work():
        small = engine.session
        assert small is not spark
        assert small.sparkContext is spark.sparkContext
        for key, value in SMALL_WORK_CONF.items():
            assert small.conf.get(key) == value
        with engine.scope() as scope:  # a query's own child session gets the settings too
            assert scope.session.conf.get(FACTORY_MODE) == "NO_CODEGEN"
        seen: list = []
        other = threading.Thread(target=lambda: seen.append(engine.session))
        other.start()
        other.join()
        assert seen == [spark]
        assert engine.session is small  # made once
        another = SparkEngine(engine.holder)  # a run makes an engine per dataset: the thread's session
        with another.small_work():
            assert another.session is small
    assert engine.session is spark
    assert spark.conf.get(FACTORY_MODE) != "NO_CODEGEN"
    with engine.scope() as scope:
        assert scope.session.conf.get(FACTORY_MODE) != "NO_CODEGEN"


def test_small_work_plans_no_shuffle_for_a_query_over_files(tmp_path, engine, spark) -> None:
    """Its frames are one partition the planner knows of (``in_one_partition``): joins and aggregations
    over them need no exchange, and the update is one stage; large work shuffles as before."""
    import pyarrow.parquet as pq

    from odfproj.odf import model

    for name, keys in (("a", [1, 2, 2, 3]), ("b", [2, 3, 3, 4])):
        for part in range(2):
            (tmp_path / name).mkdir(exist_ok=True)
            table = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([part] * 4, pa.int64())})
            pq.write_table(table, tmp_path / name / f"{part}.parquet")
    query = model.TransformSql(
        engine="spark",
        query="SELECT a.k, COUNT(*) AS n, SUM(b.v) AS s FROM a JOIN b ON a.k = b.k GROUP BY a.k",
    )

    def planned() -> tuple[str, list[tuple]]:
        session = engine.session
        frames = {name: session.read.parquet(str(tmp_path / name)) for name in ("a", "b")}
        result = engine.query(frames, query)
        return result._jdf.queryExecution().executedPlan().toString(), sorted(map(tuple, result.collect()))

    with engine.small_work():
        small_plan, small_rows = planned()
    large_plan, large_rows = planned()
    assert "Exchange" not in small_plan and "Coalesce 1" in small_plan
    assert "Exchange" in large_plan
    assert small_rows == large_rows == [(2, 8, 4), (3, 8, 4)]


def test_a_small_query_registers_its_views_in_the_threads_own_session(engine, spark) -> None:
    from odfproj.odf import model

    query = model.TransformSql(engine="spark", query="SELECT v + 1 AS w FROM a")
    seen: dict[str, object] = {}

    def other_thread() -> None:
        with engine.small_work():
            seen["session"] = engine.session
            with engine.scope() as scope:
                scope.register("a", engine.session.range(2).selectExpr("id AS v"))
                seen["views"] = [t.name for t in engine.session.catalog.listTables()]

    with engine.small_work():
        small = engine.session
        frame = small.range(3).selectExpr("CAST(id AS INT) AS v")
        with engine.scope() as scope:
            assert scope.session is small  # no child session, no global view in between
            scope.register("a", frame)
            assert small.conf.get("spark.sql.ansi.enabled") == "true"
            result = scope.run(query)  # a Spark-dialect query runs without ANSI ...
            assert small.conf.get("spark.sql.ansi.enabled") == "false"
            other = threading.Thread(target=other_thread)
            other.start()
            other.join()
            with engine.scope() as nested:  # a scope opened inside another gets a child of its own
                assert nested.session is not small
        assert small.conf.get("spark.sql.ansi.enabled") == "true"  # ... and the session gets it back
        assert [t.name for t in small.catalog.listTables()] == []  # the views went with the scope
        assert sorted(r.w for r in result.collect()) == [1, 2, 3]  # the frame outlives its view
    assert seen["session"] is not small
    assert seen["views"] == ["a"]  # its own view only, beside ours of the same name


ROOT = schema_with(
    ("k", pa.string()),
    ("v", pa.int64()),
    ("x", pa.float64()),
    ("d", pa.decimal128(9, 2)),
    ("day", pa.date32()),
    ("flag", pa.bool_()),
    ("raw", pa.binary()),
)
DIM = schema_with(("k", pa.string()), ("label", pa.string()))

#: One derivative per path, with functions of every flat type in them.
QUERIES = {
    "stateless": (
        "SELECT event_time, upper(k) AS k, v * 3 - 1 AS v, round(x / 3, 4) AS x, d * 2 AS d, "
        "date_add(day, CAST(v AS INT)) AS day, NOT flag AS flag, concat(raw, raw) AS raw, "
        "CAST(event_time AS DATE) AS seen, length(k) AS n, CAST(v AS STRING) AS s "
        "FROM r WHERE v % 4 <> 1 OR k IS NULL"
    ),
    "grouped": (
        "SELECT max(event_time) AS event_time, k, count(*) AS n, sum(v) AS v, sum(d) AS d "
        "FROM r WHERE flag OR v > 0 GROUP BY k HAVING count(*) > 0"
    ),
    "join": (
        "SELECT greatest(r.event_time, m.event_time) AS event_time, r.k, m.label, r.v + 1 AS v "
        "FROM r JOIN m ON r.k = m.k"
    ),
    "full": (
        "SELECT event_time, k, v, row_number() OVER (PARTITION BY k ORDER BY event_time, v) AS rn, "
        "avg(x) OVER (PARTITION BY k) AS mean FROM r"
    ),
}


def _root_rows(n: int, start: int) -> list[tuple]:
    keys = ["a", "b", None, "c"]
    return [
        (
            A,
            start + i,
            keys[i % 4],
            (start + i) * 7 - 20,
            None if i % 5 == 2 else (start + i) / 3 - 2.5,
            Decimal(f"{start + i}.25"),
            hours(start + i).date(),
            i % 2 == 0,
            b"r" + bytes([i % 251]),
        )
        for i in range(n)
    ]


def _workspace(path, query: str) -> Workspace:
    ws = Workspace(path)
    root, dim = create_root(ws, "r", ROOT), create_root(ws, "m", DIM)
    create_derivative(ws, "d", {"r": root, "m": dim}, (None, query))
    return ws


def _updates(ws: Workspace, engine) -> list[str]:
    """Three updates: first data, more rows with a retraction and a correction, a new dimension row."""
    first = _root_rows(12, 0)
    batches = [
        (first, [(A, 0, "a", "alpha"), (A, 0, "b", "beta")]),
        (
            [
                *_root_rows(5, 20),
                (R, *first[1][1:]),
                (CF, *first[3][1:]),
                (CT, *first[3][1:3], 99, *first[3][4:]),
            ],
            [],
        ),
        ([], [(A, 30, "c", "gamma"), (R, 0, "a", "alpha")]),
    ]
    modes = []
    for n, (roots, dims) in enumerate(batches, start=1):
        now = hours(100 + n)
        if roots:
            add_records(ws.open("r"), ws.root / "scratch", roots, now)
        if dims:
            add_records(ws.open("m"), ws.root / "scratch", dims, now)
        modes.append(update_derivative(ws, "d", engine, now).mode)
    return modes


def _compiled(spark) -> int:
    """How many classes Spark's code generator has compiled in this JVM."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return metrics.METRIC_COMPILATION_TIME().getCount()


@pytest.mark.spark
@pytest.mark.parametrize("path", list(QUERIES))
def test_small_work_writes_the_blocks_generated_code_writes(
    tmp_path, engine, spark, monkeypatch, path
) -> None:
    # Spark compiles a few classes once per JVM whatever the settings: a first small update of another
    # query gets those out of the way.
    _updates(_workspace(tmp_path / "warm", "SELECT event_time, k FROM r"), engine)
    before = _compiled(spark)
    small = _workspace(tmp_path / "small", QUERIES[path])
    modes = _updates(small, engine)
    by_small = _compiled(spark) - before
    assert modes[1] == ("full" if path == "full" else path)

    normal = SparkEngine.small_work
    monkeypatch.setattr(SparkEngine, "small_work", lambda self, small=True: normal(self, False))
    generated = _workspace(tmp_path / "generated", QUERIES[path])
    before = _compiled(spark)
    assert _updates(generated, engine) == modes
    by_generated = _compiled(spark) - before
    # What small work still compiles is what Spark always generates (the top-k's row ordering): a few.
    assert by_generated > 3 * by_small
    assert block_hashes(small) == block_hashes(generated)
    assert all(reproduce_all(small, "d", engine))  # and `verify --reproduce` (generated code) agrees
