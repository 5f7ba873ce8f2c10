"""Load a project as a plan sees it: rendered and validated manifests, the dataset graph, the selection.

Reads the project folder only (templates are rendered in the sandbox of ``project.render``); the
workspace enters solely as ``known_ids``, the ``did:odf`` ids that manifests may name inputs by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odfproj.errors import ManifestError
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph
from odfproj.project.manifests import ProjectManifests, load_manifests
from odfproj.project.selectors import Selection, select

__all__ = ["LoadedProject", "PlanRequest", "load_selected"]


@dataclass(frozen=True)
class PlanRequest:
    """What the user asked to plan: the target, variable overrides and the selection."""

    target: str | None = None
    vars_override: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    changed_since: str | None = None

    @property
    def narrowed(self) -> bool:
        """True when only part of the project is planned (orphans are then not reported)."""
        return bool(self.select or self.exclude or self.changed_since)


@dataclass(frozen=True)
class LoadedProject:
    """The project's manifests, their graph and the selected datasets (topological order)."""

    config: ProjectConfig
    workspace: Path
    manifests: ProjectManifests
    graph: DatasetGraph
    selection: Selection


def load_manifests_of(
    config: ProjectConfig, request: PlanRequest, *, environ: Mapping[str, str] | None = None
) -> ProjectManifests:
    """Render and validate every manifest; ``ManifestError`` lists every problem of every file at once."""
    manifests = load_manifests(
        config, vars_override=request.vars_override, target=request.target, environ=environ
    )
    manifests.raise_for_problems()
    return manifests


def load_selected(
    config: ProjectConfig,
    request: PlanRequest,
    manifests: ProjectManifests,
    *,
    known_ids: Mapping[str, str],
) -> LoadedProject:
    """Build the graph of ``manifests`` and select; ``ManifestError`` lists every graph problem."""
    graph = DatasetGraph.build(manifests, known_ids=known_ids)
    if graph.problems:
        raise ManifestError([str(p) for p in graph.problems])
    selection = select(
        graph,
        manifests,
        select=request.select,
        exclude=request.exclude,
        changed_since=request.changed_since,
    )
    return LoadedProject(config, config.workspace(request.target), manifests, graph, selection)
