"""The split of a grouped query into its pre-aggregation and its final projection: pure Python, no JVM."""

from __future__ import annotations

import pytest

from odfproj.odf import model
from odfproj.transform.incremental.aggregation import Aggregate, NotSplittable, split_grouped
from odfproj.transform.modes import Mode, QueryMode, grouped_mode


def spark(query: str, *earlier: tuple[str, str]) -> model.TransformSql:
    steps = [model.SqlQueryStep(query=q, alias=a) for a, q in earlier]
    return model.TransformSql(engine="spark", queries=(*steps, model.SqlQueryStep(query=query)))


def test_keys_arguments_outputs_and_having_are_split() -> None:
    split = split_grouped(
        spark(
            "SELECT upper(k) AS key, count(*) AS n, sum(v) AS total, max(event_time) AS event_time, "
            "min(v * 2) + 1 AS lo FROM r WHERE v > 1 GROUP BY upper(k) HAVING n > 1 AND sum(v) < 10"
        )
    )
    assert split.pre_aggregation == (
        "SELECT UPPER(k) AS `__odfproj_k0`, v AS `__odfproj_a0`, event_time AS `__odfproj_a1`, "
        "v * 2 AS `__odfproj_a2`, v AS `__odfproj_a3` FROM r WHERE v > 1"
    )
    assert split.keys == ("__odfproj_k0",)
    assert split.aggregates == (
        Aggregate("rows", None),
        Aggregate("sum", "__odfproj_a0"),
        Aggregate("max", "__odfproj_a1"),
        Aggregate("min", "__odfproj_a2"),
        Aggregate("sum", "__odfproj_a3"),
    )
    assert split.outputs == (
        "`__odfproj_k0`",
        "`__odfproj_f0`",
        "`__odfproj_f1`",
        "`__odfproj_f2`",
        "`__odfproj_f3` + 1",
    )
    # HAVING's `n` is the select alias of count(*); its sum(v) is an aggregate of its own.
    assert split.having == "`__odfproj_f0` > 1 AND `__odfproj_f4` < 10"
    assert not split.is_global
    final = split.final_transform("g", ["key", "n", "total", "event_time", "lo"])
    assert final.query is not None and final.query.startswith("SELECT `__odfproj_k0` AS `key`, ")
    assert final.query.endswith("FROM `g` WHERE `__odfproj_f0` > 1 AND `__odfproj_f4` < 10")


def test_a_global_aggregate_and_a_positional_key() -> None:
    split = split_grouped(spark("SELECT count(*) AS n, max(event_time) AS event_time FROM r"))
    assert split.is_global
    assert split.pre_aggregation == "SELECT event_time AS `__odfproj_a0` FROM r"
    positional = split_grouped(spark("SELECT lower(k), count(1) AS n, max(event_time) FROM r GROUP BY 1"))
    assert positional.pre_aggregation.startswith("SELECT LOWER(k) AS `__odfproj_k0`")
    assert positional.outputs[0] == "`__odfproj_k0`"
    assert positional.aggregates[0] == Aggregate("count", "__odfproj_a0")  # count(1): a non-null argument


def test_earlier_steps_are_kept() -> None:
    transform = spark(
        "SELECT k, count(*) AS n, max(event_time) AS event_time FROM s GROUP BY k",
        ("s", "SELECT event_time, k FROM r WHERE k IS NOT NULL"),
    )
    pre = split_grouped(transform).pre_aggregation_transform()
    assert [(s.alias, s.query) for s in pre.queries or ()] == [
        ("s", "SELECT event_time, k FROM r WHERE k IS NOT NULL"),
        (None, "SELECT k AS `__odfproj_k0`, event_time AS `__odfproj_a0` FROM s"),
    ]


@pytest.mark.parametrize(
    ("query", "construct"),
    [
        ("SELECT k, avg(v) AS m, max(event_time) AS event_time FROM r GROUP BY k", "avg aggregate"),
        ("SELECT k, count(DISTINCT v) AS n FROM r GROUP BY k", "DISTINCT count aggregate"),
        ("SELECT k, collect_list(v) AS vs FROM r GROUP BY k", "array_agg aggregate"),
        ("SELECT k, first(v) AS f FROM r GROUP BY k", "first aggregate"),
        ("SELECT k, v, count(*) AS n FROM r GROUP BY k", "column v neither grouped nor aggregated"),
        (
            "SELECT upper(k) AS u, count(*) AS n FROM r GROUP BY u",
            "GROUP BY the select alias u (group by its expression instead)",
        ),
        ("SELECT * FROM r", "SELECT * in a grouped query"),
        ("SELECT event_time, k FROM r", "an aggregation not at the top of the last step"),
        ("SELECT DISTINCT k, count(*) AS n FROM r GROUP BY k", "DISTINCT around the aggregation"),
        ("SELECT k, count(*) AS n FROM r GROUP BY k ORDER BY n", "ORDER around the aggregation"),
        (
            "SELECT k, count(*) AS n FROM r GROUP BY k UNION ALL SELECT k, 1 FROM r",
            "an aggregation not at the top of the last step",
        ),
        ("SELECT k, max(count(*)) OVER () AS m FROM r GROUP BY k", "window function"),
        ("SELECT k, count(*) AS n FROM r GROUP BY 3", "GROUP BY position 3"),
    ],
)
def test_what_the_grouped_path_cannot_keep_is_named(query: str, construct: str) -> None:
    with pytest.raises(NotSplittable) as e:
        split_grouped(spark(query))
    assert e.value.construct == construct


def test_a_query_of_another_dialect_is_not_split() -> None:
    transform = model.TransformSql(engine="datafusion", query="SELECT k, count(*) AS n FROM r GROUP BY k")
    with pytest.raises(NotSplittable, match="written for datafusion"):
        split_grouped(transform)


def test_the_plan_shows_full_when_the_split_fails() -> None:
    grouped = QueryMode(Mode.GROUPED)
    assert grouped_mode(grouped, spark("SELECT k, count(*) AS n FROM r GROUP BY k")) == grouped
    assert (
        str(grouped_mode(grouped, spark("SELECT k, avg(v) AS m FROM r GROUP BY k"))) == "full: avg aggregate"
    )
    stateless = QueryMode(Mode.STATELESS)
    assert grouped_mode(stateless, spark("SELECT k, avg(v) AS m FROM r GROUP BY k")) == stateless
