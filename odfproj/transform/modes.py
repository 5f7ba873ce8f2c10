"""Execution modes: how a derivative's query can be kept up to date, read off Spark's analysed plan.

A query's mode says which update rule keeps its result current (docs/design/transforms.md):

- ``stateless``: projections, filters, deterministic scalar functions, ``explode``-style generators and
  ``UNION ALL`` of such. The result is *linear* in its inputs' multisets, so only the inputs' new
  records need processing;
- ``grouped``: a ``GROUP BY`` aggregation (with its ``HAVING`` and a projection on top) over stateless
  pipelines, or over a ``join`` pipeline (:attr:`QueryMode.over_join`: its pre-aggregated rows'
  change comes from the join's delta rule, shown as ``grouped over a join``);
- ``join``: inner, left and right equi-joins of stateless pipelines, each input on one side of every
  join it is under (no self-join through one alias), so the query is linear in every input taken alone;
  :attr:`QueryMode.fixed_inputs` names the inputs on the optional side of an outer join, in which it
  is not linear;
- ``full``: everything else (windows, ``DISTINCT``, non-equi joins, ``ORDER BY``/``LIMIT``, nested
  aggregations, self-joins, subqueries, set operations other than ``UNION ALL``): recompute and diff.

The classifier is a pure function over the analysed logical plan as ``toJSON`` writes it (a flat
pre-order list of nodes, each with ``class`` and ``num-children``), so it is tested without a JVM on
captured plans. The plan passed in is the one the engine's query checks already analysed
(``engine.spark.analysed_plan_json``): nothing is read or executed to classify. Multi-step ``queries``
are one tree: an earlier step appears as a ``View`` named by its alias, which is followed (and its
nodes attributed to that step); any other ``View`` is an input, a leaf. Unknown nodes are ``full``,
named: a construct this module does not know is never assumed to be incremental.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from odfproj.engine.dialects import translated_queries
from odfproj.engine.spark import analysed_plan_json
from odfproj.odf import model
from odfproj.transform.incremental.aggregation import NotSplittable, split_grouped
from odfproj.transform.plan_tree import PlanNode, plan_tree, view_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["CheckedQuery", "Mode", "QueryMode", "Rewrite", "classify_plan", "query_mode", "sum_hint"]


class Mode(enum.Enum):
    STATELESS = "stateless"
    GROUPED = "grouped"
    JOIN = "join"
    FULL = "full"


@dataclass(frozen=True)
class Rewrite:
    """A small rewrite of a ``full`` query that makes it incremental, in the words ``run`` and ``plan`` show.

    Given only when the classifier found every construct that forced ``full`` to have such a rewrite
    and the rest of the query incremental: :attr:`mode` is what the rewritten query classifies as, and
    :attr:`edits` the rewrites named (``order``, ``avg``, ``count_distinct``, ``distinct``, ``union``,
    ``decimal_sum``), which :func:`grouped_mode` applies to the SQL to check that the grouped path's
    split takes the rewritten query too.
    """

    hint: str
    mode: Mode
    edits: frozenset[str] = frozenset()


@dataclass(frozen=True)
class QueryMode:
    """A query's execution mode and, for ``full``, the construct that forced it (``window function``)."""

    mode: Mode
    #: What forced ``full``, with its step when the transform has several (``window function in step 2``).
    construct: str | None = None
    #: For ``join`` (and ``grouped`` over a join): the inputs (aliases, lower case) on the optional side of
    #: an outer join. The result is not linear in them, so an update in which one of them has new records
    #: takes the full path.
    fixed_inputs: frozenset[str] = frozenset()
    #: For ``grouped``: the aggregation is over a ``join`` pipeline, so the change of its pre-aggregated
    #: rows comes from the join's delta rule (:func:`odfproj.transform.incremental.joins.join_delta`), not from the
    #: inputs' new records alone.
    over_join: bool = False
    #: The query reads a constant relation (``VALUES``, a ``SELECT`` of literals, ``range``): over no
    #: input rows it still has rows, which cancel out of a delta only if its query over the withdrawn
    #: rows runs too, even when nothing is withdrawn.
    constants: bool = False
    #: For ``full``: the rewrite that would make the query incremental, if a small one does.
    rewrite: Rewrite | None = None

    def __str__(self) -> str:
        if self.construct is None:
            return f"{self.mode.value} over a join" if self.over_join else self.mode.value
        return f"{self.mode.value}: {self.construct}"

    @property
    def is_stateless(self) -> bool:
        return self.mode is Mode.STATELESS

    @property
    def is_join(self) -> bool:
        return self.mode is Mode.JOIN

    @property
    def hint(self) -> str | None:
        """What would make a ``full`` query incremental (``drop the ORDER BY ...``), or ``None``."""
        return self.rewrite.hint if self.rewrite is not None else None


