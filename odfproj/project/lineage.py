"""``odfproj lineage``: the project's dataset graph as text, Graphviz DOT, Mermaid or JSON.

The lineage is a plain value (``Lineage``) built once from the ``DatasetGraph`` and rendered by one
function per format, so every format shows the same nodes and edges. Nodes are Root, Derivative, an
``external`` input (read by the project but defined only in the workspace) or ``invalid`` (a manifest
that names a dataset but has errors); edges go input -> derivative and carry the SQL alias when it is
not simply the input's name.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from odfproj.odf.model import DatasetKind
from odfproj.project.graph import DatasetGraph, GraphError

__all__ = ["Lineage", "LineageEdge", "LineageFormat", "LineageNode", "NodeKind", "build_lineage", "render"]


class NodeKind(enum.StrEnum):
    ROOT = "root"
    DERIVATIVE = "derivative"
    EXTERNAL = "external"
    INVALID = "invalid"


class LineageFormat(enum.StrEnum):
    text = "text"
    dot = "dot"
    mermaid = "mermaid"
    json = "json"


@dataclass(frozen=True)
class LineageNode:
    name: str
    kind: NodeKind
    manifest: str | None
    """The manifest's path relative to the project root; None for external datasets."""


@dataclass(frozen=True)
class LineageEdge:
    source: str
    target: str
    alias: str | None
    """The input's alias in the derivative's query, when it differs from the input's name."""


@dataclass(frozen=True)
class Lineage:
    project: str
    nodes: tuple[LineageNode, ...]
    """In topological order when the graph has no cycle (inputs first), else by name."""
    edges: tuple[LineageEdge, ...]
    problems: tuple[str, ...] = ()


def build_lineage(graph: DatasetGraph, project: str) -> Lineage:
    """The lineage of every dataset in ``graph``, external inputs included."""
    try:
        order = graph.topological_order(graph.graph.nodes)
    except GraphError:  # a cycle: still show the graph; its problem says where
        order = tuple(sorted(graph.graph.nodes, key=str.lower))
    nodes = []
    for name in order:
        manifest = graph.manifest_of(name)
        if manifest is None:
            kind = NodeKind.EXTERNAL
        elif manifest.snapshot is None:
            kind = NodeKind.INVALID
        elif manifest.snapshot.kind is DatasetKind.Root:
            kind = NodeKind.ROOT
        else:
            kind = NodeKind.DERIVATIVE
        nodes.append(LineageNode(name, kind, manifest.rel_path if manifest is not None else None))
    edges = []
    for target in order:
        for ref in graph.input_refs(target):
            alias = ref.alias if ref.alias.lower() != ref.dataset.lower() else None
            edges.append(LineageEdge(ref.dataset, target, alias))
    return Lineage(project, tuple(nodes), tuple(edges), tuple(str(p) for p in graph.problems))


# ------------------------------------------------------------------------------------------------
# Renderers


def render(lineage: Lineage, output_format: LineageFormat) -> str:
    renderers = {
        LineageFormat.text: render_text,
        LineageFormat.dot: render_dot,
        LineageFormat.mermaid: render_mermaid,
        LineageFormat.json: render_json,
    }
    return renderers[output_format](lineage)


@dataclass(frozen=True)
class _Look:
    """How one kind of node is drawn in each format; one row per kind keeps the formats' colours alike."""

    tag: str
    """In text, after the name."""
    dot: str
    """Graphviz node attributes."""
    mermaid_shape: tuple[str, str]
    """The brackets around a Mermaid node's label."""
    mermaid_class: str
    """The Mermaid ``classDef`` style named after the kind."""


_ROOT_FILL, _DERIVATIVE_FILL, _INVALID_FILL = "#d4e6f9", "#e3f4d7", "#f9d4d4"

