"""The join keys of a ``join`` query: which input column equals which, read off Spark's analysed plan.

The join path (:mod:`odfproj.transform.incremental.joins`) runs one term per changed input ``X``; an input ``Y``
joined to ``X`` by an equality ``X.cx = Y.cy`` only contributes its rows whose ``cy`` occurs among the
``cx`` of ``X``'s changed rows, so the term may read only those (through the derivative's join index,
:mod:`odfproj.transform.incremental.join_sides`). This module finds such *edges*, a pure function over the plan's
JSON like :mod:`odfproj.transform.modes` (whose tree reader it shares).

Covered: ``EqualTo`` conditions (a join's ``ON`` or a ``WHERE`` above it, among the top-level ``AND``\\ s)
between two columns that trace back, through filters, subquery aliases and plain renames
(``k AS key``), to the columns of two different input views. ``<=>`` is not an edge (a null would
match the nulls an outer join pads with); nor is an equality over a computed value (``upper(k)``), a
column of a common table expression, or two columns whose values may be equal without being the same
kind of value: integers of any width are one kind (a type-stable hash casts them to ``bigint``), other
types must be the same (``string``, ``date``, ``timestamp``, ``decimal(10,2)``...); floating point,
collated strings, binary and nested types are never keys. An input without an edge to the changed
one is read whole, as before.

Why the restriction is exact: every output row combining a row ``r`` of ``dX`` with a (not
null-padded) row ``s`` of ``Y`` passed the equality, so ``s.cy = r.cx``; a row of ``Y`` outside the
keys appears in no output row of the term, and dropping it can only make another row null-padded
where that row then fails the same (null-rejecting) equality. An input on the optional side of an
outer join never runs a term of its own (:attr:`odfproj.transform.modes.QueryMode.fixed_inputs`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from odfproj.transform.plan_tree import PlanNode, plan_tree, view_name

__all__ = ["JoinEdge", "KeyColumn", "join_edges", "key_kind"]

_INTEGRAL = frozenset({"byte", "short", "integer", "long"})
_EXACT = frozenset({"string", "date", "timestamp", "timestamp_ntz", "boolean"})


@dataclass(frozen=True)
class KeyColumn:
    """An input's column as the query sees it (its view's column name), and its kind of key value."""

    alias: str
    column: str
    #: ``long`` for every integer width (hashed as ``bigint``), else the Spark type (``string``, ``date``).
    kind: str


@dataclass(frozen=True)
class JoinEdge:
    """``left.column = right.column`` holds in every output row combining rows of the two inputs."""

    left: KeyColumn
    right: KeyColumn

    def other(self, alias: str) -> tuple[KeyColumn, KeyColumn] | None:
        """(the key of ``alias``, the key of the other input) if ``alias`` is on this edge."""
        if self.left.alias == alias:
            return self.left, self.right
        if self.right.alias == alias:
            return self.right, self.left
        return None


def key_kind(data_type: str) -> str | None:
    """The kind of key value a column of this Spark type holds, ``None`` if it is never used as a key."""
    if data_type in _INTEGRAL:
        return "long"
    if data_type in _EXACT or (data_type.startswith("decimal(") and data_type.endswith(")")):
        return data_type
    return None


@dataclass(frozen=True)
class _Traced:
    alias: str
    column: str
    data_type: str


def _expression(value: object) -> PlanNode | None:
    nodes = [n for n in value if isinstance(n, dict)] if isinstance(value, list) else []
    return plan_tree(nodes) if nodes else None


def _expr_id(node: PlanNode) -> int | None:
    found = node.fields.get("exprId")
    return int(found["id"]) if isinstance(found, dict) and "id" in found else None


#: Nodes whose output is their child's, attribute for attribute (``Repartition``: small work's
#: ``coalesce(1)`` of every input, :func:`odfproj.engine.session.in_one_partition`).
_SAME_OUTPUT = frozenset({"Filter", "SubqueryAlias", "ResolvedHint", "View", "Repartition", "Sort"})


def _output_ids(node: PlanNode) -> list[int] | None:
    """The exprIds a relation outputs, in order, where the plan says them plainly; else ``None``."""
    if isinstance(node.fields.get("output"), list):
        ids = [_expr_id(e) for e in map(_expression, node.fields["output"]) if e is not None]
        return None if None in ids else ids  # type: ignore[return-value]
    if node.kind == "Project":
        ids = [_expr_id(e) for e in map(_expression, node.fields.get("projectList") or ()) if e is not None]
        return None if None in ids else ids  # type: ignore[return-value]
    if node.kind in _SAME_OUTPUT and len(node.children) == 1:
        return _output_ids(node.children[0])
    return None


class _Walk:
    def __init__(self, steps: Sequence[str | None]) -> None:
        self.steps = {alias.lower() for alias in steps if alias}
        self.traced: dict[int, _Traced] = {}
        self.equalities: list[PlanNode] = []

    def visit(self, node: PlanNode) -> None:
        if node.kind == "View":
            name = view_name(node)
            if name is not None and name.lower() not in self.steps:
                self.input(node, name.lower())
                return
        for child in node.children:
            self.visit(child)
        if node.kind == "Project":
            for expression in map(_expression, node.fields.get("projectList") or ()):
                if expression is None or expression.kind != "Alias" or not expression.children:
                    continue
                source = expression.children[0]
                traced = (
                    self.traced.get(_expr_id(source) or -1) if source.kind == "AttributeReference" else None
                )
                alias_id = _expr_id(expression)
                if traced is not None and alias_id is not None:
                    self.traced[alias_id] = traced
        if node.kind in ("Join", "Filter"):
            condition = _expression(node.fields.get("condition"))
            pending = [condition] if condition is not None else []
            while pending:
                current = pending.pop()
                if current.kind == "And":
                    pending.extend(current.children)
                elif current.kind == "EqualTo":
                    self.equalities.append(current)

    def input(self, view: PlanNode, alias: str) -> None:
        """Trace an input view's output attributes to its columns (names and types from its schema)."""
        fields = (view.fields.get("desc") or {}).get("schema", {}).get("fields")
        ids = _output_ids(view.children[0]) if view.children else None
        if not isinstance(fields, list) or ids is None or len(ids) != len(fields):
            return
        for expr_id, field in zip(ids, fields, strict=True):
            if isinstance(field, dict) and isinstance(field.get("type"), str):
                self.traced[expr_id] = _Traced(alias, str(field["name"]), field["type"])

    def side(self, node: PlanNode) -> KeyColumn | None:
        """A side of an equality as an input's key column: the column itself, or an integer widened."""
        if node.kind == "Cast" and len(node.children) == 1:
            inner = self.side(node.children[0])
            target = node.fields.get("dataType")
            if inner is None or inner.kind != "long" or target not in _INTEGRAL:
                return None
            return inner
        if node.kind != "AttributeReference":
            return None
        traced = self.traced.get(_expr_id(node) or -1)
        if traced is None:
            return None
        kind = key_kind(traced.data_type)
        return KeyColumn(traced.alias, traced.column, kind) if kind is not None else None

    def edges(self) -> Iterator[JoinEdge]:
        for equality in self.equalities:
            if len(equality.children) != 2:
                continue
            left, right = (self.side(c) for c in equality.children)
            if left is None or right is None or left.alias == right.alias or left.kind != right.kind:
                continue
            yield JoinEdge(left, right)


def join_edges(plan_json: str, steps: Sequence[str | None] = (None,)) -> tuple[JoinEdge, ...]:
    """The equalities between two inputs' columns in an analysed plan (module docstring), plan order.

    ``steps`` as for :func:`odfproj.transform.modes.classify_plan`. A plan it cannot read has none.
    """
    try:
        nodes: Any = json.loads(plan_json)
        if not isinstance(nodes, list) or not nodes:
            return ()
        walk = _Walk(steps)
        walk.visit(plan_tree(nodes))
        return tuple(dict.fromkeys(walk.edges()))
    except (ValueError, LookupError, TypeError, AttributeError):
        return ()