def _classes(value: object) -> Iterator[str]:
    """The expression classes in a node's fields (expressions are nested JSON lists of nodes)."""
    if isinstance(value, dict):
        name = value.get("class")
        if isinstance(name, str):
            yield name.rsplit(".", 1)[-1]
        for item in value.values():
            yield from _classes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _classes(item)


def _expression_classes(node: PlanNode) -> set[str]:
    return {
        c for key, v in node.fields.items() if key not in ("class", "child", "children") for c in _classes(v)
    }


_SUBQUERIES = frozenset(
    {"ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery", "OuterReference"}
)

#: Nodes that only rename, project, filter or flatten rows one at a time: linear over multisets.
_ROW_BY_ROW = frozenset({"Project", "Filter", "SubqueryAlias", "Generate", "ResolvedHint"})
#: Relations that read no input: constants, which cancel out of a signed delta (Q(new+) - Q(new-)).
_CONSTANTS = frozenset({"LocalRelation", "OneRowRelation", "Range"})
#: Why a node forces ``full``, in the words the plan shows.
_FULL = {
    "Window": "window function",
    "Distinct": "DISTINCT",
    "Deduplicate": "DISTINCT",
    "Sort": "ORDER BY",
    "GlobalLimit": "LIMIT",
    "LocalLimit": "LIMIT",
    "Offset": "OFFSET",
    "Tail": "LIMIT",
    "Intersect": "INTERSECT",
    "Except": "EXCEPT",
    "Expand": "GROUPING SETS, ROLLUP or CUBE",
    "Sample": "TABLESAMPLE",
    "RepartitionByExpression": "a repartition hint",
    "Repartition": "a repartition hint",
}
_EQUALITIES = frozenset({"EqualTo", "EqualNullSafe"})
#: Join types of the ``join`` mode, with the side (child index) whose rows may be padded with nulls:
#: the result is linear in the other side only.
_JOIN_TYPES: dict[str, int | None] = {"Inner$": None, "LeftOuter$": 1, "RightOuter$": 0}
_OTHER_JOINS = {
    "FullOuter$": "full outer join",
    "LeftSemi$": "semi join",
    "LeftAnti$": "anti join",
    "Cross$": "cross join",
}


class _Full(Exception):
    def __init__(self, construct: str) -> None:
        super().__init__(construct)
        self.construct = construct


