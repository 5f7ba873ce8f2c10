"""Queries and the execution mode each must get, shared by the JVM-free and the Spark tests of modes.

Inputs ``a`` and ``b`` both have ``event_time TIMESTAMP, k STRING, v BIGINT``. A case is
``(name, steps, expected)`` where ``steps`` are ``(alias, sql)`` pairs (``None``: the output step).
``tools/capture_query_plans.py`` writes each case's analysed plan to ``fixtures/query_plans.json``.
"""

from __future__ import annotations

Case = tuple[str, tuple[tuple[str | None, str], ...], str]

CASES: tuple[Case, ...] = (
    (
        "filter",
        ((None, "SELECT event_time, k, v * 2 AS w FROM a WHERE v > 3 AND k IS NOT NULL"),),
        "stateless",
    ),
    (
        "union-all",
        (
            (
                None,
                "SELECT event_time, k, v FROM a WHERE v > 3 UNION ALL SELECT event_time, upper(k), v FROM b",
            ),
        ),
        "stateless",
    ),
    (
        "constant-union",
        ((None, "SELECT event_time, k, v FROM a UNION ALL SELECT TIMESTAMP'2024-01-01', 'x', 1"),),
        "stateless",
    ),
    ("explode", ((None, "SELECT event_time, k, explode(array(v, v + 1)) AS w FROM a"),), "stateless"),
    (
        "cte",
        (
            (
                None,
                "WITH x AS (SELECT event_time, k, v FROM a WHERE v > 1) SELECT * FROM x UNION ALL SELECT * FROM x",
            ),
        ),
        "stateless",
    ),
    (
        "steps-stateless",
        (
            ("s1", "SELECT event_time, k, v FROM a WHERE v > 1"),
            (None, "SELECT event_time, lower(k) AS k, v FROM s1"),
        ),
        "stateless",
    ),
    (
        "group-by",
        (
            (
                None,
                "SELECT max(event_time) AS event_time, k, count(*) AS n FROM a GROUP BY k HAVING count(*) > 1",
            ),
        ),
        "grouped",
    ),
    (
        "global-aggregate",
        ((None, "SELECT max(event_time) AS event_time, sum(v) AS total FROM a"),),
        "grouped",
    ),
    ("inner-join", ((None, "SELECT a.event_time, a.k, b.v FROM a JOIN b ON a.k = b.k"),), "join"),
    ("where-join", ((None, "SELECT a.event_time, a.k, b.v FROM a, b WHERE a.k = b.k"),), "join"),
    (
        "left-join",
        ((None, "SELECT a.event_time, a.k, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.v > 1"),),
        "join",
    ),
    (
        "grouped-join",
        (
            ("j", "SELECT a.event_time, a.k, b.v FROM a JOIN b ON a.k = b.k"),
            (None, "SELECT max(event_time) AS event_time, k, sum(v) AS total FROM j GROUP BY k"),
        ),
        "grouped over a join",
    ),
    (
        "grouped-left-join",
        (
            (
                None,
                "SELECT max(a.event_time) AS event_time, a.k, count(b.v) AS n, min(b.v) AS lo "
                "FROM a LEFT JOIN b ON a.k = b.k WHERE a.v > 0 GROUP BY a.k HAVING count(*) > 1",
            ),
        ),
        "grouped over a join",
    ),
    (
        "grouped-self-join",
        ((None, "SELECT max(x.event_time) AS event_time, count(*) AS n FROM a x JOIN a y ON x.k = y.k"),),
        "full: self-join of a",
    ),
    (
        "avg-over-a-join",
        (
            (
                None,
                "SELECT max(a.event_time) AS event_time, a.k, avg(b.v) AS m FROM a JOIN b ON a.k = b.k GROUP BY a.k",
            ),
        ),
        "full: avg aggregate",
    ),
    (
        "right-join",
        ((None, "SELECT b.event_time, a.k, b.v FROM a RIGHT JOIN b ON a.k = b.k"),),
        "join",
    ),
    (
        "join-of-a-union",
        (
            (
                None,
                "SELECT a.event_time, a.k, u.v FROM a JOIN "
                "(SELECT k, v FROM b UNION ALL SELECT k, v + 1 AS v FROM b) u ON a.k = u.k",
            ),
        ),
        "join",
    ),
    (
        "self-join",
        ((None, "SELECT x.event_time, x.k, y.v FROM a x JOIN a y ON x.k = y.k"),),
        "full: self-join of a",
    ),
    (
        "self-join-through-a-step",
        (
            ("s1", "SELECT event_time, k, v FROM a WHERE v > 1"),
            (None, "SELECT s1.event_time, s1.k, b.v FROM s1 JOIN b ON s1.k = b.k JOIN a ON a.k = b.k"),
        ),
        "full: self-join of a in step 2",
    ),
    (
        "window-step-2",
        (
            ("s1", "SELECT event_time, k, v FROM a WHERE v > 1"),
            (None, "SELECT event_time, k, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM s1"),
        ),
        "full: window function in step 2",
    ),
    ("distinct", ((None, "SELECT DISTINCT event_time, k FROM a"),), "full: DISTINCT"),
    (
        "union-distinct",
        ((None, "SELECT event_time, k FROM a UNION SELECT event_time, k FROM b"),),
        "full: DISTINCT",
    ),
    ("order-limit", ((None, "SELECT event_time, k FROM a ORDER BY k LIMIT 3"),), "full: LIMIT"),
    (
        "non-equi-join",
        ((None, "SELECT a.event_time, a.k FROM a JOIN b ON a.v < b.v"),),
        "full: join without an equality condition",
    ),
    (
        "full-outer-join",
        ((None, "SELECT a.event_time, a.k FROM a FULL JOIN b ON a.k = b.k"),),
        "full: full outer join",
    ),
    ("subquery", ((None, "SELECT event_time, k FROM a WHERE v IN (SELECT v FROM b)"),), "full: subquery"),
    (
        "nested-aggregation",
        (
            ("g", "SELECT max(event_time) AS event_time, k, count(*) AS n FROM a GROUP BY k"),
            (None, "SELECT max(event_time) AS event_time, n, count(*) AS groups FROM g GROUP BY n"),
        ),
        "full: nested aggregation in step 2",
    ),
    ("except", ((None, "SELECT event_time, k FROM a EXCEPT SELECT event_time, k FROM b"),), "full: EXCEPT"),
    (
        "avg",
        ((None, "SELECT max(event_time) AS event_time, k, avg(v) AS mean FROM a GROUP BY k"),),
        "full: avg aggregate",
    ),
    (
        "count-distinct",
        ((None, "SELECT max(event_time) AS event_time, k, count(DISTINCT v) AS n FROM a GROUP BY k"),),
        "full: DISTINCT count aggregate",
    ),
    (
        "sum-double",
        ((None, "SELECT max(event_time) AS event_time, k, sum(v * 0.5D) AS total FROM a GROUP BY k"),),
        "full: sum over a floating-point value",
    ),
    (
        "collect-list-step-2",
        (
            ("s1", "SELECT event_time, k, v FROM a WHERE v > 1"),
            (None, "SELECT max(event_time) AS event_time, k, collect_list(v) AS vs FROM s1 GROUP BY k"),
        ),
        "full: collect_list aggregate in step 2",
    ),
    (
        "grouped-step-2",
        (
            ("s1", "SELECT event_time, upper(k) AS k, v FROM a WHERE v > 1"),
            (
                None,
                "SELECT k, min(v) AS lo, sum(v) AS total, count(v) AS n, max(event_time) AS event_time "
                "FROM s1 GROUP BY k HAVING sum(v) > 10",
            ),
        ),
        "grouped",
    ),
)
