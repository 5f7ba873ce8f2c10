"""Spark's analysed logical plan, as ``toJSON`` writes it, read back as a tree.

``toJSON`` writes a plan as the pre-order list of its nodes, each saying how many children follow.
The mode classifier (:mod:`odfproj.transform.modes`) and the join keys' reader
(:mod:`odfproj.transform.incremental.join_keys`) both walk the tree this module builds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["PlanNode", "plan_tree", "view_name"]


@dataclass(frozen=True)
class PlanNode:
    """One node: its class's short name, its JSON fields (expressions stay JSON) and its children."""

    kind: str
    fields: dict[str, Any]
    children: tuple[PlanNode, ...]


def plan_tree(nodes: list[dict[str, Any]]) -> PlanNode:
    """The plan tree from ``toJSON``'s pre-order list (each node says how many children follow)."""
    position = 0

    def build() -> PlanNode:
        nonlocal position
        raw = nodes[position]
        position += 1
        children = tuple(build() for _ in range(int(raw.get("num-children", 0))))
        return PlanNode(str(raw["class"]).rsplit(".", 1)[-1], raw, children)

    root = build()
    if position != len(nodes):
        raise ValueError(f"plan JSON has {len(nodes) - position} node(s) after its root")
    return root


def view_name(node: PlanNode) -> str | None:
    """The name of the view a relation node reads (the ``table`` of its description), if it names one."""
    text = json.dumps(node.fields.get("desc"))
    found = re.search(r'"table"\s*:\s*"((?:[^"\\]|\\.)*)"', text)
    return json.loads(f'"{found.group(1)}"') if found else None
