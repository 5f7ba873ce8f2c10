"""A grouped query split into the part that runs over input rows and the part that runs over groups.

The ``grouped`` path (:mod:`odfproj.transform.incremental.grouped`) keeps, per group, *partial* aggregates that
can be merged exactly with the partials of new rows and of withdrawn ones. For that the query's last
step, ``SELECT <exprs> FROM <stateless pipeline> [WHERE] GROUP BY <keys> [HAVING <cond>]`` (or a
global aggregate, without ``GROUP BY``), is split into:

- a *pre-aggregation* query, ``SELECT <key i> AS k_i, <argument j> AS a_j FROM ... WHERE ...``: the
  same ``FROM`` and ``WHERE``, so it is stateless and runs over the inputs' new rows like any
  stateless query;
- the *final projection* over one row per group: every aggregate call replaced by a placeholder
  column ``f_j`` (its value, computed from the partials), every grouping expression by ``k_i``,
  and ``HAVING`` as a filter.

Only aggregates whose partials merge exactly are split: ``count(*)``, ``count(x)``, ``sum(x)``,
``min(x)``, ``max(x)`` (types are checked once the pre-aggregation is analysed). Anything else is
:class:`NotSplittable`, with the construct in the words the plan shows, and the query runs ``full``.
Pure Python over sqlglot's Spark dialect: tested without a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from odfproj.engine.columns import quoted_name
from odfproj.engine.dialects import is_spark, translated_queries
from odfproj.odf import model

__all__ = ["Aggregate", "GroupedQuery", "NotSplittable", "split_grouped"]

#: Prefix of every column the split introduces (no user column is expected to take it).
PREFIX = "__odfproj_"
ROWS = f"{PREFIX}rows"


def key_column(i: int) -> str:
    return f"{PREFIX}k{i}"


def argument_column(j: int) -> str:
    return f"{PREFIX}a{j}"


def value_column(j: int) -> str:
    return f"{PREFIX}f{j}"


class NotSplittable(Exception):
    """The query is not a grouped query the grouped path can keep; ``construct`` says why, for the plan."""

    def __init__(self, construct: str) -> None:
        super().__init__(construct)
        self.construct = construct


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call: ``kind`` is ``rows`` (``count(*)``), ``count``, ``sum``, ``min`` or ``max``."""

    kind: str
    #: The pre-aggregation column holding its argument (``None`` for ``rows``).
    argument: str | None


@dataclass(frozen=True)
class GroupedQuery:
    """The two halves of a grouped query (see the module docstring)."""

    #: The earlier steps, kept as written (Spark SQL): ``(alias, query)``.
    steps: tuple[tuple[str, str], ...]
    #: ``SELECT <keys> AS k_i, <arguments> AS a_j FROM ... WHERE ...`` (Spark SQL).
    pre_aggregation: str
    keys: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    #: The select list over ``k_i`` and ``f_j``, one Spark SQL expression per output column.
    outputs: tuple[str, ...]
    #: ``HAVING`` over ``k_i`` and ``f_j`` (Spark SQL), if any.
    having: str | None

    @property
    def is_global(self) -> bool:
        """No ``GROUP BY``: one group that always exists (its row is there even over no input rows)."""
        return not self.keys

    def pre_aggregation_transform(self) -> model.TransformSql:
        steps = [model.SqlQueryStep(query=q, alias=a) for a, q in self.steps]
        return model.TransformSql(
            engine="spark", queries=(*steps, model.SqlQueryStep(query=self.pre_aggregation))
        )

    def final_transform(self, view: str, names: list[str]) -> model.TransformSql:
        """The final projection over the view ``view`` of groups, its outputs named ``names``."""
        if len(names) != len(self.outputs):
            raise NotSplittable("an output the grouped path cannot name")
        select = ", ".join(
            f"{expression} AS {quoted_name(name)}"
            for expression, name in zip(self.outputs, names, strict=True)
        )
        where = f" WHERE {self.having}" if self.having is not None else ""
        return model.TransformSql(engine="spark", query=f"SELECT {select} FROM {quoted_name(view)}{where}")


_MERGEABLE = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}


def _aggregate_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower() if isinstance(node, exp.Func) else str(node.key).lower()


def _aggregate(node: exp.AggFunc) -> tuple[str, exp.Expression | None]:
    """The kind of a mergeable aggregate call and its argument (``None``: count rows)."""
    kind = next((k for t, k in _MERGEABLE.items() if type(node) is t), None)
    if kind is None:
        raise NotSplittable(f"{_aggregate_name(node)} aggregate")
    argument = node.this
    if isinstance(argument, exp.Distinct) or node.args.get("distinct"):
        raise NotSplittable(f"DISTINCT {kind} aggregate")
    if node.expressions or any(
        isinstance(v, exp.Expression) for k, v in node.args.items() if k not in ("this", "big_int")
    ):
        raise NotSplittable(f"{kind} with several arguments or options")
    if argument is None or isinstance(argument, exp.Star):
        if kind != "count":
            raise NotSplittable(f"{kind}(*)")
        return "rows", None
    if list(argument.find_all(exp.AggFunc)) or list(argument.find_all(exp.Window)):
        raise NotSplittable("nested aggregation")
    return kind, argument


