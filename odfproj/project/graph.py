"""The dataset graph: one node per dataset, an edge from each input to the derivative that reads it.

Nodes are dataset names as their manifest spells them; every method accepts any case, because
dataset names are case-insensitive. A ``SetTransform`` input may name a dataset (``datasetRef:
com.example.orders``) or give its id (``did:odf:...``); ids are resolved with ``known_ids`` (the
workspace's id -> name map, built by the caller so this layer never opens the workspace).

An input that exists only in the workspace (no manifest in the project) is a node with
``managed=False``: the project may read it but does not define it, so selections never include it.

Building never raises on bad manifests: unknown inputs and cycles become ``problems`` pointing at the
``datasetRef`` that causes them. Only ``topological_order`` refuses a cyclic graph.

The graph is a small structure of its own (:class:`Digraph`), not a ``networkx.DiGraph``: every command
builds it, and importing networkx alone cost 0.12 s of each one. networkx is imported only to name the
cycles of a cyclic project.
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from odfproj.errors import InvalidValueError, OdfprojError
from odfproj.odf.identity import DID_ODF_PREFIX, DatasetId
from odfproj.odf.model import SetTransform
from odfproj.odf.yaml_source import Path as DocPath
from odfproj.odf.yaml_source import Problem
from odfproj.project.manifests import LoadedManifest, ProjectManifests

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["DatasetGraph", "Digraph", "GraphError", "InputRef"]


class GraphError(OdfprojError):
    """The dataset graph cannot be ordered (a cycle) or a name is not in it."""


class Digraph:
    """Nodes with attributes and directed edges, in insertion order; read-only once built.

    What the dataset graph needs of a graph library and no more: ``nodes`` (iterable, and
    ``nodes[name]`` is the node's attributes), ``edges``, ``successors``, ``predecessors``. Iteration
    orders are insertion orders, as networkx's are, so outputs built from them do not change.
    """

    def __init__(self) -> None:
        self._attributes: dict[str, dict[str, Any]] = {}
        self._successors: dict[str, dict[str, None]] = {}
        self._predecessors: dict[str, dict[str, None]] = {}
        self._frozen = False
        #: Orders computed once frozen, by key function (building, ``has_cycle`` and the order ask alike).
        self._orders: dict[Any, tuple[str, ...] | None] = {}

    def add_node(self, name: str, **attributes: Any) -> None:
        self._check_open()
        self._attributes.setdefault(name, {}).update(attributes)
        self._successors.setdefault(name, {})
        self._predecessors.setdefault(name, {})

    def add_edge(self, source: str, target: str) -> None:
        self._check_open()
        for name in (source, target):
            if name not in self._attributes:
                self.add_node(name)
        self._successors[source][target] = None
        self._predecessors[target][source] = None

    def freeze(self) -> Digraph:
        self._frozen = True
        return self

    @property
    def nodes(self) -> Mapping[str, Mapping[str, Any]]:
        return self._attributes

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(u, v) for u, targets in self._successors.items() for v in targets]

    def successors(self, name: str) -> Iterator[str]:
        return iter(self._successors[name])

    def predecessors(self, name: str) -> Iterator[str]:
        return iter(self._predecessors[name])

    def __contains__(self, name: object) -> bool:
        return name in self._attributes

    def __iter__(self) -> Iterator[str]:
        return iter(self._attributes)

    def __len__(self) -> int:
        return len(self._attributes)

    def reachable(self, name: str, *, backwards: bool = False) -> set[str]:
        """Every node reached from ``name`` along edges (against them with ``backwards``), not ``name``."""
        links = self._predecessors if backwards else self._successors
        seen: set[str] = set()
        frontier = [name]
        while frontier:
            for other in links[frontier.pop()]:
                if other not in seen:
                    seen.add(other)
                    frontier.append(other)
        seen.discard(name)
        return seen

    def ordered(self, key: Any) -> tuple[str, ...] | None:
        """Inputs before readers, ties broken by ``key`` then insertion; None if there is a cycle."""
        if self._frozen and key in self._orders:
            return self._orders[key]
        position = {name: i for i, name in enumerate(self._attributes)}
        waiting = {name: len(inputs) for name, inputs in self._predecessors.items()}
        ready = [(key(n), position[n], n) for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            _, _, name = heapq.heappop(ready)
            order.append(name)
            for reader in self._successors[name]:
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    heapq.heappush(ready, (key(reader), position[reader], reader))
        found = tuple(order) if len(order) == len(self._attributes) else None
        if self._frozen:
            self._orders[key] = found
        return found

    def to_networkx(self) -> nx.DiGraph:
        """The same graph as networkx's (imported here: only a cyclic project needs it, to name cycles)."""
        import networkx as nx

        graph = nx.DiGraph()
        for name, attributes in self._attributes.items():
            graph.add_node(name, **attributes)
        graph.add_edges_from(self.edges)
        return graph

    def _check_open(self) -> None:
        if self._frozen:
            raise TypeError("the dataset graph is read-only once built")


@dataclass(frozen=True)
class InputRef:
    """One ``SetTransform`` input, resolved: the SQL alias and the dataset it names."""

    alias: str
    dataset: str
    dataset_ref: str
    """As written in the manifest (a name or a ``did:odf:``)."""


@dataclass(frozen=True)
class _Resolver:
    """Finds the node a ``datasetRef`` names: a project dataset, a workspace dataset, or nothing."""

    project: Mapping[str, str]
    """lower-case name -> name as its manifest spells it."""
    workspace_ids: Mapping[DatasetId, str]

    def resolve(self, ref: str) -> tuple[str | None, str | None]:
        """``(node name, None)`` or ``(None, why it is unknown)``."""
        if ref.startswith(DID_ODF_PREFIX):
            try:
                name = self.workspace_ids.get(DatasetId.from_did_str(ref))
            except InvalidValueError as e:
                return None, str(e)
            if name is None:
                return None, f"unknown input dataset {ref!r}: no dataset with this id in the workspace"
            return self.project.get(name.lower(), name), None
        name = self.project.get(ref.lower())
        if name is None:
            workspace_names = {n.lower(): n for n in self.workspace_ids.values()}
            name = workspace_names.get(ref.lower())
        if name is None:
            close = difflib.get_close_matches(
                ref.lower(), [*self.project, *workspace_names], n=1, cutoff=0.75
            )
            hint = ""
            if close:
                hint = f" (did you mean {self.project.get(close[0]) or workspace_names[close[0]]!r}?)"
            return None, f"unknown input dataset {ref!r}: no manifest in the project defines it{hint}"
        return name, None


@dataclass(frozen=True)
class DatasetGraph:
    """Datasets and their dependencies; ``graph`` is a read-only :class:`Digraph` (input -> derivative).

    Node attributes: ``managed`` (has a manifest in the project) and ``manifest`` (the
    ``LoadedManifest`` or None).
    """

    graph: Digraph
    problems: tuple[Problem, ...] = ()
    inputs: Mapping[str, tuple[InputRef, ...]] = field(default_factory=dict, repr=False)
    """Resolved inputs of each managed dataset, in manifest order."""
    ref_paths: Mapping[tuple[str, str], DocPath] = field(default_factory=dict, repr=False)
    """``(input, reader)`` -> where in the reader's manifest its ``datasetRef`` names the input."""

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def build(cls, manifests: ProjectManifests, known_ids: Mapping[str, str] | None = None) -> DatasetGraph:
        """Graph of every manifest that declares a name; ``known_ids`` maps ``did:odf`` strings to names."""
        graph = Digraph()
        project: dict[str, str] = {}
        for manifest in manifests.manifests:
            if manifest.name is None or manifest.name.lower() in project:
                continue  # nameless and duplicate manifests are reported by load_manifests
            project[manifest.name.lower()] = manifest.name
            graph.add_node(manifest.name, managed=True, manifest=manifest)
        resolver = _Resolver(project, _parse_known_ids(known_ids or {}))
        problems: list[Problem] = []
        inputs: dict[str, tuple[InputRef, ...]] = {}
        ref_paths: dict[tuple[str, str], DocPath] = {}
        for manifest in manifests.manifests:
            if manifest.name is None:
                continue
            name = project[manifest.name.lower()]
            resolved, found = _resolve_inputs(manifest, resolver)
            # A second file with the name (load_manifests reports it) adds only the edges of what it
            # reads, so that `input+` finds the name however its files disagree.
            first = graph.nodes[name]["manifest"] is manifest
            if first:
                problems.extend(found)
                inputs[name] = tuple(ref for ref, _ in resolved)
            for ref, path in resolved:
                if ref.dataset not in graph:
                    graph.add_node(ref.dataset, managed=False, manifest=None)
                graph.add_edge(ref.dataset, name)
                if first:
                    ref_paths.setdefault((ref.dataset, name), path)
        graph.freeze()
        problems.extend(_cycle_problems(graph, ref_paths))
        return cls(graph, tuple(problems), inputs, ref_paths)

    # -- queries -------------------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        return not self.problems

    @cached_property
    def has_cycle(self) -> bool:
        """True when no order exists (then ``problems`` names each cycle, and nothing can be selected)."""
        return self.graph.ordered(str.lower) is None

    @cached_property
    def _canonical(self) -> dict[str, str]:
        return {str(node).lower(): node for node in self.graph}

    def canonical(self, name: str) -> str:
        """The node's own spelling of ``name``; raises ``GraphError`` if there is no such dataset."""
        try:
            return self._canonical[name.lower()]
        except KeyError:
            raise GraphError(f"unknown dataset {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._canonical

    @property
    def datasets(self) -> tuple[str, ...]:
        """Names of the datasets the project defines (managed nodes), sorted case-insensitively."""
        return tuple(sorted((n for n in self.graph if self.is_managed(n)), key=str.lower))

    def is_managed(self, name: str) -> bool:
        return bool(self.graph.nodes[self.canonical(name)]["managed"])

    def manifest_of(self, name: str) -> LoadedManifest | None:
        return self.graph.nodes[self.canonical(name)]["manifest"]

    def inputs_of(self, name: str) -> list[tuple[str, str]]:
        """``(alias, input dataset)`` pairs in manifest order; alias defaults to the ``datasetRef``."""
        return [(ref.alias, ref.dataset) for ref in self.inputs.get(self.canonical(name), ())]

    def input_refs(self, name: str) -> tuple[InputRef, ...]:
        return self.inputs.get(self.canonical(name), ())

    def upstream(self, name: str) -> frozenset[str]:
        """Every dataset ``name`` reads, directly or through other datasets (not ``name`` itself)."""
        return frozenset(self.graph.reachable(self.canonical(name), backwards=True))

    def downstream(self, name: str) -> frozenset[str]:
        """Every dataset that reads ``name``, directly or transitively (not ``name`` itself)."""
        return frozenset(self.graph.reachable(self.canonical(name)))

    @cached_property
    def _order(self) -> tuple[str, ...]:
        order = self.graph.ordered(str.lower)
        if order is None:
            raise GraphError(_cycle_message(self.graph, _find_cycles(self.graph)[0]))
        return order

    def topological_order(self, names: Iterable[str] | None = None) -> tuple[str, ...]:
        """``names`` (default: every managed dataset), inputs before the datasets that read them.

        Deterministic: ties are broken by case-insensitive name over the WHOLE graph, then filtered,
        so the relative order of two datasets never depends on what else was selected.
        """
        wanted = set(self.datasets) if names is None else {self.canonical(n) for n in names}
        return tuple(n for n in self._order if n in wanted)


# ------------------------------------------------------------------------------------------------
# Helpers


def _parse_known_ids(known_ids: Mapping[str, str]) -> dict[DatasetId, str]:
    """Key by parsed id, so every spelling of a did (base16 in any case, base58) finds the dataset."""
    return {DatasetId.from_did_str(did): name for did, name in known_ids.items()}


def _transform(manifest: LoadedManifest) -> tuple[int, SetTransform] | None:
    """The manifest's last ``SetTransform`` (a later event replaces an earlier one) and its index."""
    if manifest.snapshot is None:
        return None
    found = None
    for index, event in enumerate(manifest.snapshot.metadata):
        if isinstance(event, SetTransform):
            found = (index, event)
    return found


def _resolve_inputs(
    manifest: LoadedManifest, resolver: _Resolver
) -> tuple[list[tuple[InputRef, DocPath]], list[Problem]]:
    """A manifest's inputs and the problems of those that name no dataset.

    A manifest with errors has no snapshot: the inputs it declares are resolved best effort, those that
    name nothing silently dropped (the manifest is reported for its own errors already).
    """
    if manifest.snapshot is None:
        declared = ((resolver.resolve(ref)[0], ref) for ref in manifest.declared_inputs)
        return [(InputRef(ref, name, ref), ("content", "name")) for name, ref in declared if name], []
    found = _transform(manifest)
    if found is None:
        return [], []
    index, transform = found
    resolved: list[tuple[InputRef, DocPath]] = []
    problems: list[Problem] = []
    for position, item in enumerate(transform.inputs):
        path = ("content", "metadata", index, "inputs", position, "datasetRef")
        name, why = resolver.resolve(item.dataset_ref)
        if name is None:
            problems.append(manifest.problem_at(path, why or f"unknown input dataset {item.dataset_ref!r}"))
            continue
        alias = item.alias or item.dataset_ref
        resolved.append((InputRef(alias, name, item.dataset_ref), path))
    return resolved, problems


def _find_cycles(dataset_graph: Digraph) -> list[list[str]]:
    """One cycle per strongly connected component that has one, each starting at its smallest name."""
    if dataset_graph.ordered(str.lower) is not None:
        return []  # the common case, answered without networkx
    import networkx as nx

    graph = dataset_graph.to_networkx()
    cycles = []
    components = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    components += [{n} for n, _ in nx.selfloop_edges(graph)]
    for component in sorted(components, key=lambda c: min(n.lower() for n in c)):
        start = min(component, key=str.lower)
        edges = nx.find_cycle(graph.subgraph(component), source=start)
        nodes = [u for u, _ in edges]
        first = nodes.index(min(nodes, key=str.lower))
        cycles.append(nodes[first:] + nodes[:first])
    return cycles


def _cycle_message(graph: Digraph, cycle: list[str]) -> str:
    """``dependency cycle: a -> b -> a (datasets/a.yaml, datasets/b.yaml)``."""
    files = ", ".join(m.rel_path for m in (graph.nodes[n]["manifest"] for n in cycle) if m is not None)
    return f"dependency cycle: {' -> '.join([*cycle, cycle[0]])} ({files})"


def _cycle_problems(graph: Digraph, ref_paths: Mapping[tuple[str, str], DocPath]) -> list[Problem]:
    """Report each cycle at the ``datasetRef`` that closes it: in the manifest of the cycle's first
    dataset, its input from the cycle's last dataset."""
    problems = []
    for cycle in _find_cycles(graph):
        first: LoadedManifest = graph.nodes[cycle[0]]["manifest"]
        path = ref_paths.get((cycle[-1], cycle[0]), ("content", "name"))
        problems.append(first.problem_at(path, _cycle_message(graph, cycle)))
    return problems
