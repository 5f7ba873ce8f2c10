"""Execution modes from captured analysed plans: no JVM (``tools/capture_query_plans.py`` made them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odfproj.transform.modes import Mode, QueryMode, classify_plan
from tests.transform.mode_cases import CASES

PLANS = json.loads((Path(__file__).parent / "fixtures" / "query_plans.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "steps", "expected"), CASES, ids=[c[0] for c in CASES])
def test_captured_plans_are_classified(name, steps, expected) -> None:
    mode = classify_plan(json.dumps(PLANS[name]), [alias for alias, _ in steps])
    assert str(mode) == expected


def test_every_case_has_a_captured_plan() -> None:
    assert sorted(PLANS) == sorted(c[0] for c in CASES), "run tools/capture_query_plans.py"


def _node(kind: str, children: int = 0, **fields) -> dict:
    return {
        "class": f"org.apache.spark.sql.catalyst.plans.logical.{kind}",
        "num-children": children,
        **fields,
    }


def _input(name: str) -> list[dict]:
    desc = {"identifier": {"table": name}}
    return [_node("SubqueryAlias", 1), _node("View", 1, desc=desc), _node("LocalRelation")]


def test_an_unknown_node_is_full_and_named() -> None:
    plan = [_node("Project", 1), _node("SomethingNew", 1), *_input("a")]
    assert classify_plan(json.dumps(plan)) == QueryMode(
        Mode.FULL, "SomethingNew (not known to be incremental)"
    )


def test_an_input_view_is_a_leaf_whatever_its_own_plan() -> None:
    # An input's view holds how odfproj builds its state (an aggregation): not part of the query.
    plan = [
        _node("Project", 1),
        _node("SubqueryAlias", 1),
        _node("View", 1, desc={"identifier": {"table": "a"}}),
    ]
    plan += [_node("Aggregate", 1), _node("LocalRelation")]
    assert classify_plan(json.dumps(plan)) == QueryMode(Mode.STATELESS)


def test_a_truncated_or_empty_plan_is_full() -> None:
    unreadable = QueryMode(Mode.FULL, "a plan odfproj cannot read")
    assert classify_plan("[]") == unreadable
    assert classify_plan(json.dumps([_node("Project", 1)])) == unreadable  # its child is missing
    assert classify_plan("not json") == unreadable


@pytest.mark.parametrize(
    ("name", "fixed"),
    [("inner-join", set()), ("left-join", {"b"}), ("right-join", {"a"}), ("join-of-a-union", set())],
)
def test_a_join_names_the_inputs_it_is_not_linear_in(name, fixed) -> None:
    """The optional side of an outer join: an update in which it changed takes the full path."""
    steps = next(c[1] for c in CASES if c[0] == name)
    mode = classify_plan(json.dumps(PLANS[name]), [alias for alias, _ in steps])
    assert mode.is_join
    assert mode.fixed_inputs == frozenset(fixed)


def test_an_aggregation_over_a_join_is_grouped_and_names_its_fixed_inputs() -> None:
    """Grouped over a left join: its rows' change comes from the join's rule, not linear in ``b``."""
    steps = next(c[1] for c in CASES if c[0] == "grouped-left-join")
    mode = classify_plan(json.dumps(PLANS["grouped-left-join"]), [alias for alias, _ in steps])
    assert mode == QueryMode(Mode.GROUPED, fixed_inputs=frozenset({"b"}), over_join=True)
    plain = classify_plan(json.dumps(PLANS["group-by"]), [None])
    assert plain == QueryMode(Mode.GROUPED) and str(plain) == "grouped"
