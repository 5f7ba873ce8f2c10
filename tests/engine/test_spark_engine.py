"""The Spark engine: query validation without data and preprocess on real Spark."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.odf import model

pytestmark = pytest.mark.spark

TS = pa.timestamp("ms", tz="UTC")
PRICES = pa.schema([("event_time", TS), ("sku", pa.utf8()), ("price", pa.decimal128(18, 2))])
SKUS = pa.schema([("sku", pa.utf8()), ("name", pa.utf8())])


def sql(query: str) -> model.TransformSql:
    return model.TransformSql(engine="spark", query=query)


def steps(*queries: tuple[str | None, str]) -> model.TransformSql:
    return model.TransformSql(
        engine="spark", queries=tuple(model.SqlQueryStep(alias=a, query=q) for a, q in queries)
    )


def test_engine_is_lazy() -> None:
    engine = SparkEngine(SparkSessionHolder(SparkSettings(master="local[1]")))
    assert not engine.holder.created


def test_validate_projection(engine: SparkEngine) -> None:
    schema = engine.output_schema(
        {"prices": PRICES}, sql("SELECT event_time, upper(sku) AS sku, price * 2 AS double_price FROM prices")
    )
    assert schema.names == ["event_time", "sku", "double_price"]
    assert schema.field("event_time").type == TS
    assert pa.types.is_decimal(schema.field("double_price").type)


def test_validate_aggregation(engine: SparkEngine) -> None:
    schema = engine.output_schema(
        {"prices": PRICES},
        sql("SELECT sku, count(*) AS n, max(event_time) AS last FROM prices GROUP BY sku"),
    )
    assert schema == pa.schema([("sku", pa.utf8()), pa.field("n", pa.int64(), nullable=False), ("last", TS)])


def test_validate_join_with_dotted_alias(engine: SparkEngine) -> None:
    schema = engine.output_schema(
        {"com.example.prices": PRICES, "skus": SKUS},
        sql("SELECT p.event_time, s.name, p.price FROM `com.example.prices` p JOIN skus s ON p.sku = s.sku"),
    )
    assert schema.names == ["event_time", "name", "price"]


@pytest.mark.parametrize(
    ("query", "culprit"),
    [
        ("SELECT rand() AS r FROM prices", "rand"),
        ("SELECT uuid() AS id FROM prices", "uuid"),
        ("SELECT current_timestamp() AS t FROM prices", "current_timestamp"),
        ("SELECT now() AS t FROM prices", "now"),
        ("SELECT shuffle(array(1, 2)) AS a FROM prices", "shuffle"),
        ("SELECT java_method('java.lang.System', 'getenv', 'HOME') AS h FROM prices", "java_method"),
        ("SELECT reflect('java.util.UUID', 'randomUUID') AS u FROM prices", "reflect"),
        ("SELECT input_file_name() AS f FROM prices", "input_file_name"),
        ("SELECT * FROM prices WHERE price > (SELECT max(randn()) FROM prices)", "randn"),
        ("SELECT TRANSFORM(sku) USING 'cat' AS (o) FROM prices", "TRANSFORM"),
    ],
)
def test_refuses_impure_functions(engine: SparkEngine, query: str, culprit: str) -> None:
    with pytest.raises(InvalidQueryError) as refused:
        engine.output_schema({"prices": PRICES}, sql(query))
    assert culprit in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_refused_query_stays_refused(engine: SparkEngine) -> None:
    """Checks passed are remembered (by query and schemas), refusals never are."""
    for _ in range(2):
        with pytest.raises(InvalidQueryError, match="rand"):
            engine.output_schema({"prices": PRICES}, sql("SELECT rand() AS r, sku FROM prices"))


def test_a_query_is_checked_once_per_inputs_schemas(engine: SparkEngine, monkeypatch) -> None:
    from odfproj.engine import spark as engine_spark

    checks: list[str] = []
    real = engine_spark.check_query_plan
    monkeypatch.setattr(
        engine_spark, "check_query_plan", lambda df, where: (checks.append(where), real(df, where))
    )
    query = sql("SELECT sku, price * 3 AS tripled FROM prices WHERE price > 1")
    engine.output_schema({"prices": PRICES}, query)
    engine.output_schema({"prices": PRICES}, query)
    assert len(checks) == 1
    wider = PRICES.append(pa.field("qty", pa.int32()))
    assert engine.output_schema({"prices": wider}, query).names == ["sku", "tripled"]
    assert len(checks) == 2


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT * FORM prices", "PARSE_SYNTAX_ERROR"),
        ("SELECT nope FROM prices", "UNRESOLVED_COLUMN"),
        ("SELECT * FROM parquet.`/etc/passwd`", "relation parquet./etc/passwd is not allowed"),
        ("DROP VIEW prices", "PARSE_SYNTAX_ERROR"),
        ("SELECT 1; SELECT 2", "PARSE_SYNTAX_ERROR"),
    ],
)
def test_invalid_query_is_one_line(engine: SparkEngine, query: str, expected: str) -> None:
    with pytest.raises(InvalidQueryError) as info:
        engine.output_schema({"prices": PRICES}, sql(query))
    message = str(info.value)
    assert expected in message
    assert "\n" not in message
    assert "SQLSTATE" not in message and "at org.apache" not in message


def test_statement_is_refused_before_it_runs(engine: SparkEngine, spark) -> None:
    with pytest.raises(InvalidQueryError):
        engine.output_schema({}, sql("CREATE TEMPORARY VIEW leaked AS SELECT 1"))
    assert not spark.catalog.tableExists("leaked")


def test_multi_step_rules(engine: SparkEngine) -> None:
    with pytest.raises(InvalidQueryError, match="step 1 of 2 has no alias"):
        engine.output_schema({"prices": PRICES}, steps((None, "SELECT 1"), (None, "SELECT 2")))
    with pytest.raises(InvalidQueryError, match="both"):
        engine.output_schema(
            {},
            model.TransformSql(
                engine="spark", query="SELECT 1", queries=(model.SqlQueryStep(query="SELECT 1"),)
            ),
        )


def test_preprocess_multi_step(engine: SparkEngine, spark) -> None:
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "b")], "x INT, y STRING")
    transform = steps(
        ("doubled", "SELECT x * 2 AS x2, y FROM input"),
        ("grouped", "SELECT y, sum(x2) AS total FROM doubled GROUP BY y"),
        (None, "SELECT y, total FROM grouped ORDER BY y"),
    )
    out = engine.preprocess(df, transform)
    assert [tuple(r) for r in out.collect()] == [("a", 2), ("b", 10)]
    # Nothing leaked into the shared session.
    for view in ("input", "doubled", "grouped"):
        assert not spark.catalog.tableExists(view)
    assert not [t for t in spark.catalog.listTables("global_temp") if t.name.startswith("odfproj_")]


def test_preprocess_in_parallel_threads_do_not_collide(engine: SparkEngine, spark) -> None:
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            df = spark.createDataFrame([(n,)], "x INT")
            out = engine.preprocess(
                df, steps(("a", "SELECT x + 1 AS x FROM input"), (None, "SELECT x FROM a"))
            )
            results[n] = [r.x for r in out.collect()]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == {n: [n + 1] for n in range(4)}
