"""Translation of other engines' SQL to Spark SQL, without a JVM: what is rewritten, what is refused.

The meaning of the translated queries is tested on Spark in test_dialects_meaning.py; here the rules
that need no engine: refusals name the engine and the construct, `validate` and a plan without the
engine refuse untranslatable queries, and the Spark engine will not run another engine's SQL.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odfproj.engine.dialects import UntranslatableQueryError, to_spark, translate, translated_queries
from odfproj.engine.errors import InvalidQueryError
from odfproj.odf import model
from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.project.validate import validate_files


def _sql(engine: str, query: str, **kw) -> model.TransformSql:
    return model.TransformSql(engine=engine, query=query, **kw)


def test_spark_sql_passes_unchanged():
    transform = _sql("spark", 'SELECT "id" AS s FROM input')
    assert to_spark(transform) is transform


def test_translated_transform_is_spark_with_every_step():
    transform = model.TransformSql(
        engine="DataFusion",
        queries=(
            model.SqlQueryStep(alias="t", query='SELECT "Id" AS id FROM input'),
            model.SqlQueryStep(query="SELECT id FROM t"),
        ),
    )
    spark = to_spark(transform)
    assert spark.engine == "spark" and spark.query is None
    assert [s.alias for s in spark.queries] == ["t", None]
    assert "`Id` AS id" in spark.queries[0].query
    steps = translated_queries(transform)
    assert steps[0].source == 'SELECT "Id" AS id FROM input'


@pytest.mark.parametrize(
    ("engine", "query", "construct"),
    [
        ("datafusion", "SELECT json_get_json(e, 'a') AS a FROM input", "function json_get_json"),
        ("datafusion", "SELECT a / b AS q FROM input", "the division a / b"),
        ("datafusion", "SELECT to_timestamp(t, '%c') AS t FROM input", "the time format directive %c"),
        ("datafusion", "SELECT to_timestamp(t, f) AS t FROM input", "to_timestamp with a computed format"),
        ("datafusion", "DROP TABLE input", "the DROP statement"),
        ("datafusion", "SELECT 1 AS a; SELECT 2 AS b", "the query"),
        ("datafusion", "SELECT FROM WHERE", "the query"),
        (
            "flink",
            "SELECT * FROM a JOIN b FOR SYSTEM_TIME AS OF a.t AS c ON a.k = c.k",
            "FOR SYSTEM_TIME AS OF",
        ),
        ("flink", "SELECT TO_TIMESTAMP_LTZ(n, 6) AS t FROM input", "TO_TIMESTAMP_LTZ with precision 6"),
        (
            "flink",
            "SELECT window_start FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '1' DAY))",
            "function CUMULATE",
        ),
        ("risingwave", "SELECT count(*) AS n FROM t EMIT ON WINDOW CLOSE", "EMIT ON WINDOW CLOSE"),
        ("oracle", "SELECT 1 AS a FROM dual", "the query"),
    ],
)
def test_refusals_name_the_engine_and_the_construct(engine, query, construct):
    with pytest.raises(UntranslatableQueryError) as caught:
        to_spark(_sql(engine, query))
    assert caught.value.engine == engine
    assert caught.value.construct == construct
    assert str(caught.value).startswith(f"engine {engine}: cannot translate {construct} to Spark SQL: ")
    assert "\n" not in str(caught.value)


def test_unknown_engine_says_which_engines_exist():
    with pytest.raises(UntranslatableQueryError, match="odfproj runs spark and translates datafusion, flink"):
        to_spark(_sql("beam", "SELECT 1"))


def test_flink_temporal_tables_are_refused():
    transform = _sql(
        "flink",
        "SELECT * FROM a",
        temporal_tables=(model.TemporalTable(name="b", primary_key=("k",)),),
    )
    with pytest.raises(UntranslatableQueryError, match="temporalTables"):
        to_spark(transform)


@pytest.mark.parametrize(
    ("engine", "query", "expected"),
    [
        ("datafusion", 'SELECT "id" AS id FROM input', "`id` AS id"),
        ("datafusion", "SELECT 'it''s' AS s FROM input", "'it\\'s'"),
        ("datafusion", r"SELECT 'a\b' AS s FROM input", "'a\\\\b'"),
        ("datafusion", "SELECT x::bigint AS x FROM input", "CAST(x AS BIGINT)"),
        ("datafusion", "SELECT 7 / 2 AS x FROM input", "CAST(7 DIV 2 AS BIGINT)"),
        ("datafusion", "SELECT CAST(a AS DOUBLE) / b AS x FROM input", "CAST(a AS DOUBLE) / b"),
        ("datafusion", "SELECT 0.5 * a AS x FROM input", "CAST(0.5 AS DOUBLE) * a"),
        ("datafusion", "SELECT to_timestamp(t, '%d/%m/%Y %H:%M') AS t FROM input", "'dd/MM/yyyy HH:mm'"),
        (
            "datafusion",
            "SELECT to_timestamp(t, '%Y-%m-%dT%H:%M:%S%.3f') AS t FROM input",
            r"'yyyy-MM-dd\'T\'HH:mm:ss.SSS'",
        ),
        ("flink", "SELECT CAST(t AS TIMESTAMP(3)) AS t FROM input", "CAST(t AS TIMESTAMP)"),
        (
            "flink",
            "SELECT TUMBLE_START(t, INTERVAL '1' DAY) AS s FROM x GROUP BY TUMBLE(t, INTERVAL '1' DAY)",
            "GROUP BY\n  WINDOW(t, '1 day')",
        ),
        ("risingwave", "SELECT x::int AS x FROM input", "CAST(x AS INT)"),
    ],
)
def test_rewrites(engine, query, expected):
    assert expected in translate(query, engine)


def test_the_spark_engine_refuses_sql_of_another_engine():
    """Every path must translate first; a transform that skipped it is refused, not run as Spark SQL."""
    from odfproj.engine.spark import _steps

    with pytest.raises(
        InvalidQueryError, match="engine datafusion: only Spark SQL runs on Spark untranslated"
    ):
        _steps(_sql("datafusion", 'SELECT "id" AS id FROM input'))


ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: readings
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/*.csv
      read:
        kind: Csv
        header: true
        schema: ["id BIGINT", "v STRING"]
      preprocess:
        kind: Sql
        engine: datafusion
        query: SELECT "id" AS id, json_get_json(v, 'a') AS a FROM input
      merge:
        kind: Append
"""


