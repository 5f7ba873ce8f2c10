"""Hints: the small rewrite that makes a ``full`` query incremental, and the proof that it does.

The JVM-free tests read the captured plans of ``mode_cases.py`` and small hand-made plans; the Spark
tests check every hint live: the query gets it through the plan's query check, and the query
rewritten as the hint says gets an incremental mode through the same check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from odfproj.odf import model
from odfproj.transform.modes import Mode, classify_plan, grouped_mode
from tests.transform.helpers import schema_with
from tests.transform.mode_cases import CASES

PLANS = json.loads((Path(__file__).parent / "fixtures" / "query_plans.json").read_text(encoding="utf-8"))

DECIMAL_SUM = "sum a DECIMAL to make it incremental: sum(CAST(x AS DECIMAL(p,s)))"
AVG = "write avg(v) as sum(v) / count(v) to make it incremental"
DISTINCT = "GROUP BY the selected columns instead of SELECT DISTINCT to make it incremental"
UNION = "write UNION as UNION ALL under a GROUP BY of every column (the same rows) to make it incremental"
ORDER_BY = "drop the ORDER BY to make it incremental (a dataset's records have no order)"


def _transform(steps) -> model.TransformSql:
    return model.TransformSql(
        engine="spark", queries=tuple(model.SqlQueryStep(query=q, alias=a) for a, q in steps)
    )


def _captured(name: str):
    steps = next(c[1] for c in CASES if c[0] == name)
    mode = classify_plan(json.dumps(PLANS[name]), [alias for alias, _ in steps])
    return grouped_mode(mode, _transform(steps))


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("sum-double", DECIMAL_SUM),
        ("avg", AVG),
        ("avg-over-a-join", AVG),
        ("distinct", DISTINCT),
        ("union-distinct", UNION),
        ("count-distinct", None),  # checked below: its text names the column
    ],
)
def test_a_full_query_with_a_small_rewrite_gets_its_hint(name, hint) -> None:
    mode = _captured(name)
    assert mode.mode is Mode.FULL and mode.hint is not None
    if hint is not None:
        assert mode.hint == hint
    assert mode.rewrite is not None and mode.rewrite.mode is Mode.GROUPED


def test_count_distinct_names_its_column() -> None:
    hint = _captured("count-distinct").hint
    assert hint is not None and hint.startswith("count the distinct values of v in two derivatives")


@pytest.mark.parametrize(
    "name",
    [
        "order-limit",  # dropping a LIMIT changes the result
        "window-step-2",
        "collect-list-step-2",
        "self-join",
        "full-outer-join",
        "non-equi-join",
        "nested-aggregation",
        "subquery",
        "except",
        "grouped-self-join",
    ],
)
def test_no_hint_where_no_small_rewrite_is_incremental(name) -> None:
    mode = _captured(name)
    assert mode.mode is Mode.FULL and mode.hint is None


# --- hand-made plans: the shapes a hint depends on ------------------------------------------------


def _node(kind: str, children: int = 0, **fields) -> dict:
    return {
        "class": f"org.apache.spark.sql.catalyst.plans.logical.{kind}",
        "num-children": children,
        **fields,
    }


def _input(name: str) -> list[dict]:
    return [
        _node("SubqueryAlias", 1),
        _node("View", 1, desc={"identifier": {"table": name}}),
        _node("LocalRelation"),
    ]


def test_order_by_without_limit_is_dropped_by_the_hint() -> None:
    mode = classify_plan(json.dumps([_node("Sort", 1), _node("Project", 1), *_input("a")]))
    assert (str(mode), mode.hint) == ("full: ORDER BY", ORDER_BY)
    assert mode.rewrite is not None and mode.rewrite.mode is Mode.STATELESS


def test_a_construct_met_below_a_rewritable_one_takes_its_hint_away() -> None:
    plan = [_node("Sort", 1), _node("Window", 1), *_input("a")]
    mode = classify_plan(json.dumps(plan))
    assert (str(mode), mode.hint) == ("full: ORDER BY", None)  # named as before: the first met


def test_a_hint_the_split_does_not_take_is_dropped() -> None:
    """A DISTINCT in an earlier step: grouped there, but the split wants the aggregation in the last step."""
    steps = (("d", "SELECT DISTINCT event_time, k FROM a"), (None, "SELECT event_time, upper(k) AS k FROM d"))
    plan = [
        _node("Project", 1),
        _node("SubqueryAlias", 1),
        _node("View", 1, desc={"identifier": {"table": "d"}}),
    ]
    plan += [_node("Distinct", 1), _node("Project", 1), *_input("a")]
    mode = classify_plan(json.dumps(plan), [a for a, _ in steps])
    assert mode.hint == DISTINCT  # the plan alone would take it
    checked = grouped_mode(mode, _transform(steps))
    assert (str(checked), checked.hint) == ("full: DISTINCT in step 1", None)


# --- live: each hint, and the rewritten query incremental ---------------------------------------------

INPUT = schema_with(("k", pa.string()), ("v", pa.int64()), ("amount", pa.float64()))

#: (query, the hint it gets, the query rewritten as the hint says, the rewritten query's mode).
LIVE = [
    (
        "SELECT max(event_time) AS event_time, k, sum(amount) AS total FROM a GROUP BY k",
        "sum a DECIMAL to make it incremental: sum(CAST(amount AS DECIMAL(p,s)))",
        "SELECT max(event_time) AS event_time, k, sum(CAST(amount AS DECIMAL(18,6))) AS total FROM a GROUP BY k",
        "grouped",
    ),
    (  # a floating-point sum only the analysed types show (sqrt's type is not in the plan)
        "SELECT max(event_time) AS event_time, k, sum(sqrt(v)) AS total FROM a GROUP BY k",
        "sum a DECIMAL to make it incremental: sum(CAST(x AS DECIMAL(p,s)))",
        "SELECT max(event_time) AS event_time, k, sum(CAST(sqrt(v) AS DECIMAL(18,6))) AS total FROM a GROUP BY k",
        "grouped",
    ),
    (
        "SELECT max(a.event_time) AS event_time, a.k, sum(b.amount) AS total FROM a JOIN b ON a.k = b.k GROUP BY a.k",
        "sum a DECIMAL to make it incremental: sum(CAST(amount AS DECIMAL(p,s)))",
        "SELECT max(a.event_time) AS event_time, a.k, sum(CAST(b.amount AS DECIMAL(18,6))) AS total "
        "FROM a JOIN b ON a.k = b.k GROUP BY a.k",
        "grouped over a join",
    ),
    (
        "SELECT max(event_time) AS event_time, k, avg(v) AS mean FROM a GROUP BY k",
        AVG,
        "SELECT max(event_time) AS event_time, k, sum(v) / count(v) AS mean FROM a GROUP BY k",
        "grouped",
    ),
    (
        "SELECT max(event_time) AS event_time, k, avg(amount) AS mean FROM a GROUP BY k",
        "write avg(amount) as sum(CAST(amount AS DECIMAL(p,s))) / count(amount) to make it incremental",
        "SELECT max(event_time) AS event_time, k, sum(CAST(amount AS DECIMAL(18,6))) / count(amount) AS mean "
        "FROM a GROUP BY k",
        "grouped",
    ),
    (
        "SELECT max(event_time) AS event_time, k, count(DISTINCT v) AS n FROM a GROUP BY k",
        "count the distinct values of v in two derivatives to make it incremental: one grouped by the same "
        "keys and v, one that counts that one's rows per key (both grouped)",
        # the first of the two; the second counts its rows per key, over it as its input
        "SELECT max(event_time) AS event_time, k, v FROM a GROUP BY k, v",
        "grouped",
    ),
    ("SELECT event_time, k, v FROM a ORDER BY k", ORDER_BY, "SELECT event_time, k, v FROM a", "stateless"),
    (
        "SELECT max(event_time) AS event_time, k, count(*) AS n FROM a GROUP BY k ORDER BY n DESC",
        ORDER_BY,
        "SELECT max(event_time) AS event_time, k, count(*) AS n FROM a GROUP BY k",
        "grouped",
    ),
    (
        "SELECT DISTINCT event_time, k FROM a",
        DISTINCT,
        "SELECT event_time, k FROM a GROUP BY event_time, k",
        "grouped",
    ),
    (
        "SELECT event_time, k FROM a UNION SELECT event_time, k FROM b",
        UNION,
        "SELECT event_time, k FROM (SELECT event_time, k FROM a UNION ALL SELECT event_time, k FROM b) u "
        "GROUP BY event_time, k",
        "grouped",
    ),
]


@pytest.mark.spark
@pytest.mark.parametrize(("query", "hint", "rewritten", "after"), LIVE, ids=range(len(LIVE)))
def test_the_hint_is_given_and_the_rewritten_query_is_incremental(
    engine, query, hint, rewritten, after
) -> None:
    from odfproj.transform.validate import check_derivative_query

    inputs = {"a": INPUT, "b": INPUT}
    checked = check_derivative_query(engine, _transform(((None, query),)), inputs, where="dataset d")
    assert checked.mode.mode is Mode.FULL and checked.mode.hint == hint
    fixed = check_derivative_query(engine, _transform(((None, rewritten),)), inputs, where="dataset d")
    assert str(fixed.mode) == after


@pytest.mark.spark
def test_count_distinct_second_derivative_is_grouped(engine) -> None:
    """The second derivative of the COUNT(DISTINCT) hint: it counts the first one's rows per key."""
    from odfproj.transform.validate import check_derivative_query

    first = schema_with(("k", pa.string()), ("v", pa.int64()))
    query = "SELECT max(event_time) AS event_time, k, count(*) AS n FROM f GROUP BY k"
    checked = check_derivative_query(engine, _transform(((None, query),)), {"f": first}, where="dataset d")
    assert str(checked.mode) == "grouped"
