"""Place the lineage graph for an SVG: one column per layer, inputs left of what reads them.

A dataset's column is one more than its deepest input's (found in networkx's topological order, so it
sits right of every input); within a column, datasets are ordered by the mean row of their inputs (one barycentre pass,
which removes most crossings in project-sized graphs) and then by name, so the picture is stable
from build to build. A cyclic graph (an error ``validate`` reports) is laid out as one column.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx

from odfproj.docsite.model import EdgePath, GraphLayout, NodePosition

__all__ = ["layout_graph"]

NODE_HEIGHT = 34.0
ROW_GAP = 16.0
COLUMN_GAP = 70.0
MARGIN = 16.0
#: Width of one character of the node labels (12px sans-serif, generous) and the label padding.
CHAR_WIDTH = 7.0
PADDING = 28.0
MIN_WIDTH = 120.0


def layout_graph(nodes: Sequence[tuple[str, str]], edges: Iterable[tuple[str, str]]) -> GraphLayout:
    """Positions for ``nodes`` (``(name, kind)``) and a curve for each ``(source, target)`` edge."""
    graph = nx.DiGraph()
    graph.add_nodes_from(name for name, _ in nodes)
    graph.add_edges_from(edges)
    kinds = dict(nodes)
    columns = _columns(graph)
    rows: dict[str, int] = {}
    for column in columns:

        def barycentre(name: str) -> float:
            inputs = [rows[p] for p in graph.predecessors(name) if p in rows]
            return sum(inputs) / len(inputs) if inputs else float("inf")

        for row, name in enumerate(sorted(column, key=lambda n: (barycentre(n), n.lower()))):
            rows[name] = row
    widths = [max((_width(n) for n in column), default=MIN_WIDTH) for column in columns]
    placed: dict[str, NodePosition] = {}
    x = MARGIN
    for column, width in zip(columns, widths, strict=True):
        for name in column:
            y = MARGIN + rows[name] * (NODE_HEIGHT + ROW_GAP)
            placed[name] = NodePosition(name, kinds.get(name, "external"), x, y, width, NODE_HEIGHT)
        x += width + COLUMN_GAP
    tallest = max((len(c) for c in columns), default=0)
    height = 2 * MARGIN + tallest * NODE_HEIGHT + max(tallest - 1, 0) * ROW_GAP
    paths = tuple(
        EdgePath(source, target, _curve(placed[source], placed[target])) for source, target in graph.edges
    )
    order = [name for name, _ in nodes]
    return GraphLayout(
        width=max(x - COLUMN_GAP + MARGIN, 2 * MARGIN),
        height=max(height, 2 * MARGIN),
        nodes=tuple(placed[name] for name in order),
        edges=paths,
    )


def _columns(graph: nx.DiGraph) -> list[list[str]]:
    try:
        depth: dict[str, int] = {}
        for name in nx.topological_sort(graph):
            depth[name] = max((depth[p] + 1 for p in graph.predecessors(name)), default=0)
    except nx.NetworkXUnfeasible:
        return [sorted(graph.nodes, key=str.lower)] if graph.number_of_nodes() else []
    columns: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name, level in depth.items():
        columns[level].append(name)
    return columns


def _width(name: str) -> float:
    return max(MIN_WIDTH, len(name) * CHAR_WIDTH + PADDING)


def _curve(source: NodePosition, target: NodePosition) -> str:
    """A horizontal S-curve from the source's right side to the target's left side."""
    x1, y1 = source.x + source.width, source.y + source.height / 2
    x2, y2 = target.x, target.y + target.height / 2
    bend = max((x2 - x1) / 2, 20.0)
    return f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
