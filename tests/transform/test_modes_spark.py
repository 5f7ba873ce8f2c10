"""Execution modes of real queries, analysed live by Spark through the plan's query check."""

from __future__ import annotations

import pyarrow as pa
import pytest

from odfproj.odf import model
from odfproj.transform.validate import check_derivative_query
from tests.transform.helpers import schema_with
from tests.transform.mode_cases import CASES

pytestmark = pytest.mark.spark

INPUT = schema_with(("k", pa.string()), ("v", pa.int64()))


@pytest.mark.parametrize(("name", "steps", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_query_check_classifies_the_query(engine, name, steps, expected) -> None:
    transform = model.TransformSql(
        engine="spark", queries=tuple(model.SqlQueryStep(query=q, alias=a) for a, q in steps)
    )
    checked = check_derivative_query(engine, transform, {"a": INPUT, "b": INPUT}, where=f"dataset {name}")
    assert str(checked.mode) == expected
    assert "event_time" in checked.schema.names


def test_a_translated_query_is_classified_as_spark_runs_it(engine) -> None:
    transform = model.TransformSql(
        engine="datafusion",
        query="SELECT event_time, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v) AS r FROM a",
    )
    checked = check_derivative_query(engine, transform, {"a": INPUT}, where="dataset ranked")
    assert str(checked.mode) == "full: window function"
