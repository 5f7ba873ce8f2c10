"""Plan and run judge a derivative's changed output with the same rule and the same words."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest

from odfproj.plan.engine_checks import query_checker
from odfproj.plan.evolution import schema_change
from odfproj.plan.queries import DerivativeCheck
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import update_derivative
from odfproj.transform.errors import TransformError
from tests.transform.helpers import (
    T0,
    add_records,
    create_derivative,
    create_root,
    schema_with,
    set_transform,
)

pytestmark = pytest.mark.spark

BY_CITY = "SELECT max(event_time) AS event_time, city, count(*) AS n FROM s GROUP BY city"


@pytest.mark.parametrize(
    ("query", "phrase"),
    [
        (
            "SELECT max(event_time) AS event_time, city, count(*) AS N FROM s GROUP BY city",
            "renames column 'n' to 'N' (a change of case is a rename",
        ),
        (
            "SELECT max(event_time) AS event_time, city, CAST(count(*) AS INT) AS n FROM s GROUP BY city",
            "changes the type of column 'n' from int64 to int32",
        ),
    ],
    ids=["case-only-rename", "retype"],
)
def test_plan_and_run_refuse_a_changed_output_column_with_the_same_reason(
    tmp_path, engine, query, phrase
) -> None:
    ws = Workspace(tmp_path / "ws")
    sales = create_root(ws, "sales", schema_with(("city", pa.string())))
    add_records(sales, tmp_path / "scratch", [(0, 1, "Oslo"), (0, 2, "Lima")], T0 + timedelta(minutes=1))
    create_derivative(ws, "by-city", {"s": sales}, (None, BY_CITY))
    assert update_derivative(ws, "by-city", engine, T0 + timedelta(minutes=2)).committed
    derivative = ws.open("by-city")
    stored = derivative.projection().arrow_schema

    # plan: the engine's output schema for the new query, judged by plan.evolution
    new_transform = set_transform({"s": sales}, (None, query))
    after = query_checker(engine)(
        DerivativeCheck("by-city", new_transform.transform, {"s": sales.projection().arrow_schema})
    ).schema
    verdict = schema_change(stored, after, "the new query")
    assert not verdict.allowed
    assert [r for r in verdict.reasons if phrase in r], verdict.reasons

    # run: the same query committed behind plan's back, refused by the transform itself
    derivative.append([new_transform], system_time=T0 + timedelta(minutes=3))
    head = derivative.head()
    with pytest.raises(TransformError) as refused:
        update_derivative(ws, "by-city", engine, T0 + timedelta(minutes=4))
    assert phrase in str(refused.value)
    assert verdict.reasons[0].removeprefix("the new query ") in str(refused.value)
    assert ws.open("by-city").head() == head
