"""Gather the two sides of a plan: the project's rendered manifests and the workspace's chains.

Reads only. Nothing a manifest names is fetched or executed, so planning is safe on an untrusted
pull request: rendering is sandboxed (project.render), and the workspace is only read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from odfproj.odf import model
from odfproj.plan.model import Plan
from odfproj.plan.odf_version import odf_version_warnings
from odfproj.plan.planner import DesiredDataset, make_plan
from odfproj.plan.queries import QueryChecker
from odfproj.plan.renames import plan_renames
from odfproj.plan.workspace_state import WorkspaceState, load_workspace_state
from odfproj.project.collector import fewer_collections
from odfproj.project.config import ProjectConfig
from odfproj.project.loader import LoadedProject, PlanRequest, load_manifests_of, load_selected
from odfproj.project.manifests import ProjectManifests
from odfproj.project.moves import Move

__all__ = ["PlanRequest", "ProjectSnapshot", "load_project_state", "plan_project"]


@dataclass(frozen=True)
class ProjectSnapshot(LoadedProject):
    """The project as planned: manifests, graph, selection and workspace, kept for apply and run."""

    state: WorkspaceState


def load_project_state(
    config: ProjectConfig, request: PlanRequest, *, environ: Mapping[str, str] | None = None
) -> ProjectSnapshot:
    """Render and validate every manifest, build the graph, select, and read the workspace.

    A narrowed plan (``--select``...) reads the chains of the selected datasets and their inputs only,
    unless a manifest names an input by ``did:odf`` id: then every chain is read to find that id.
    Raises ``ManifestError`` listing every problem of every manifest (and of the graph) at once.
    Runs with fewer garbage collections (``project.collector``): the snapshot lives as long as the command.
    """
    with fewer_collections():
        return _load_project_state(config, request, environ)


def _load_project_state(
    config: ProjectConfig, request: PlanRequest, environ: Mapping[str, str] | None
) -> ProjectSnapshot:
    root = config.workspace(request.target)
    manifests = load_manifests_of(config, request, environ=environ)
    refs = _input_refs(manifests)
    if request.narrowed and not any(ref.startswith("did:") for ref in refs):
        # Inputs outside the project are resolved by name against the workspace: read those first.
        outside = {ref for ref in refs if manifests.get(ref) is None}
        early = load_workspace_state(root, names=outside)
        project = load_selected(config, request, manifests, known_ids=early.known_ids())
        wanted = _selected_and_inputs(project)
        wanted.update(n for m in _moves_of(config, wanted) for n in (m.source, m.target))
        state = load_workspace_state(root, names=wanted | outside)
    else:
        state = load_workspace_state(root)
        project = load_selected(config, request, manifests, known_ids=state.known_ids())
    return ProjectSnapshot(
        config, project.workspace, project.manifests, project.graph, project.selection, state
    )


def _input_refs(manifests: ProjectManifests) -> set[str]:
    """Every input reference of every manifest's transforms, as written."""
    refs: set[str] = set()
    for manifest in manifests.manifests:
        for event in manifest.snapshot.metadata if manifest.snapshot is not None else ():
            if isinstance(event, model.SetTransform):
                refs.update(i.dataset_ref for i in event.inputs)
    return refs


def _selected_and_inputs(project: LoadedProject) -> set[str]:
    """The selected datasets and their direct inputs: the chains a narrowed plan reads."""
    wanted = set(project.selection.names)
    for name in project.selection.names:
        wanted.update(project.graph.graph.predecessors(project.graph.canonical(name)))
    return wanted


def _moves_of(config: ProjectConfig, covered: Collection[str]) -> tuple[Move, ...]:
    """The declared renames a narrowed plan makes: those whose new name it selects or reads as an input
    (a selected reader of a renamed dataset needs the rename to find its input)."""
    names = {n.lower() for n in covered}
    return tuple(m for m in config.moves if m.target.lower() in names)


def plan_project(
    config: ProjectConfig,
    request: PlanRequest,
    *,
    environ: Mapping[str, str] | None = None,
    query_checker: QueryChecker | None = None,
) -> tuple[Plan, ProjectSnapshot]:
    """The plan for the selected datasets, and the snapshot of the project it was made from.

    ``query_checker`` is called for created and changed queries only (it may start the engine).
    Runs with fewer garbage collections (``project.collector``), as loading does.
    """
    with fewer_collections():
        return _plan_project(config, request, environ, query_checker)


def _plan_project(
    config: ProjectConfig,
    request: PlanRequest,
    environ: Mapping[str, str] | None,
    query_checker: QueryChecker | None,
) -> tuple[Plan, ProjectSnapshot]:
    snapshot = load_project_state(config, request, environ=environ)
    desired = []
    for name in snapshot.selection.names:
        manifest = snapshot.graph.manifest_of(name)
        if manifest is not None and manifest.snapshot is not None:
            desired.append(DesiredDataset(manifest.rel_path, manifest.snapshot, manifest.definition_digest))
    state = snapshot.state
    renames = plan_renames(
        config.moves if not request.narrowed else _moves_of(config, _selected_and_inputs(snapshot)),
        state.views,
        {n.lower(): n for n in state.names},
        {name.lower(): m.rel_path for name, m in snapshot.manifests.by_name.items()},
        workspace_empty=state.total == 0,
        remote=config.remote_workspace(),
    )
    orphans: list[str] = []
    if not request.narrowed:
        orphans = [
            n for n in state.names if n not in snapshot.manifests.by_name and renames.renamed_to(n) is None
        ]
    agreements = state.agreements()
    plan = make_plan(
        project=config.name,
        workspace=str(snapshot.workspace),
        desired=desired,
        views=snapshot.state.views,
        orphans=orphans,
        warnings=(
            *snapshot.selection.warnings,
            *odf_version_warnings(config.odf_version, snapshot.state.views, snapshot.selection.names),
        ),
        query_checker=query_checker,
        orphan_readers={
            name: tuple(snapshot.graph.graph.successors(snapshot.graph.canonical(name)))
            for name in orphans
            if name in snapshot.graph
        },
        project_root=config.root,
        known_ids=snapshot.state.known_ids(),
        downstream_of=snapshot.graph.downstream,
        renames=renames,
        agreements=agreements,
    )
    state.keep(agreements)
    return plan, snapshot
