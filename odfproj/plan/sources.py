"""Gather the two sides of a plan: the project's rendered manifests and the workspace's chains.

Reads only. Nothing a manifest names is fetched or executed, so planning is safe on an untrusted
pull request: rendering is sandboxed (project.render), and the workspace is only read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odfproj.errors import ManifestError
from odfproj.odf import model
from odfproj.plan.diff import WRITTEN_BY_DATA, ChainView
from odfproj.plan.model import Plan
from odfproj.plan.planner import DesiredDataset, make_plan
from odfproj.plan.queries import QueryChecker
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph
from odfproj.project.manifests import ProjectManifests, load_manifests
from odfproj.project.selectors import Selection, select
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import ChainProjection, event_kind

#: The ``info/`` record apply leaves in each dataset it changed; drift is judged against it.
APPLY_RECORD = "odfproj-apply.json"


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
class WorkspaceState:
    """Every dataset of the workspace as the planner sees it, keyed by lower-case name."""

    views: Mapping[str, ChainView]
    names: tuple[str, ...]

    def known_ids(self) -> dict[str, str]:
        """``did:odf`` -> dataset name, for resolving inputs given by id."""
        return {self.views[name.lower()].dataset_id: name for name in self.names}


@dataclass(frozen=True)
class ProjectSnapshot:
    """The project as planned: manifests, graph, selection and workspace, kept for apply and run."""

    config: ProjectConfig
    workspace: Path
    manifests: ProjectManifests
    graph: DatasetGraph
    selection: Selection
    state: WorkspaceState


def load_project_state(
    config: ProjectConfig, request: PlanRequest, *, environ: Mapping[str, str] | None = None
) -> ProjectSnapshot:
    """Render and validate every manifest, build the graph, select, and read the workspace.

    Raises ``ManifestError`` listing every problem of every manifest (and of the graph) at once.
    """
    workspace = config.workspace(request.target)
    state = load_workspace_state(workspace)
    manifests = load_manifests(
        config, vars_override=request.vars_override, target=request.target, environ=environ
    )
    manifests.raise_for_problems()
    graph = DatasetGraph.build(manifests, known_ids=state.known_ids())
    if graph.problems:
        raise ManifestError([str(p) for p in graph.problems])
    selection = select(
        graph,
        manifests,
        select=request.select,
        exclude=request.exclude,
        changed_since=request.changed_since,
    )
    return ProjectSnapshot(config, workspace, manifests, graph, selection, state)


def plan_project(
    config: ProjectConfig,
    request: PlanRequest,
    *,
    environ: Mapping[str, str] | None = None,
    query_checker: QueryChecker | None = None,
) -> tuple[Plan, ProjectSnapshot]:
    """The plan for the selected datasets, and the snapshot of the project it was made from.

    ``query_checker`` is called for created and changed queries only (it may start the engine).
    """
    snapshot = load_project_state(config, request, environ=environ)
    desired = []
    for name in snapshot.selection.names:
        manifest = snapshot.graph.manifest_of(name)
        if manifest is not None and manifest.snapshot is not None:
            desired.append(DesiredDataset(manifest.rel_path, manifest.snapshot))
    orphans: list[str] = []
    if not request.narrowed:
        orphans = [n for n in snapshot.state.names if n not in snapshot.manifests.by_name]
    plan = make_plan(
        project=config.name,
        workspace=str(snapshot.workspace),
        desired=desired,
        views=snapshot.state.views,
        orphans=orphans,
        warnings=snapshot.selection.warnings,
        query_checker=query_checker,
        orphan_readers={
            name: tuple(snapshot.graph.graph.successors(snapshot.graph.canonical(name)))
            for name in orphans
            if name in snapshot.graph
        },
        project_root=config.root,
    )
    return plan, snapshot


def load_workspace_state(root: Path) -> WorkspaceState:
    """Chain projections of every dataset in the workspace; an absent workspace is an empty one."""
    if not (root / "datasets").is_dir():
        return WorkspaceState({}, ())
    from odfproj.storage.workspace import Workspace

    workspace = Workspace(root)
    views: dict[str, ChainView] = {}
    names = tuple(workspace.list_datasets())
    for name in names:
        dataset = workspace.open(name, recover=False)
        projection = dataset.projection()
        applied = applied_sequence_number(dataset.read_info(APPLY_RECORD))
        foreign = ()
        if applied is not None:
            foreign = tuple(
                f"{event_kind(d.event)} (block {d.sequence_number})"
                for d in projection.definition_events
                if d.sequence_number > applied and event_kind(d.event) not in WRITTEN_BY_DATA
            )
        views[name.lower()] = ChainView(
            dataset_id=projection.dataset_id.as_did_str(),
            kind=projection.kind,
            head=projection.head.to_multibase(),
            has_data=projection.has_data,
            definition_events=tuple(d.event for d in projection.definition_events),
            foreign_events=foreign,
            last_offset=projection.last_offset,
            input_offsets=MappingProxyType(
                {did.as_did_str(): pos.new_offset for did, pos in projection.inputs.items()}
            ),
            schema_bytes=projection.schema,
            **_files_glob_progress(dataset, projection),
        )
    return WorkspaceState(MappingProxyType(views), names)


def _files_glob_progress(dataset: Dataset, projection: ChainProjection) -> dict[str, Any]:
    """A ``FilesGlob`` root's source state and ingested files (a walk of its blocks: such roots only)."""
    source = projection.set_polling_source
    if source is None or not isinstance(source.fetch, model.FetchStepFilesGlob):
        return {}
    # Imported here: only FilesGlob roots need the ingest pipeline, and plan starts faster without it.
    from odfproj.ingest.pipeline import POLLING_SOURCE_NAME, glob_history

    return {
        "polling_state": projection.source_states.get(POLLING_SOURCE_NAME),
        "ingested_files": glob_history(dataset),
    }


def apply_record(*, sequence_number: int, head: str, manifest: str | None, applied_at: str) -> bytes:
    """The ``info/`` record apply writes after committing a dataset's definition events."""
    record = {
        "format": 1,
        "sequence_number": sequence_number,
        "head": head,
        "manifest": manifest,
        "applied_at": applied_at,
    }
    return (json.dumps(record, indent=2) + "\n").encode()


def applied_sequence_number(data: bytes | None) -> int | None:
    """The sequence number apply left the chain at; a missing or unreadable record means unknown."""
    if data is None:
        return None
    try:
        value = json.loads(data).get("sequence_number")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value >= 0 else None