class _Classifier:
    def __init__(self, steps: Sequence[str | None]) -> None:
        self.steps = list(steps)
        self.aliases = {alias.lower(): i for i, alias in enumerate(self.steps, start=1) if alias}
        self.ctes: dict[str, PlanNode] = {}
        #: The inputs met so far, once per reference (a join compares what each of its sides added).
        self.seen: list[str] = []
        #: Inputs on the optional side of an outer join (:attr:`QueryMode.fixed_inputs`).
        self.fixed: set[str] = set()
        #: Whether an aggregation is over a join (:attr:`QueryMode.over_join`).
        self.over_join = False
        #: Whether a constant relation was met (:attr:`QueryMode.constants`).
        self.constants = False
        #: Constructs that force ``full`` but have a small rewrite (:class:`Rewrite`), in the order met;
        #: the classification goes on below them as if rewritten, to tell whether the rest is incremental.
        self.fixes: list[_Fix] = []
        #: False once something would make the rewritten query ``full`` that only its types tell (a
        #: ``sum`` over a string, a ``min`` over a map): no hint then.
        self.hintable = True

    def where(self, step: int) -> str:
        return f" in step {step}" if len(self.steps) > 1 else ""

    def full(self, construct: str, step: int) -> _Full:
        return _Full(construct + self.where(step))

    def fix(self, construct: str, step: int, hint: str, edit: str) -> None:
        """``construct`` forces ``full``, and ``hint`` (the ``edit``) would remove it: go on as if it had."""
        self.fixes.append(_Fix(construct + self.where(step), hint, edit))

    def mode(self, node: PlanNode, step: int) -> Mode:
        kind = node.kind
        if kind == "Sort":  # ORDER BY without LIMIT (a limit is the node above): the order is lost anyway
            self.fix(_FULL[kind], step, _DROP_ORDER_BY, "order")
            if _expression_classes(node) & _SUBQUERIES:
                raise self.full("subquery", step)
            return self.mode(node.children[0], step)
        if kind == "Distinct":
            return self.distinct(node, step)
        if kind in _FULL:
            raise self.full(_FULL[kind], step)
        if _expression_classes(node) & _SUBQUERIES:
            raise self.full("subquery", step)
        if kind == "Filter" and node.children[0].kind == "Join" and _is_equi(node.fields.get("condition")):
            return self.join(node.children[0], step, equi=True)  # FROM a, b WHERE a.k = b.k
        if kind == "View":
            name = view_name(node)
            if name is not None and name.lower() in self.aliases and node.children:
                return self.mode(node.children[0], self.aliases[name.lower()])
            if name is not None:
                self.seen.append(name.lower())
            return Mode.STATELESS  # an input: a leaf
        if kind == "WithCTE":
            for definition in node.children[:-1]:
                self.ctes[str(definition.fields.get("id"))] = definition
            return self.mode(node.children[-1], step)
        if kind == "CTERelationDef":
            return self.mode(node.children[0], step)
        if kind == "CTERelationRef":
            definition = self.ctes.get(str(node.fields.get("cteId")))
            if definition is None:
                raise self.full("a common table expression it cannot follow", step)
            return self.mode(definition, step)
        if kind in _CONSTANTS:
            self.constants = True
            return Mode.STATELESS
        if kind in _ROW_BY_ROW:
            return self.mode(node.children[0], step)
        if kind == "Union":
            modes = {self.mode(child, step) for child in node.children}
            if modes != {Mode.STATELESS}:
                raise self.full("UNION ALL of aggregations or joins", step)
            return Mode.STATELESS
        if kind == "Aggregate":
            problems = _aggregate_problems(node)
            if problems:
                if any(p.hint is None for p in problems):
                    raise self.full(problems[0].construct, step)
                for problem in problems:
                    assert problem.hint is not None and problem.edit is not None
                    self.fix(problem.construct, step, problem.hint, problem.edit)
            self.hintable = self.hintable and _types_merge(node)
            below = self.mode(node.children[0], step)
            if below is Mode.GROUPED:
                raise self.full("nested aggregation", step)
            self.over_join = below is Mode.JOIN  # a join below a join or a union is refused above
            return Mode.GROUPED
        if kind == "Join":
            return self.join(node, step)
        raise self.full(f"{kind} (not known to be incremental)", step)

    def distinct(self, node: PlanNode, step: int) -> Mode:
        """``SELECT DISTINCT`` or ``UNION``: ``full``, but the same as a ``GROUP BY`` of every column,
        which is ``grouped`` over a stateless or joined pipeline."""
        if node.children[0].kind == "Union":
            self.fix(_FULL["Distinct"], step, _UNION_AS_GROUP_BY, "union")
        else:
            self.fix(_FULL["Distinct"], step, _DISTINCT_AS_GROUP_BY, "distinct")
        if _expression_classes(node) & _SUBQUERIES:
            raise self.full("subquery", step)
        mode = self.mode(node.children[0], step)
        if mode is Mode.GROUPED:
            raise self.full("nested aggregation", step)
        self.over_join = mode is Mode.JOIN
        return Mode.GROUPED

    def join(self, node: PlanNode, step: int, *, equi: bool = False) -> Mode:
        """An inner, left or right join of stateless (or joined) sides with an equality among its conditions.

        An input on both sides (a self-join, also through a step or a CTE read twice) makes the
        result quadratic in it: no delta rule of one input at a time holds, so it is ``full``.
        """
        join_type = _join_type(node)
        if join_type not in _JOIN_TYPES:
            raise self.full(_OTHER_JOINS.get(join_type, f"{join_type.removesuffix('$')} join"), step)
        if not (equi or _is_equi(node.fields.get("condition"))):
            raise self.full("join without an equality condition", step)
        sides: list[set[str]] = []
        for child in node.children:
            start = len(self.seen)
            if self.mode(child, step) not in (Mode.STATELESS, Mode.JOIN):
                raise self.full("join of aggregations", step)
            sides.append(set(self.seen[start:]))
        both = sorted(set.intersection(*sides)) if sides else []
        if both:
            raise self.full(f"self-join of {', '.join(both)}", step)
        optional = _JOIN_TYPES[join_type]
        if optional is not None:
            self.fixed |= sides[optional]
        return Mode.JOIN