def test_validate_refuses_an_untranslatable_query_on_one_line(tmp_path):
    path = tmp_path / "readings.yaml"
    path.write_text(ROOT)
    report = validate_files([path], display_root=tmp_path)
    assert [str(p) for p in report.problems] == [
        "readings.yaml:17:17: dataset readings: the preprocess query: engine datafusion: cannot translate "
        "function json_get_json to Spark SQL: it is not a function the translator knows in this engine "
        "(an extension, or a UDF)"
    ]


def test_plan_refuses_an_untranslatable_query_without_the_engine(tmp_path):
    root = Path(tmp_path)
    (root / "datasets").mkdir()
    (root / "odfproj.yaml").write_text("name: p\n")
    (root / "datasets" / "readings.yaml").write_text(ROOT)
    plan, _ = plan_project(load_project(root), PlanRequest())
    (step,) = plan.definitions
    assert step.action is Action.REFUSED
    assert step.manifest == "datasets/readings.yaml"
    assert step.reasons == (
        "the preprocess query cannot run: engine datafusion: cannot translate function json_get_json to Spark "
        "SQL: it is not a function the translator knows in this engine (an extension, or a UDF)",
    )


DAILY = """\
kind: DatasetSnapshot
version: 1
content:
  name: cases.daily
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: cases
      transform:
        kind: Sql
        engine: flink
        queries:
          - alias: days
            query: SELECT TUMBLE_START(t, INTERVAL '1' DAY) AS t, COUNT(*) AS n FROM cases GROUP BY TUMBLE(t, INTERVAL '1' DAY)
          - query: SELECT t AS event_time, n FROM days WHERE n > 1
"""


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfproj", *args], cwd=root, capture_output=True, text=True, timeout=120
    )


def test_render_prints_the_spark_sql_of_every_step_with_its_engine(tmp_path):
    root = Path(tmp_path)
    (root / "datasets").mkdir()
    (root / "odfproj.yaml").write_text("name: p\n")
    (root / "datasets" / "daily.yaml").write_text(DAILY)
    (root / "datasets" / "readings.yaml").write_text(ROOT)
    done = _cli(root, "render", "cases.daily")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "-- cases.daily: transform, step 1 of 2 (alias days)\n"
        "-- engine flink: translated to Spark SQL\n"
        "SELECT\n  WINDOW(t, '1 day').start AS t,\n  COUNT(*) AS n\nFROM cases\nGROUP BY\n  WINDOW(t, '1 day')\n"
        "\n"
        "-- cases.daily: transform, step 2 of 2 (output)\n"
        "-- engine flink: translated to Spark SQL\n"
        "SELECT\n  t AS event_time,\n  n\nFROM days\nWHERE\n  n > 1\n"
    )
    refused = _cli(root, "render", "readings")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip() == (
        "error: datasets/readings.yaml: dataset readings: engine datafusion: cannot translate function "
        "json_get_json to Spark SQL: it is not a function the translator knows in this engine (an extension, "
        "or a UDF)"
    )
    unknown = _cli(root, "render", "cases.dialy")
    assert unknown.returncode == 1
    assert "did you mean 'cases.daily'?" in unknown.stderr
