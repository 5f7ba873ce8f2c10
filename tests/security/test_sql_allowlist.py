"""Hostile pull requests, SQL: a query cannot run code, read files or connect out, at plan or at run.

Issue 13 showed ``schema_of_xml('<a>x</a>', map('rowValidationXSDPath', 'x.xsd'))`` reading an XSD while
plan merely *analysed* the query (Spark folds it to a constant), the XSD's external entities and
``xs:include`` then reading files and fetching URLs. The query checker now accepts only allowlisted
functions, plan nodes and options, on the parsed plan before analysis, at plan and at run alike.

Every vector goes through both paths: the plan's query checker (``plan.engine_checks.query_checker``)
and the run's ``SparkEngine.query`` followed by a collect. Each must be refused as one line naming the
culprit (plan shows it on the dataset's step, run on the dataset's result), and four witnesses must
stay untouched: a listener on 127.0.0.1 that the XSDs and entities point at, a marker file a command
would create, a JVM system property a reflective call would set, and a secret file whose content must
appear in no output or error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.spark import SparkEngine
from odfproj.odf import data_schema, model
from odfproj.plan.engine_checks import query_checker
from odfproj.plan.queries import DerivativeCheck
from tests.security.sec_engine_helpers import SilentListener

pytestmark = pytest.mark.spark

SECRET = "odfprojsecret4242"
PROPERTY = "odfproj.sec.engine.pwned"

INPUT = pa.schema(
    [
        *data_schema.system_fields(),
        pa.field("a", pa.int64()),
        pa.field("b", pa.string()),
        pa.field("arr", pa.list_(pa.int64())),
    ]
)
SET_PROPERTY = f"'java.lang.System', 'setProperty', '{PROPERTY}', 'yes'"

#: (query, what the refusal must name). ``{xsd}``, ``{secret}``, ``{marker}``, ``{listener}`` and
#: ``{xxe}`` are filled in per test.
VECTORS = {
    "xsd-path-at-analysis": (
        "SELECT event_time, schema_of_xml('<a>x</a>', map('rowValidationXSDPath', '{xsd}')) AS x FROM s",
        "rowValidationXSDPath",
    ),
    "xsd-path-in-from-xml": (
        "SELECT event_time, from_xml(b, 'a STRING', map('rowValidationXSDPath', '{xsd}')) AS x FROM s",
        "rowValidationXSDPath",
    ),
    "xsd-path-upper-case": (
        "SELECT event_time, schema_of_xml('<a>x</a>', map('ROWVALIDATIONXSDPATH', '{xsd}')) AS x FROM s",
        "ROWVALIDATIONXSDPATH",
    ),
    "xsd-path-computed-key": (
        "SELECT event_time, schema_of_xml('<a>x</a>', map(concat('rowValidation', 'XSDPath'), '{xsd}')) AS x "
        "FROM s",
        "literal map",
    ),
    "xsd-path-str-to-map": (
        "SELECT event_time, schema_of_xml('<a>x</a>', str_to_map('rowValidationXSDPath:{xsd}')) AS x FROM s",
        "literal map",
    ),
    "xsd-path-in-subquery": (
        "SELECT event_time, (SELECT schema_of_xml('<a>x</a>', map('rowValidationXSDPath', '{xsd}'))) AS x FROM s",
        "rowValidationXSDPath",
    ),
    "xsd-path-in-cte": (
        "WITH c AS (SELECT schema_of_xml('<a>x</a>', map('rowValidationXSDPath', '{xsd}')) AS x) "
        "SELECT s.event_time, c.x FROM s, c",
        "rowValidationXSDPath",
    ),
    "csv-path-option": (
        "SELECT event_time, from_csv(b, 'a INT', map('path', '{secret}')) AS x FROM s",
        "'path'",
    ),
    "json-url-option": (
        "SELECT event_time, from_json(b, 'a INT', map('url', '{listener}')) AS x FROM s",
        "'url'",
    ),
    "xpath-external-entity": ("SELECT event_time, xpath_string('{xxe}', '/a') AS x FROM s", "xpath_string"),
    "reflect": (f"SELECT event_time, reflect({SET_PROPERTY}) AS x FROM s", "reflect"),
    "java-method": (f"SELECT event_time, java_method({SET_PROPERTY}) AS x FROM s", "java_method"),
    "try-reflect": (f"SELECT event_time, try_reflect({SET_PROPERTY}) AS x FROM s", "try_reflect"),
    "qualified-reflect": (
        f"SELECT event_time, system.builtin.reflect({SET_PROPERTY}) AS x FROM s",
        "reflect",
    ),
    "identifier-reflect": (
        f"SELECT event_time, IDENTIFIER('reflect')({SET_PROPERTY}) AS x FROM s",
        "IDENTIFIER",
    ),
    "reflect-in-lambda": (
        f"SELECT event_time, transform(arr, v -> reflect({SET_PROPERTY})) AS x FROM s",
        "reflect",
    ),
    "reflect-in-window-order": (
        f"SELECT event_time, row_number() OVER (ORDER BY reflect({SET_PROPERTY})) AS x FROM s",
        "reflect",
    ),
    "reflect-in-having": (
        f"SELECT max(event_time) AS event_time FROM s GROUP BY b HAVING max(reflect({SET_PROPERTY})) > ''",
        "reflect",
    ),
    "reflect-in-lateral-view": (
        f"SELECT event_time, x FROM s LATERAL VIEW explode(array(reflect({SET_PROPERTY}))) t AS x",
        "reflect",
    ),
    "reflect-in-values": (
        f"SELECT s.event_time, v.x FROM s, (VALUES (reflect({SET_PROPERTY}))) AS v(x)",
        "reflect",
    ),
    "script-transform": (
        "SELECT TRANSFORM(event_time, b) USING 'touch {marker}' AS (event_time, b) FROM s",
        "TRANSFORM",
    ),
    "file-as-table": ("SELECT * FROM text.`{secret}`", "relation text."),
    # Spark 4.0 keeps IDENTIFIER(...) in the parsed plan; 4.3 resolves a literal one while parsing.
    "file-as-table-by-identifier": (
        "SELECT * FROM IDENTIFIER('text.`{secret}`')",
        ("IDENTIFIER", "relation text."),
    ),
    "other-catalog": ("SELECT * FROM global_temp.anything", "relation global_temp.anything"),
    "input-file-name": ("SELECT event_time, input_file_name() AS x FROM s", "input_file_name"),
    "tablesample": ("SELECT * FROM s TABLESAMPLE (50 PERCENT)", "TABLESAMPLE"),
}


@pytest.fixture
def sec_engine_witnesses(tmp_path):
    """The listener, a secret file, an XSD that reaches both, and the paths a command would create."""
    listener = SilentListener()
    secret = tmp_path / "secret.txt"
    secret.write_text(f"<{SECRET}/>")
    xsd = tmp_path / "evil.xsd"
    xsd.write_text(
        '<?xml version="1.0"?>\n'
        f'<!DOCTYPE xs:schema [<!ENTITY ext SYSTEM "{listener.url}/entity.txt">]>\n'
        '<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">\n'
        "  <xs:annotation><xs:documentation>&ext;</xs:documentation></xs:annotation>\n"
        f'  <xs:include schemaLocation="{listener.url}/include.xsd"/>\n'
        '  <xs:element name="a" type="xs:string"/>\n'
        "</xs:schema>\n"
    )
    xxe = f'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file://{secret}">]><a>&x;</a>'
    values = {
        "xsd": str(xsd),
        "secret": str(secret),
        "listener": listener.url,
        "marker": str(tmp_path / "MARKER"),
        "xxe": xxe.replace("'", "\\'"),
    }
    yield values, listener
    listener.close()


def _sql(query: str) -> model.TransformSql:
    return model.TransformSql(engine="spark", query=query)


def _input_frame(spark):
    return spark.createDataFrame(
        [(0, 0, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), 1, "<a>x</a>", [1, 2])],
        "offset BIGINT, op INT, system_time TIMESTAMP, event_time TIMESTAMP, a BIGINT, b STRING, "
        "arr ARRAY<BIGINT>",
    ).drop("offset", "op", "system_time")


def _assert_nothing_happened(spark, values, listener, *outputs: str) -> None:
    assert listener.received == [], "something connected to the listener"
    assert not Path(values["marker"]).exists(), "a command ran"
    assert spark._jvm.java.lang.System.getProperty(PROPERTY) is None, "a reflective call ran"
    assert not any(SECRET in text for text in outputs), "the secret file was read into the output"


@pytest.mark.parametrize("vector", sorted(VECTORS))
def test_hostile_query_is_refused_at_plan_and_at_run(
    engine: SparkEngine, spark, sec_engine_witnesses, vector
):
    values, listener = sec_engine_witnesses
    template, culprit = VECTORS[vector]
    transform = _sql(template.format(**values))
    planned = _refusal(lambda: query_checker(engine)(DerivativeCheck("hostile", transform, {"s": INPUT})))
    ran = _refusal(lambda: engine.query({"s": _input_frame(spark)}, transform).collect())
    # The witnesses first: they say what a query that got through did.
    _assert_nothing_happened(spark, values, listener, planned or "", ran or "")
    assert planned is not None and ran is not None, "the query was accepted"
    culprits = culprit if isinstance(culprit, tuple) else (culprit,)
    for message in (planned, ran):  # plan shows it on the dataset's refused step, run on its result
        assert any(c in message for c in culprits) and "\n" not in message, message


def _refusal(action) -> str | None:
    """The InvalidQueryError message ``action`` raises, or None when it got through."""
    try:
        action()
    except InvalidQueryError as e:
        return str(e)
    return None


def test_xml_data_with_external_entities_reads_nothing(engine: SparkEngine, spark, sec_engine_witnesses):
    """schema_of_xml/from_xml are allowed; an entity in the XML *data* must still not be resolved."""
    values, listener = sec_engine_witnesses
    query = (
        f"SELECT event_time, schema_of_xml('{values['xxe']}') AS inferred, "
        f"to_json(from_xml('{values['xxe']}', 'a STRING')) AS parsed FROM s"
    )
    outputs = []
    try:
        schema = query_checker(engine)(DerivativeCheck("xml", _sql(query), {"s": INPUT})).schema
        outputs.append(str(schema))
        rows = engine.query({"s": _input_frame(spark)}, _sql(query)).collect()
        outputs.append(repr(rows))
    except InvalidQueryError as e:  # refusing the entity is as good as ignoring it
        outputs.append(str(e))
    _assert_nothing_happened(spark, values, listener, *outputs)


def test_allowed_sql_still_works_at_plan_and_at_run(engine: SparkEngine, spark) -> None:
    """The allowlist must not refuse ordinary analytics: joins, windows, CTEs, lambdas, JSON options."""
    query = """
        WITH w AS (
          SELECT event_time, a, b, arr,
                 row_number() OVER (PARTITION BY b ORDER BY event_time) AS rn,
                 sum(a) OVER (ORDER BY event_time ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS running
          FROM s WHERE a BETWEEN 0 AND 10 AND b LIKE '<%' AND b IS NOT NULL
        )
        SELECT w.event_time, w.a, upper(w.b) AS ub, CAST(w.a AS STRING) AS sa,
               CASE WHEN w.a > 1 THEN 'big' ELSE 'small' END AS size,
               transform(w.arr, x -> x * 2) AS doubled, sha2(w.b, 256) AS h,
               from_json('{"k": 1}', 'k INT', map('mode', 'PERMISSIVE')).k AS k,
               date_trunc('DAY', w.event_time) AS day, coalesce(w.running, 0) AS running,
               (SELECT count(*) FROM s) AS total
        FROM w JOIN s ON w.a = s.a
        WHERE w.rn = 1 AND w.a IN (SELECT a FROM s)
    """
    schema = query_checker(engine)(DerivativeCheck("fine", _sql(query), {"s": INPUT})).schema
    assert "doubled" in schema.names and "k" in schema.names
    rows = engine.query({"s": _input_frame(spark)}, _sql(query)).collect()
    assert [(r.a, r.ub, r.size, r.doubled, r.k, r.total) for r in rows] == [
        (1, "<A>X</A>", "small", [2, 4], 1, 1)
    ]


def test_variant_output_refuses_that_query_only(engine: SparkEngine) -> None:
    """A column of a type ODF cannot store is the query's fault: InvalidQueryError, not an engine abort."""
    query = "SELECT event_time, parse_json(b) AS v, a FROM s"
    with pytest.raises(InvalidQueryError) as info:
        query_checker(engine)(DerivativeCheck("with-variant", _sql(query), {"s": INPUT}))
    message = str(info.value)
    assert message.startswith("dataset with-variant: ") and "'v'" in message and "variant" in message
    assert "\n" not in message