@dataclass(frozen=True)
class _Fix:
    """A construct that forces ``full`` and the rewrite that removes it (see :class:`Rewrite`)."""

    construct: str
    hint: str
    edit: str


@dataclass(frozen=True)
class _Problem:
    """An aggregate whose partials do not merge exactly, and its rewrite if a small one merges."""

    construct: str
    hint: str | None = None
    edit: str | None = None


#: The hints, in the words ``run`` and ``plan`` show; each one is checked by a test that the rewritten
#: query is incremental (tests/transform/test_hints.py).
_DROP_ORDER_BY = "drop the ORDER BY to make it incremental (a dataset's records have no order)"
_DISTINCT_AS_GROUP_BY = "GROUP BY the selected columns instead of SELECT DISTINCT to make it incremental"
_UNION_AS_GROUP_BY = (
    "write UNION as UNION ALL under a GROUP BY of every column (the same rows) to make it incremental"
)
_COUNT_DISTINCT = (
    "count the distinct values of {x} in two derivatives to make it incremental: one grouped by the same "
    "keys and {x}, one that counts that one's rows per key (both grouped)"
)
#: ``p`` and ``s`` are the user's to choose: the precision and scale the values need.
_DECIMAL = "CAST({x} AS DECIMAL(p,s))"


def sum_hint(argument: str | None) -> str:
    """The hint for a ``sum`` over floating-point ``argument`` (its SQL, or ``None``: unnamed)."""
    return f"sum a DECIMAL to make it incremental: sum({_DECIMAL.format(x=argument or 'x')})"


def _avg_hint(argument: str | None, floating: bool) -> str:
    x = argument or "x"
    summed = _DECIMAL.format(x=x) if floating else x
    return f"write avg({x}) as sum({summed}) / count({x}) to make it incremental"


#: The aggregate functions whose per-group partials merge exactly (see ``transform/incremental/grouped.py``).
_MERGEABLE_AGGREGATES = frozenset({"Count", "Sum", "Min", "Max"})
_FLOATING = frozenset({"double", "float"})
#: Types whose sums the grouped path keeps exactly (``DECIMAL`` with a scale up to 30 too).
_EXACT = frozenset({"byte", "short", "integer", "long"})


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _aggregate_calls(node: PlanNode) -> Iterator[tuple[PlanNode, PlanNode]]:
    """Each ``AggregateExpression`` of an ``Aggregate`` node with its function, in the plan's order."""
    for expression in node.fields.get("aggregateExpressions") or ():
        nodes = [n for n in expression if isinstance(n, dict)] if isinstance(expression, list) else []
        if not nodes:
            continue
        pending = [plan_tree(nodes)]
        while pending:
            current = pending.pop()
            pending.extend(current.children)
            if current.kind == "AggregateExpression" and current.children:
                yield current, current.children[0]


def _aggregate_problems(node: PlanNode) -> list[_Problem]:
    """The aggregates of an ``Aggregate`` node whose partials cannot be merged exactly, named, first first.

    ``avg`` (and every other function but count, sum, min and max), a ``DISTINCT`` aggregate, or a
    ``sum`` whose argument is floating-point (its value depends on the order rows are added in). Each
    with its rewrite when a small one merges: ``avg`` as ``sum / count``, a ``sum`` over a ``DECIMAL``,
    ``count(DISTINCT x)`` in two grouped derivatives.
    """
    problems = []
    for call, function in _aggregate_calls(node):
        name = {"Average": "avg"}.get(function.kind, _snake(function.kind))
        argument = function.children[0] if len(function.children) == 1 else None
        named = _attribute_name(argument)
        distinct = bool(call.fields.get("isDistinct"))
        if function.kind not in _MERGEABLE_AGGREGATES:
            hint = None
            if function.kind == "Average" and argument is not None and not distinct:
                floating = _floating(argument)
                hint = _avg_hint(named, floating) if floating or _exact(argument) else None
            problems.append(_Problem(f"{name} aggregate", hint, "avg"))
        elif distinct:
            if function.kind == "Count" and argument is not None:
                hint = _COUNT_DISTINCT.format(x=named or "x")
                problems.append(_Problem(f"DISTINCT {name} aggregate", hint, "count_distinct"))
            else:
                problems.append(_Problem(f"DISTINCT {name} aggregate"))
        elif function.kind == "Sum" and argument is not None and _floating(argument):
            problems.append(_Problem("sum over a floating-point value", sum_hint(named), "decimal_sum"))
    return problems