def split_grouped(transform: model.TransformSql) -> GroupedQuery:
    """Split ``transform``'s last step (see the module docstring); :class:`NotSplittable` if it cannot."""
    if not is_spark(transform):
        raise NotSplittable(
            f"a grouped query written for {transform.engine.strip().lower()} (Spark SQL only)"
        )
    queries = translated_queries(transform)
    *earlier, last = queries
    try:
        statement = sqlglot.parse_one(last.spark, read="spark")
    except SqlglotError:
        raise NotSplittable("a grouped query odfproj cannot split") from None
    if not isinstance(statement, exp.Select):
        raise NotSplittable("an aggregation not at the top of the last step")
    for part in ("distinct", "order", "limit", "offset", "qualify", "with_", "with", "windows", "laterals"):
        if statement.args.get(part):
            raise NotSplittable(f"{part.rstrip('_').upper()} around the aggregation")
    group = statement.args.get("group")
    select = list(statement.expressions)
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star) for e in select):
        raise NotSplittable("SELECT * in a grouped query")
    if group is not None and any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")):
        raise NotSplittable("GROUPING SETS, ROLLUP or CUBE")
    if any(list(e.find_all(exp.Window)) for e in select):
        raise NotSplittable("window function")
    keys = _group_keys(group, select)
    having_node = statement.args.get("having")
    having = having_node.this if having_node is not None else None
    aggregates: list[Aggregate] = []
    arguments: list[exp.Expression] = []

    def substitute(node: exp.Expression) -> exp.Expression:
        for i, key in enumerate(keys):
            if node == key:
                return exp.column(key_column(i), quoted=True)
        if isinstance(node, exp.AggFunc):
            kind, argument = _aggregate(node)
            j = len(aggregates)
            if argument is not None:
                arguments.append(argument.copy())
            aggregates.append(Aggregate(kind, argument_column(len(arguments) - 1) if argument else None))
            return exp.column(value_column(j), quoted=True)
        return node

    outputs = [_unaliased(e).copy().transform(substitute) for e in select]
    if not aggregates and not keys:
        raise NotSplittable("an aggregation not at the top of the last step")
    having_out = None
    if having is not None:
        aliases = {
            e.alias.lower(): out for e, out in zip(select, outputs, strict=True) if isinstance(e, exp.Alias)
        }
        having_out = having.copy().transform(substitute)
        having_out = having_out.transform(
            lambda n: (
                aliases[n.name.lower()].copy()
                if isinstance(n, exp.Column) and not n.table and n.name.lower() in aliases
                else n
            )
        )
    for expression in [*outputs, *([having_out] if having_out is not None else [])]:
        for column in expression.find_all(exp.Column):
            if not column.name.startswith(PREFIX):
                raise NotSplittable(f"column {column.sql(dialect='spark')} neither grouped nor aggregated")
    pre = statement.copy()
    pre.set("group", None)
    pre.set("having", None)
    pre.set(
        "expressions",
        [
            *(exp.alias_(k.copy(), key_column(i), quoted=True) for i, k in enumerate(keys)),
            *(exp.alias_(a, argument_column(j), quoted=True) for j, a in enumerate(arguments)),
        ]
        or [exp.alias_(exp.Literal.number(1), f"{PREFIX}one", quoted=True)],
    )
    return GroupedQuery(
        steps=tuple((str(q.alias), q.spark) for q in earlier),
        pre_aggregation=pre.sql(dialect="spark"),
        keys=tuple(key_column(i) for i in range(len(keys))),
        aggregates=tuple(aggregates),
        outputs=tuple(o.sql(dialect="spark") for o in outputs),
        having=having_out.sql(dialect="spark") if having_out is not None else None,
    )


def _unaliased(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def _group_keys(group: exp.Group | None, select: list[exp.Expression]) -> list[exp.Expression]:
    """The grouping expressions, a position (``GROUP BY 1``) replaced by the select expression there."""
    if group is None:
        return []
    aliases = {
        e.alias.lower(): e.this
        for e in select
        if isinstance(e, exp.Alias) and not (isinstance(e.this, exp.Column) and e.this.name == e.alias)
    }
    keys = []
    for key in group.expressions:
        if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
            # Spark groups by the alias's expression unless the input has a column of that name,
            # which only analysis can tell: the split does not guess.
            raise NotSplittable(f"GROUP BY the select alias {key.name} (group by its expression instead)")
        if isinstance(key, exp.Literal) and not key.is_string:
            position = int(key.name)
            if not 1 <= position <= len(select):
                raise NotSplittable(f"GROUP BY position {position}")
            key = _unaliased(select[position - 1])
        if list(key.find_all(exp.AggFunc)):
            raise NotSplittable("an aggregate in GROUP BY")
        keys.append(key)
    return keys
