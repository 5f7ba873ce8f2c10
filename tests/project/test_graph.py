"""The dataset graph: edges from inputs, ids resolved through the workspace, cycles and unknown inputs."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odfproj.odf.identity import DatasetId
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph, Digraph, GraphError
from odfproj.project.manifests import load_manifests
from tests.project.conftest import ALL_DATASETS, derivative_manifest, root_manifest

MakeProject = Callable[[Mapping[str, str]], ProjectConfig]


def did(seed: int) -> str:
    return DatasetId.from_public_key_bytes(bytes([seed]) * 32).as_did_str()


def graph_of(config: ProjectConfig, known_ids: Mapping[str, str] | None = None) -> DatasetGraph:
    return DatasetGraph.build(load_manifests(config), known_ids)


def line_of(config: ProjectConfig, rel: str, needle: str) -> int:
    return (config.root / rel).read_text().splitlines().index(needle) + 1


def test_project_graph(project: ProjectConfig) -> None:
    graph = graph_of(project)
    assert graph.ok
    with pytest.raises(TypeError, match="read-only"):
        graph.graph.add_edge("com.example.revenue", "com.example.orders")
    assert set(graph.graph.edges) == {
        ("com.example.orders", "com.example.orders-enriched"),
        ("com.example.customers", "com.example.orders-enriched"),
        ("com.example.orders-enriched", "com.example.revenue"),
        ("com.example.fx-rates", "com.example.revenue"),
        ("com.example.revenue", "com.example.revenue-daily"),
    }
    assert graph.datasets == ALL_DATASETS
    assert graph.topological_order() == (
        "com.example.customers",
        "com.example.fx-rates",
        "com.example.orders",
        "com.example.orders-enriched",
        "com.example.revenue",
        "com.example.revenue-daily",
        "org.other.weather",
    )


def test_upstream_downstream_and_inputs(project: ProjectConfig) -> None:
    graph = graph_of(project)
    assert graph.upstream("com.example.revenue") == {
        "com.example.orders-enriched",
        "com.example.orders",
        "com.example.customers",
        "com.example.fx-rates",
    }
    assert graph.downstream("COM.EXAMPLE.ORDERS") == {
        "com.example.orders-enriched",
        "com.example.revenue",
        "com.example.revenue-daily",
    }
    assert graph.upstream("org.other.weather") == graph.downstream("org.other.weather") == frozenset()
    assert graph.inputs_of("com.example.orders-enriched") == [
        ("com.example.orders", "com.example.orders"),
        ("customers", "com.example.customers"),
    ]
    assert graph.inputs_of("com.example.orders") == []
    with pytest.raises(GraphError, match="unknown dataset 'nope'"):
        graph.upstream("nope")


def test_topological_order_of_a_subset_is_stable(project: ProjectConfig) -> None:
    graph = graph_of(project)
    subset = ["com.example.revenue-daily", "org.other.weather", "com.example.orders"]
    assert graph.topological_order(subset) == (
        "com.example.orders",
        "com.example.revenue-daily",
        "org.other.weather",
    )
    assert graph.topological_order(reversed(subset)) == graph.topological_order(subset)


def test_inputs_are_matched_case_insensitively(make_project: MakeProject) -> None:
    config = make_project(
        {"datasets/a.yaml": root_manifest("Com.A"), "datasets/b.yaml": derivative_manifest("b", ["com.a"])}
    )
    graph = graph_of(config)
    assert graph.ok
    assert list(graph.graph.edges) == [("Com.A", "b")]
    assert graph.inputs_of("B") == [("com.a", "Com.A")]


def test_unknown_input_points_at_its_dataset_ref(make_project: MakeProject) -> None:
    config = make_project(
        {
            "datasets/a.yaml": root_manifest("a"),
            "datasets/b.yaml": derivative_manifest("b", ["a", "missing.one"]),
        }
    )
    graph = graph_of(config)
    line = line_of(config, "datasets/b.yaml", "        - datasetRef: missing.one")
    assert [str(p) for p in graph.problems] == [
        f"datasets/b.yaml:{line}:23: unknown input dataset 'missing.one': no manifest in the project defines it"
    ]
    assert list(graph.graph.edges) == [("a", "b")]


def test_cycle_names_the_path_and_the_manifests(make_project: MakeProject) -> None:
    config = make_project(
        {
            "datasets/a.yaml": derivative_manifest("a", ["c"]),
            "datasets/b.yaml": derivative_manifest("b", ["a"]),
            "datasets/c.yaml": derivative_manifest("c", ["b"]),
            "datasets/d.yaml": derivative_manifest("d", ["c"]),
        }
    )
    graph = graph_of(config)
    line = line_of(config, "datasets/a.yaml", "        - datasetRef: c")
    assert [str(p) for p in graph.problems] == [
        f"datasets/a.yaml:{line}:23: dependency cycle: a -> b -> c -> a "
        "(datasets/a.yaml, datasets/b.yaml, datasets/c.yaml)"
    ]
    expected = "dependency cycle: a -> b -> c -> a (datasets/a.yaml, datasets/b.yaml, datasets/c.yaml)"
    with pytest.raises(GraphError, match=f"^{re.escape(expected)}$"):
        graph.topological_order()
    assert graph.downstream("c") == {"a", "b", "d"}


def test_a_dataset_reading_itself_is_a_cycle(make_project: MakeProject) -> None:
    config = make_project({"datasets/self.yaml": derivative_manifest("self.loop", ["self.loop"])})
    assert [p.message for p in graph_of(config).problems] == [
        "dependency cycle: self.loop -> self.loop (datasets/self.yaml)"
    ]


def test_did_inputs_resolve_through_known_ids(make_project: MakeProject) -> None:
    orders_id, outside_id = did(1), did(2)
    config = make_project(
        {
            "datasets/orders.yaml": root_manifest("com.example.orders"),
            "datasets/report.yaml": derivative_manifest(
                "com.example.report", [(orders_id, "orders"), outside_id, "ws.only-by-name"]
            ),
        }
    )
    known = {
        orders_id.upper().replace("DID:ODF:", "did:odf:"): "COM.EXAMPLE.ORDERS",
        outside_id: "ws.outside",
        did(3): "ws.only-by-name",
    }
    graph = graph_of(config, known)
    assert graph.ok, graph.problems
    assert graph.inputs_of("com.example.report") == [
        ("orders", "com.example.orders"),
        (outside_id, "ws.outside"),
        ("ws.only-by-name", "ws.only-by-name"),
    ]
    assert graph.is_managed("com.example.orders")
    assert not graph.is_managed("ws.outside") and graph.manifest_of("ws.outside") is None
    assert graph.datasets == ("com.example.orders", "com.example.report")
    assert graph.upstream("com.example.report") == {"com.example.orders", "ws.outside", "ws.only-by-name"}


def test_unknown_did_is_a_problem(make_project: MakeProject) -> None:
    unknown = did(9)
    config = make_project({"datasets/r.yaml": derivative_manifest("r", [(unknown, "x")])})
    graph = graph_of(config, {did(1): "other"})
    line = line_of(config, "datasets/r.yaml", f"        - datasetRef: {unknown}")
    assert [str(p) for p in graph.problems] == [
        f"datasets/r.yaml:{line}:23: unknown input dataset '{unknown}': no dataset with this id in the workspace"
    ]


def test_broken_manifests_are_nodes_without_inputs(make_project: MakeProject) -> None:
    config = make_project(
        {
            "datasets/a.yaml": root_manifest("a", path="{{ broken }}"),
            "datasets/b.yaml": derivative_manifest("b", ["a"]),
        }
    )
    graph = graph_of(config)
    assert graph.ok  # the template problem is the manifest's, not the graph's
    assert list(graph.graph.edges) == [("a", "b")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=30), st.permutations(range(12)))
def test_the_order_and_reach_are_networkx_s(edges: list[tuple[int, int]], insertion: list[int]) -> None:
    """The graph's own order (ties by lower-case name, then insertion) and reach, against networkx's."""
    names = [f"{'AbCd'[i % 4]}{i}" for i in range(12)]
    ours, theirs = Digraph(), nx.DiGraph()
    for i in insertion:
        ours.add_node(names[i])
        theirs.add_node(names[i])
    for u, v in edges:
        ours.add_edge(names[u], names[v])
        theirs.add_edge(names[u], names[v])
    assert ours.edges == list(theirs.edges)
    if nx.is_directed_acyclic_graph(theirs):
        assert ours.ordered(str.lower) == tuple(nx.lexicographical_topological_sort(theirs, key=str.lower))
    else:
        assert ours.ordered(str.lower) is None
    for name in names:
        assert ours.reachable(name) == nx.descendants(theirs, name)
        assert ours.reachable(name, backwards=True) == nx.ancestors(theirs, name)
