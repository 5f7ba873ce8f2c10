"""Gather the two sides of a plan: the project's manifests and the workspace's chains. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from odfproj.errors import ManifestError, PlanError
from odfproj.odf import model
from odfproj.odf.validation import validate_manifest
from odfproj.odf.yaml_codec import parse_manifest
from odfproj.plan.diff import ChainView
from odfproj.plan.planner import DesiredDataset
from odfproj.project.config import ProjectConfig


@dataclass(frozen=True)
class WorkspaceState:
    views: dict[str, ChainView]
    names: tuple[str, ...]


def load_desired(config: ProjectConfig) -> list[DesiredDataset]:
    """Every manifest validated and parsed, in topological order; all problems raised at once."""
    problems: list[str] = []
    desired: list[DesiredDataset] = []
    for path in config.manifest_files():
        rel = str(path.relative_to(config.root))
        data = path.read_bytes()
        found = validate_manifest(data, rel)
        if found:
            problems.extend(str(p) for p in found)
            continue
        snapshot, _ = parse_manifest(data, expected_kind="DatasetSnapshot")
        desired.append(DesiredDataset(rel, snapshot))
    if problems:
        raise ManifestError(problems)
    return _topological(desired)


def _topological(desired: list[DesiredDataset]) -> list[DesiredDataset]:
    by_name = {d.snapshot.name.lower(): d for d in desired}
    graph = nx.DiGraph()
    graph.add_nodes_from(by_name)
    for d in desired:
        for event in d.snapshot.metadata:
            if isinstance(event, model.SetTransform):
                for inp in event.inputs:
                    ref = inp.dataset_ref.lower()
                    if ref in by_name:
                        graph.add_edge(ref, d.snapshot.name.lower())
    try:
        order = list(nx.lexicographical_topological_sort(graph))
    except nx.NetworkXUnfeasible:
        cycle = " -> ".join(u for u, _ in nx.find_cycle(graph))
        raise PlanError(f"dependency cycle between datasets: {cycle}") from None
    return [by_name[n] for n in order]


def load_workspace_state(root: Path) -> WorkspaceState:
    """Chain projections of every dataset in the workspace; an absent workspace is an empty one."""
    if not (root / "datasets").is_dir():
        return WorkspaceState({}, ())
    from odfproj.storage.workspace import Workspace  # storage is only needed when datasets exist

    workspace = Workspace(root)
    views: dict[str, ChainView] = {}
    names = tuple(workspace.list_datasets())
    for name in names:
        projection = workspace.open(name).projection()
        views[name.lower()] = ChainView(
            dataset_id=projection.dataset_id.as_did_str(),
            kind=projection.kind,
            head=projection.head.to_multibase(),
            has_data=projection.has_data,
            definition_events=tuple(d.event for d in projection.definition_events),
        )
    return WorkspaceState(views, names)
