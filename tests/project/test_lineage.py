"""``odfproj lineage``: one lineage value, four renderings that show the same nodes and edges."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from odfproj.odf.identity import DatasetId
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph
from odfproj.project.lineage import (
    Lineage,
    LineageEdge,
    LineageFormat,
    NodeKind,
    build_lineage,
    render,
    render_dot,
    render_json,
    render_mermaid,
    render_text,
)
from odfproj.project.manifests import load_manifests
from tests.project.conftest import ALL_DATASETS, derivative_manifest, root_manifest

MakeProject = Callable[[Mapping[str, str]], ProjectConfig]


def lineage_of(config: ProjectConfig, known_ids: Mapping[str, str] | None = None) -> Lineage:
    return build_lineage(DatasetGraph.build(load_manifests(config), known_ids), config.name)


def test_nodes_are_typed_and_in_topological_order(project: ProjectConfig) -> None:
    lineage = lineage_of(project)
    names = [n.name for n in lineage.nodes]
    assert sorted(names) == sorted(ALL_DATASETS)
    position = {name: i for i, name in enumerate(names)}
    assert all(position[e.source] < position[e.target] for e in lineage.edges)
    kinds = {n.name: n.kind for n in lineage.nodes}
    assert kinds["com.example.orders"] is NodeKind.ROOT
    assert kinds["com.example.revenue"] is NodeKind.DERIVATIVE
    assert {n.name: n.manifest for n in lineage.nodes}["com.example.orders"] == "datasets/sales/orders.yaml"
    assert lineage.problems == ()


def test_edges_go_input_to_output_with_aliases_only_when_they_differ(project: ProjectConfig) -> None:
    edges = set(lineage_of(project).edges)
    assert LineageEdge("com.example.orders", "com.example.orders-enriched", None) in edges
    assert LineageEdge("com.example.customers", "com.example.orders-enriched", "customers") in edges
    assert LineageEdge("com.example.revenue", "com.example.revenue-daily", None) in edges
    assert len(edges) == 5


def test_text(project: ProjectConfig) -> None:
    text = render_text(lineage_of(project))
    assert "com.example.orders [Root]  (datasets/sales/orders.yaml)" in text
    assert "com.example.orders-enriched [Derivative]" in text
    assert "  <- com.example.customers as customers\n" in text
    assert text.endswith("7 dataset(s): 4 root, 3 derivative, 5 edge(s)\n")


def test_dot_distinguishes_roots_from_derivatives(project: ProjectConfig) -> None:
    dot = render_dot(lineage_of(project))
    assert dot.startswith('digraph "shop" {')
    assert '"com.example.orders" [shape=cylinder' in dot
    assert '"com.example.revenue" [shape=box, style="rounded,filled"' in dot
    assert '"com.example.orders" -> "com.example.orders-enriched";' in dot
    assert '"com.example.customers" -> "com.example.orders-enriched" [label="customers"];' in dot
    assert dot.rstrip().endswith("}")


def test_mermaid_distinguishes_roots_from_derivatives(project: ProjectConfig) -> None:
    lineage = lineage_of(project)
    mermaid = render_mermaid(lineage)
    ids = {n.name: f"n{i}" for i, n in enumerate(lineage.nodes)}
    assert mermaid.startswith("flowchart LR\n")
    assert f'{ids["com.example.orders"]}[("com.example.orders")]' in mermaid
    assert f'{ids["com.example.revenue"]}("com.example.revenue")' in mermaid
    assert (
        f'{ids["com.example.customers"]} -- "customers" --> {ids["com.example.orders-enriched"]}' in mermaid
    )
    assert f"{ids['com.example.orders']} --> {ids['com.example.orders-enriched']}" in mermaid


def test_json_is_complete_and_stable(project: ProjectConfig) -> None:
    lineage = lineage_of(project)
    data = json.loads(render_json(lineage))
    assert data["project"] == "shop"
    assert [n["name"] for n in data["nodes"]] == [n.name for n in lineage.nodes]
    assert {
        "source": "com.example.customers",
        "target": "com.example.orders-enriched",
        "alias": "customers",
    } in data["edges"]
    assert render(lineage, LineageFormat.json) == render_json(lineage_of(project))


def test_external_inputs_and_invalid_manifests_are_shown_as_such(make_project: MakeProject) -> None:
    outside = DatasetId.from_public_key_bytes(bytes([7]) * 32).as_did_str()
    config = make_project(
        {
            "datasets/a.yaml": derivative_manifest("p.derived", [(outside, "ext")]),
            "datasets/b.yaml": root_manifest("p.broken").replace("kind: Csv", "kind: NoSuchReader"),
        }
    )
    lineage = lineage_of(config, {outside: "ws.elsewhere"})
    kinds = {n.name: n.kind for n in lineage.nodes}
    assert kinds == {
        "ws.elsewhere": NodeKind.EXTERNAL,
        "p.derived": NodeKind.DERIVATIVE,
        "p.broken": NodeKind.INVALID,
    }
    assert lineage.edges == (LineageEdge("ws.elsewhere", "p.derived", "ext"),)
    assert "style=dashed" in render_dot(lineage)


def test_unknown_inputs_and_cycles_become_problems_not_crashes(make_project: MakeProject) -> None:
    config = make_project(
        {
            "datasets/a.yaml": derivative_manifest("p.a", ["p.b"]),
            "datasets/b.yaml": derivative_manifest("p.b", ["p.a"]),
            "datasets/c.yaml": derivative_manifest("p.c", ["p.missing"]),
        }
    )
    lineage = lineage_of(config)
    assert [n.name for n in lineage.nodes] == ["p.a", "p.b", "p.c"]
    assert any("dependency cycle" in p for p in lineage.problems)
    assert any("p.missing" in p for p in lineage.problems)
    for output_format in LineageFormat:
        assert render(lineage, output_format)


def test_an_empty_project(make_project: MakeProject) -> None:
    lineage = lineage_of(make_project({}))
    assert render_text(lineage) == "custom: no datasets\n"
    assert json.loads(render_json(lineage))["nodes"] == []
