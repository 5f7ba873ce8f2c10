"""Load a project as a plan sees it: rendered and validated manifests, the dataset graph, the selection.

Reads the project folder only (templates are rendered in the sandbox of ``project.render``); the
workspace enters solely as ``known_ids``, the ``did:odf`` ids that manifests may name inputs by.

A manifest that cannot be loaded (bad YAML, a schema violation, a refused newer form such as an
``EthereumLogs`` fetch step, an unknown input, a second file with its name) stops the whole project
when nothing narrows it. A narrowed request (``--select``, ``--exclude``, ``--changed-since``) stops
only for what it needs: the selection's own manifests, the manifests its derivatives read, and the
problems of no manifest (macro files). Every other manifest with errors is set aside with one warning
naming its file, its dataset when known, and its first problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odfproj.errors import ManifestError
from odfproj.odf.yaml_source import Problem
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph, InputRef
from odfproj.project.manifests import LoadedManifest, ProjectManifests, load_manifests
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
    """Render and validate every manifest; ``ManifestError`` lists every problem of every file at once.

    A narrowed request raises nothing here: ``load_selected`` knows which problems stop it.
    """
    manifests = load_manifests(
        config, vars_override=request.vars_override, target=request.target, environ=environ
    )
    if not request.narrowed:
        manifests.raise_for_problems()
    return manifests


def load_selected(
    config: ProjectConfig,
    request: PlanRequest,
    manifests: ProjectManifests,
    *,
    known_ids: Mapping[str, str],
) -> LoadedProject:
    """Build the graph of ``manifests`` and select; ``ManifestError`` lists every problem that stops it.

    Not narrowed, or with a dependency cycle: every problem of every manifest, then of the graph. A
    narrowed request: the problems of the selected manifests, one line for each selected dataset that
    reads a manifest with errors, and the problems of no manifest; the other manifests with errors
    become warnings of the selection (see the module doc).
    """
    graph = DatasetGraph.build(manifests, known_ids=known_ids)
    if not request.narrowed or graph.has_cycle:
        manifests.raise_for_problems()
        if graph.problems:
            raise ManifestError([str(p) for p in graph.problems])
    selection = select(
        graph,
        manifests,
        select=request.select,
        exclude=request.exclude,
        changed_since=request.changed_since,
    )
    if request.narrowed:
        selection = _set_aside(manifests, graph, selection)
    return LoadedProject(config, config.workspace(request.target), manifests, graph, selection)


def _set_aside(manifests: ProjectManifests, graph: DatasetGraph, selection: Selection) -> Selection:
    """``selection`` with a warning per manifest with errors outside it; ``ManifestError`` for the rest."""
    own = _errors_by_manifest(manifests, graph)
    stopping = [p for p in manifests.renderer.problems if p.severity == "error"]  # macro files: everyone's
    stopping += own.pop("", [])
    chosen = {n.lower() for n in selection.names}
    covered = set(selection.unnamed)
    broken: dict[str, tuple[LoadedManifest, list[Problem]]] = {}
    skipped = []
    for manifest in manifests.manifests:
        problems = own.get(manifest.rel_path)
        if not problems:
            continue
        if manifest.name is not None:
            broken.setdefault(manifest.name.lower(), (manifest, problems))
        if (manifest.name.lower() in chosen) if manifest.name is not None else (manifest.rel_path in covered):
            stopping.extend(problems)
        else:
            skipped.append(f"{_first_problem(manifest, problems)} (not selected: skipped)")
    for name in selection.names:
        if name.lower() in broken:
            continue  # its own problems say it
        for ref in graph.input_refs(name):
            key = ref.dataset.lower()
            if key in broken and key not in chosen:
                stopping.append(_reads_broken(graph, name, ref, *broken[key]))
    if stopping:
        raise ManifestError([str(p) for p in sorted(set(stopping), key=_problem_order)])
    return replace(selection, warnings=(*selection.warnings, *skipped))


def _errors_by_manifest(manifests: ProjectManifests, graph: DatasetGraph) -> dict[str, list[Problem]]:
    """Each manifest's errors by its path: its own, a second definition of its name, its unknown inputs.

    Under ``""``: errors of no manifest (a macro file's, found while rendering the project).
    """
    own = {m.rel_path: list(m.errors) for m in manifests.manifests}
    listed = set(manifests.renderer.problems) | {p for m in manifests.manifests for p in m.problems}
    for problem in (*manifests.problems, *graph.problems):
        if problem.severity == "error" and problem not in listed:
            own.setdefault(problem.file if problem.file in own else "", []).append(problem)
    return own


def _first_problem(manifest: LoadedManifest, problems: Sequence[Problem]) -> str:
    """``file:line:col: NAME: message (and N more problems)``: the dataset named once, when it is known."""
    first = problems[0]
    message = first.message
    name = manifest.name
    if name is not None and not message.startswith(f"{name}: ") and repr(name) not in message:
        message = f"{name}: {message}"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem(s): odfproj validate lists them)"
    line = str(replace(first, message=message))
    return line if first.file == manifest.rel_path else f"{manifest.rel_path}: {line}"  # a macro's line


def _reads_broken(
    graph: DatasetGraph, reader: str, ref: InputRef, manifest: LoadedManifest, problems: Sequence[Problem]
) -> Problem:
    """One line at the reader's ``datasetRef``: it reads a dataset whose manifest cannot be loaded, and why."""
    reader_manifest = graph.manifest_of(reader)
    assert reader_manifest is not None  # a selected dataset has a manifest
    where = graph.ref_paths.get((ref.dataset, graph.canonical(reader)), ("content", "name"))
    return reader_manifest.problem_at(
        where,
        f"{reader} reads {ref.dataset}, which cannot be loaded ({_first_problem(manifest, problems)}); "
        f"to go on without it, leave out what reads it too: --exclude '{ref.dataset}+'",
    )


def _problem_order(problem: Problem) -> tuple[str, int, int, str]:
    return (problem.file, problem.line, problem.col, problem.message)