_LOOKS = {
    NodeKind.ROOT: _Look(
        "[Root]",
        f'shape=cylinder, style=filled, fillcolor="{_ROOT_FILL}"',
        ("[(", ")]"),  # cylinder
        f"fill:{_ROOT_FILL},stroke:#3b73b9",
    ),
    NodeKind.DERIVATIVE: _Look(
        "[Derivative]",
        f'shape=box, style="rounded,filled", fillcolor="{_DERIVATIVE_FILL}"',
        ("(", ")"),  # rounded box
        f"fill:{_DERIVATIVE_FILL},stroke:#4e9a2a",
    ),
    NodeKind.EXTERNAL: _Look(
        "[external]",
        "shape=box, style=dashed",
        ("[/", "/]"),
        "stroke-dasharray:4 3",  # parallelogram
    ),
    NodeKind.INVALID: _Look(
        "[invalid manifest]",
        f'shape=box, style="filled", fillcolor="{_INVALID_FILL}"',
        ("{{", "}}"),  # hexagon
        f"fill:{_INVALID_FILL},stroke:#b93b3b",
    ),
}


def render_text(lineage: Lineage) -> str:
    """One block per dataset, inputs first: its kind, manifest, and the datasets it reads."""
    if not lineage.nodes:
        return f"{lineage.project}: no datasets\n"
    inputs: dict[str, list[LineageEdge]] = {}
    for edge in lineage.edges:
        inputs.setdefault(edge.target, []).append(edge)
    lines = []
    for node in lineage.nodes:
        where = f"  ({node.manifest})" if node.manifest else ""
        lines.append(f"{node.name} {_LOOKS[node.kind].tag}{where}")
        for edge in inputs.get(node.name, []):
            alias = f" as {edge.alias}" if edge.alias else ""
            lines.append(f"  <- {edge.source}{alias}")
    roots = sum(n.kind is NodeKind.ROOT for n in lineage.nodes)
    derivatives = sum(n.kind is NodeKind.DERIVATIVE for n in lineage.nodes)
    lines.append("")
    lines.append(
        f"{len(lineage.nodes)} dataset(s): {roots} root, {derivatives} derivative, {len(lineage.edges)} edge(s)"
    )
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_dot(lineage: Lineage) -> str:
    """Graphviz: roots are blue cylinders, derivatives green rounded boxes, external inputs dashed."""
    lines = [f"digraph {_dot_quote(lineage.project)} {{", "  rankdir=LR;", '  node [fontname="Helvetica"];']
    for node in lineage.nodes:
        lines.append(f"  {_dot_quote(node.name)} [{_LOOKS[node.kind].dot}];")
    for edge in lineage.edges:
        label = f" [label={_dot_quote(edge.alias)}]" if edge.alias else ""
        lines.append(f"  {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return '"' + text.replace('"', "#quot;") + '"'


def render_mermaid(lineage: Lineage) -> str:
    """A Mermaid flowchart (renders in GitHub markdown); node ids are stable, labels are the names."""
    ids = {node.name: f"n{index}" for index, node in enumerate(lineage.nodes)}
    lines = ["flowchart LR"]
    for node in lineage.nodes:
        opening, closing = _LOOKS[node.kind].mermaid_shape
        lines.append(f"  {ids[node.name]}{opening}{_mermaid_text(node.name)}{closing}")
        lines.append(f"  class {ids[node.name]} {node.kind.value}")
    for edge in lineage.edges:
        arrow = f"-- {_mermaid_text(edge.alias)} -->" if edge.alias else "-->"
        lines.append(f"  {ids[edge.source]} {arrow} {ids[edge.target]}")
    lines.extend(f"  classDef {kind.value} {look.mermaid_class}" for kind, look in _LOOKS.items())
    return "\n".join(lines) + "\n"


def render_json(lineage: Lineage) -> str:
    """Stable, machine-readable: ``{project, nodes: [{name, kind, manifest}], edges: [...], problems}``."""
    data = {
        "project": lineage.project,
        "nodes": [{"name": n.name, "kind": n.kind.value, "manifest": n.manifest} for n in lineage.nodes],
        "edges": [{"source": e.source, "target": e.target, "alias": e.alias} for e in lineage.edges],
        "problems": list(lineage.problems),
    }
    return json.dumps(data, indent=2) + "\n"