def _types_merge(node: PlanNode) -> bool:
    """Whether the mergeable aggregates' arguments, where the plan states their types, are ones the
    grouped path keeps: a ``sum`` over numbers, a ``min``/``max`` over anything but a map."""
    for _, function in _aggregate_calls(node):
        argument = function.children[0] if len(function.children) == 1 else None
        data_type = argument.fields.get("dataType") if argument is not None else None
        if data_type is None:
            continue
        if function.kind == "Sum" and not (
            isinstance(data_type, str)
            and (data_type in _EXACT | _FLOATING or data_type.startswith("decimal"))
        ):
            return False
        if function.kind in ("Min", "Max") and not isinstance(data_type, str):
            return False  # a nested type: a map is refused by the grouped path
    return True


def _attribute_name(node: PlanNode | None) -> str | None:
    """A column's name, for a hint (``None``: an expression, shown as ``x``)."""
    if node is None or node.kind != "AttributeReference":
        return None
    name = node.fields.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return None
    return name


def _exact(node: PlanNode) -> bool:
    """Whether an expression is an integer or a decimal, as far as its plan says (``False``: not known)."""
    data_type = node.fields.get("dataType")
    if isinstance(data_type, str):
        return data_type in _EXACT or data_type.startswith("decimal")
    if node.kind in ("Add", "Subtract", "Multiply", "UnaryMinus", "Abs"):
        return bool(node.children) and all(_exact(c) for c in node.children)
    return False


def _floating(node: PlanNode) -> bool:
    """Whether an expression is floating-point, as far as its plan says (a typed node, or arithmetic
    over one); an expression whose type the plan does not state is checked when it runs."""
    data_type = node.fields.get("dataType")
    if isinstance(data_type, str):
        return data_type in _FLOATING
    if node.kind in ("Add", "Subtract", "Multiply", "Divide", "Remainder", "Pmod", "UnaryMinus", "Abs"):
        return node.kind == "Divide" or any(_floating(c) for c in node.children)
    return False


def _join_type(node: PlanNode) -> str:
    value = node.fields.get("joinType")
    name = value.get("object", "") if isinstance(value, dict) else str(value)
    return str(name).rsplit(".", 1)[-1]


def _is_equi(condition: object) -> bool:
    """Whether a join condition (a flat expression list) has an equality among its top-level ANDs."""
    if not isinstance(condition, list) or not condition:
        return False
    nodes = [n for n in condition if isinstance(n, dict)]
    if not nodes:
        return False
    tree = plan_tree(nodes)
    pending = [tree]
    while pending:
        current = pending.pop()
        if current.kind == "And":
            pending.extend(current.children)
        elif current.kind in _EQUALITIES and all(_references(c) for c in current.children):
            return True
    return False


def _references(node: PlanNode) -> bool:
    return node.kind == "AttributeReference" or any(_references(c) for c in node.children)


def classify_plan(plan_json: str, steps: Sequence[str | None] = (None,)) -> QueryMode:
    """The mode of a query from its analysed plan's JSON (``steps``: the aliases of its steps in order,
    ``None`` for the output step; a one-step query is ``(None,)``)."""
    unreadable = QueryMode(Mode.FULL, "a plan odfproj cannot read")
    try:
        nodes = json.loads(plan_json)
        if not isinstance(nodes, list) or not nodes:
            return unreadable
        classifier = _Classifier(steps or (None,))
        try:
            mode = classifier.mode(plan_tree(nodes), len(classifier.steps))
        except _Full as e:
            # The first construct met forces full, as without rewrites; a fix met before it is first.
            first = classifier.fixes[0].construct if classifier.fixes else e.construct
            return QueryMode(Mode.FULL, first)
        over_join = mode is Mode.GROUPED and classifier.over_join
        joined = mode is Mode.JOIN or over_join
        fixed_inputs = frozenset(classifier.fixed) if joined else frozenset()
        if classifier.fixes:  # full, but incremental once rewritten: say how
            rewrite = None
            if classifier.hintable:
                hints = dict.fromkeys(f.hint for f in classifier.fixes)  # in order, once each
                edits = frozenset(f.edit for f in classifier.fixes)
                rewrite = Rewrite("; ".join(hints), mode, edits)
            return QueryMode(Mode.FULL, classifier.fixes[0].construct, rewrite=rewrite)
        return QueryMode(mode, fixed_inputs=fixed_inputs, over_join=over_join, constants=classifier.constants)
    except (ValueError, LookupError, TypeError, AttributeError):  # not the shape toJSON writes
        return unreadable


