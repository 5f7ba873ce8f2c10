"""Join keys read off captured analysed plans, without a JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odfproj.transform.incremental.join_keys import JoinEdge, KeyColumn, join_edges, key_kind

PLANS = json.loads((Path(__file__).parent / "fixtures" / "query_plans.json").read_text())
A_K = KeyColumn("a", "k", "string")
B_K = KeyColumn("b", "k", "string")


def edges(case: str) -> tuple[JoinEdge, ...]:
    plan = PLANS[case]
    return join_edges(plan if isinstance(plan, str) else json.dumps(plan))


@pytest.mark.parametrize("case", ["inner-join", "left-join", "right-join", "where-join"])
def test_an_equality_of_two_inputs_columns_is_an_edge(case: str) -> None:
    assert edges(case) == (JoinEdge(A_K, B_K),)


@pytest.mark.parametrize("case", ["non-equi-join", "filter", "group-by", "union-all"])
def test_no_equality_between_inputs_no_edge(case: str) -> None:
    assert edges(case) == ()


def test_an_edge_names_the_other_side() -> None:
    edge = JoinEdge(A_K, B_K)
    assert edge.other("b") == (B_K, A_K)
    assert edge.other("c") is None


def test_integers_of_every_width_are_one_kind_of_key_floats_none() -> None:
    assert {key_kind(t) for t in ("byte", "short", "integer", "long")} == {"long"}
    assert key_kind("decimal(10,2)") == "decimal(10,2)"
    assert key_kind("double") is None
    assert key_kind("string collate UTF8_LCASE") is None


def test_an_unreadable_plan_has_no_edges() -> None:
    assert join_edges("not json") == ()
    assert join_edges("[]") == ()
