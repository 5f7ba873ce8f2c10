"""The Spark engine: query validation without data, preprocess, raw queries and transforms on real Spark."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.contract import (
    Engine,
    InvalidQueryError,
    ValidateQueryRequest,
    ValidateQueryResponseInvalidQuery,
    ValidateQueryResponseSuccess,
    raise_for_response,
)
from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.odf import model
from odfproj.odf.identity import DatasetId

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


def test_engine_is_lazy_and_satisfies_the_contract() -> None:
    engine = SparkEngine(SparkSessionHolder(SparkSettings(master="local[1]")))
    assert isinstance(engine, Engine)
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
    response = engine.validate_query(
        ValidateQueryRequest(
            inputs={"com.example.prices": PRICES, "skus": SKUS},
            transform=sql(
                "SELECT p.event_time, s.name, p.price FROM `com.example.prices` p JOIN skus s ON p.sku = s.sku"
            ),
        )
    )
    assert isinstance(response, ValidateQueryResponseSuccess)
    assert response.schema.names == ["event_time", "name", "price"]


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
    response = engine.validate_query(ValidateQueryRequest({"prices": PRICES}, sql(query)))
    assert isinstance(response, ValidateQueryResponseInvalidQuery)
    assert culprit in response.message
    assert "\n" not in response.message


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


def test_execute_raw_query(engine: SparkEngine, tmp_path) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"x": [3, 1, 2], "y": ["c", "a", "b"]}), source)
    out = tmp_path / "out" / "result.parquet"
    response = engine.execute_raw_query(
        model.RawQueryRequest(
            input_data_paths=(str(source),),
            transform=sql("SELECT y, x * 10 AS x FROM input WHERE x > 1 ORDER BY x"),
            output_data_path=str(out),
        )
    )
    assert response == model.RawQueryResponseSuccess(num_records=2)
    assert pq.read_table(out).to_pydict() == {"y": ["b", "c"], "x": [20, 30]}
    assert sorted(p.name for p in out.parent.iterdir()) == ["result.parquet"]

    bad = engine.execute_raw_query(
        model.RawQueryRequest(
            input_data_paths=(str(source),),
            transform=sql("SELECT uuid() FROM input"),
            output_data_path=str(out),
        )
    )
    assert isinstance(bad, model.RawQueryResponseInvalidQuery)
    with pytest.raises(InvalidQueryError, match="uuid"):
        raise_for_response(bad)


def _vocab() -> model.DatasetVocabulary:
    return model.DatasetVocabulary(
        offset_column="offset",
        operation_type_column="op",
        system_time_column="system_time",
        event_time_column="event_time",
    )


def test_execute_transform(engine: SparkEngine, tmp_path) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    data = pa.table(
        {
            "offset": pa.array([0, 1, 2], pa.int64()),
            "op": pa.array([0, 0, 0], pa.int32()),
            "system_time": pa.array([t0] * 3, TS),
            "event_time": pa.array([datetime(2024, 1, d, tzinfo=UTC) for d in (3, 1, 2)], TS),
            "value": [30, 10, 20],
        }
    )
    source = tmp_path / "input.parquet"
    pq.write_table(data, source)
    dataset_id = DatasetId.from_public_key_bytes(bytes(range(32)))
    request = model.TransformRequest(
        dataset_id=dataset_id,
        dataset_alias="out",
        system_time=datetime(2024, 2, 1, 12, 0, tzinfo=UTC),
        vocab=_vocab(),
        transform=sql("SELECT event_time, value * 2 AS doubled FROM src"),
        query_inputs=(
            model.TransformRequestInput(
                dataset_id=dataset_id,
                dataset_alias="src",
                query_alias="src",
                vocab=_vocab(),
                offset_interval=model.OffsetInterval(start=1, end=2),
                data_paths=(str(source),),
                schema_file=str(source),
                explicit_watermarks=(
                    model.Watermark(system_time=t0, event_time=datetime(2024, 1, 2, tzinfo=UTC)),
                ),
            ),
        ),
        next_offset=5,
        new_checkpoint_path=str(tmp_path / "checkpoint"),
        new_data_path=str(tmp_path / "new.parquet"),
    )
    response = engine.execute_transform(request)
    assert response == model.TransformResponseSuccess(
        new_offset_interval=model.OffsetInterval(start=5, end=6),
        new_watermark=datetime(2024, 1, 2, tzinfo=UTC),
    )
    table = pq.read_table(tmp_path / "new.parquet")
    assert table.column_names == ["offset", "op", "system_time", "event_time", "doubled"]
    assert table.column("offset").to_pylist() == [5, 6]
    assert table.column("doubled").to_pylist() == [20, 40]  # ordered by event time
    assert table.schema.field("system_time").type == TS
    assert table.column("system_time").to_pylist() == [datetime(2024, 2, 1, 12, 0, tzinfo=UTC)] * 2

    missing = engine.execute_transform(
        model.TransformRequest(**{**_fields(request), "transform": sql("SELECT value FROM src")})
    )
    assert isinstance(missing, model.TransformResponseInvalidQuery)
    assert "event_time" in missing.message


def _fields(obj: object) -> dict[str, object]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}