@dataclass(frozen=True)
class CheckedQuery:
    """What the engine's check of a derivative's query yields: the data schema and the execution mode."""

    schema: pa.Schema
    mode: QueryMode


def query_mode(transform: model.TransformSql, result: DataFrame) -> QueryMode:
    """The mode of ``transform`` from ``result``, the DataFrame the engine's checks analysed for it.

    ``transform`` as written (its steps' aliases are the same in every dialect); nothing is executed.
    """
    plan = analysed_plan_json(result)
    if plan is None:
        return QueryMode(Mode.FULL, "a plan odfproj cannot read (not writable as JSON, or on Spark Connect)")
    mode = classify_plan(plan, [step.alias for step in translated_queries(transform)])
    return grouped_mode(mode, transform)


def grouped_mode(mode: QueryMode, transform: model.TransformSql) -> QueryMode:
    """``mode``, unless it is ``grouped`` and the grouped path cannot keep the query: then ``full``, named.

    So the mode the plan shows is the path ``run`` takes: an aggregate whose partials do not merge
    exactly (``avg``, ``DISTINCT``, ``collect_list``...) or a shape the split does not know
    (:mod:`odfproj.transform.incremental.aggregation`). Types (a ``sum`` over ``DOUBLE``) are checked where the
    split is analysed (:func:`odfproj.transform.incremental.grouped.check_grouped`).
    """
    rewrite = mode.rewrite
    if rewrite is not None and rewrite.mode is Mode.GROUPED:  # a hint holds only if the split takes it
        rewritten = _rewritten(transform, rewrite.edits)
        try:
            if rewritten is None:
                raise NotSplittable("a rewrite odfproj cannot check")
            split_grouped(rewritten)
        except NotSplittable:
            return replace(mode, rewrite=None)
        return mode
    if mode.mode is not Mode.GROUPED:
        return mode
    try:
        split_grouped(transform)
    except NotSplittable as e:
        return QueryMode(Mode.FULL, e.construct)
    return mode


def _rewritten(transform: model.TransformSql, edits: frozenset[str]) -> model.TransformSql | None:
    """``transform`` with its last step rewritten as a :class:`Rewrite`'s ``edits`` say, as far as the
    grouped path's split sees it (a ``sum``'s type is no concern of the split); ``None`` if that step
    is not the shape the edits rewrite."""
    queries = translated_queries(transform)
    *earlier, last = queries
    try:
        statement = sqlglot.parse_one(last.spark, read="spark")
    except SqlglotError:
        return None
    if "union" in edits:
        if not (isinstance(statement, exp.Union) and statement.args.get("distinct")):
            return None
        columns = [e.alias_or_name for e in statement.selects]
        if not columns or any(not c or c == "*" for c in columns):
            return None
        statement.set("distinct", False)
        names = [exp.column(c, quoted=True) for c in columns]
        statement = exp.select(*names).from_(statement.subquery("u")).group_by(*[n.copy() for n in names])
    if not isinstance(statement, exp.Select):
        return None
    if "order" in edits:
        statement.set("order", None)
    if "distinct" in edits:
        if not statement.args.get("distinct"):
            return None
        statement.set("distinct", None)
        keys = [e.this if isinstance(e, exp.Alias) else e for e in statement.expressions]
        statement.set("group", exp.Group(expressions=[k.copy() for k in keys]))
    if "avg" in edits:
        statement = statement.transform(
            lambda n: (
                exp.Div(this=exp.Sum(this=n.this.copy()), expression=exp.Count(this=n.this.copy()))
                if isinstance(n, exp.Avg)
                else n
            )
        )
    if "count_distinct" in edits:
        statement = statement.transform(
            lambda n: (
                exp.Count(this=n.this.expressions[0].copy(), big_int=True)
                if isinstance(n, exp.Count)
                and isinstance(n.this, exp.Distinct)
                and len(n.this.expressions) == 1
                else n
            )
        )
    steps = [model.SqlQueryStep(query=q.spark, alias=q.alias) for q in earlier]
    return model.TransformSql(
        engine="spark", queries=(*steps, model.SqlQueryStep(query=statement.sql(dialect="spark")))
    )
