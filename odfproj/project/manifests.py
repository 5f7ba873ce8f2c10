"""Load a project's manifests: read, render (Jinja), validate, parse, and check that names are unique.

Loading never raises on bad manifests: each ``LoadedManifest`` carries its problems, and
``ProjectManifests.problems`` holds them all, so a command can report every mistake at once.

Positions: rendering happens before validation, so line numbers in problems refer to the RENDERED
text. For templates whose tags do not add or remove lines (``{{ var('x') }}`` inside a value, an
``{% if %}`` and its ``{% endif %}`` on lines they share with text) that is the source line; a
template that expands to several lines shifts the lines below it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from odfproj.errors import InvalidValueError, ManifestError
from odfproj.odf.model import DatasetSnapshot
from odfproj.odf.odf_versions import DEFAULT_ODF_VERSION
from odfproj.odf.refs import DatasetAlias
from odfproj.odf.yaml_codec import manifest_from_data
from odfproj.odf.yaml_source import Path as DocPath
from odfproj.odf.yaml_source import Problem, SourceMap, load_yaml_document
from odfproj.project.boundary import FolderResolver, path_refusal
from odfproj.project.collector import fewer_collections
from odfproj.project.config import ProjectConfig
from odfproj.project.parse_cache import ParseCache
from odfproj.project.render import RenderContext, Renderer

__all__ = [
    "LoadedManifest",
    "ManifestsByName",
    "ProjectManifests",
    "build_manifest",
    "load_manifest",
    "load_manifests",
]

_NAME_PATH: DocPath = ("content", "name")


@dataclass(frozen=True)
class LoadedManifest:
    """One manifest file after rendering and validation; ``snapshot`` is None when it has errors."""

    path: Path
    rel_path: str
    rendered_text: str
    snapshot: DatasetSnapshot | None
    problems: tuple[Problem, ...]
    name: str | None = None
    """``content.name`` as written, when it is a valid alias; set even if other parts are wrong."""
    declared_inputs: tuple[str, ...] = ()
    """Of a manifest with errors (no ``snapshot``): the ``datasetRef`` strings of its last ``SetTransform``
    as written, best effort, so the graph still knows what it reads (selectors' ``+``)."""
    declared_keywords: tuple[str, ...] = ()
    """Of a manifest with errors: its last ``SetInfo``'s keywords as written, best effort (``tag:``)."""
    source_text: str = field(default="", repr=False, compare=False)
    source_map: SourceMap = field(default_factory=SourceMap, repr=False, compare=False)
    """Positions in the rendered text, for problems found later (e.g. an unknown input)."""
    definition_digest: str | None = field(default=None, repr=False, compare=False)
    """The digest of ``snapshot``'s plain data when the parse cache keeps it (``parse_cache.definition_digest``),
    else None: ``plan`` compares it with the one it last found a chain to define instead of diffing events."""

    @property
    def ok(self) -> bool:
        return self.snapshot is not None and not self.errors

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    def position(self, path: DocPath) -> tuple[int, int]:
        """Line and column of a value in the rendered document (its nearest known ancestor, else 1:1)."""
        return self.source_map.nearest(path)

    def problem_at(self, path: DocPath, message: str) -> Problem:
        line, col = self.position(path)
        return Problem(self.rel_path, line, col, message)


class ManifestsByName(Mapping[str, LoadedManifest]):
    """Read-only, case-insensitive mapping from dataset name to manifest (names are case-insensitive).

    Iterating yields each name as its manifest spells it.
    """

    def __init__(self, manifests: Iterable[LoadedManifest]) -> None:
        self._by_key: dict[str, LoadedManifest] = {}
        for manifest in manifests:
            if manifest.name is not None:
                self._by_key.setdefault(manifest.name.lower(), manifest)

    def __getitem__(self, name: str) -> LoadedManifest:
        return self._by_key[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_key

    def __iter__(self) -> Iterator[str]:
        return (m.name for m in self._by_key.values() if m.name is not None)

    def __len__(self) -> int:
        return len(self._by_key)


@dataclass(frozen=True)
class ProjectManifests:
    """Every manifest of a project, sorted by path, with all their problems.

    ``renderer`` is kept so that other versions of a file (``--changed-since``) can be rendered with
    exactly the same vars, target and macros.
    """

    root: Path
    manifests: tuple[LoadedManifest, ...]
    problems: tuple[Problem, ...]
    by_name: ManifestsByName
    renderer: Renderer = field(default_factory=Renderer, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def get(self, name: str) -> LoadedManifest | None:
        return self.by_name.get(name)

    def raise_for_problems(self) -> None:
        """Raise one ``ManifestError`` listing every error, for commands that cannot go on."""
        errors = [str(p) for p in self.problems if p.severity == "error"]
        if errors:
            raise ManifestError(errors)


def load_manifests(
    config: ProjectConfig,
    *,
    vars_override: Mapping[str, Any] | None = None,
    target: str | None = None,
    files: Sequence[Path] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProjectManifests:
    """Load the project's manifests (or just ``files``), rendered for ``target`` with ``vars_override``.

    Raises only for a bad ``target`` (``ProjectError``); everything wrong in files is a problem.
    Runs with fewer garbage collections (``project.collector``): what it builds lives as long as the command.
    """
    with fewer_collections():
        return _load_manifests(config, vars_override, target, files, environ)


def _load_manifests(
    config: ProjectConfig,
    vars_override: Mapping[str, Any] | None,
    target: str | None,
    files: Sequence[Path] | None,
    environ: Mapping[str, str] | None,
) -> ProjectManifests:
    context = RenderContext.for_project(config, vars_override=vars_override, target=target, environ=environ)
    renderer = Renderer(context)
    # The workspace's ODF version words the refusal of a newer construct (odfproj.odf.upgrade).
    odf_version = config.odf_version
    paths = _manifest_paths(config, files)
    cache = ParseCache.open(config.root, context, odf_version, len(paths))
    jobs, done = [], []
    keys: dict[str, str] = {}
    resolve, root = FolderResolver(), config.root.resolve()
    for path in paths:
        rel_path = _rel_path(path, config.root)
        refusal = path_refusal(path, root, resolve)  # config.refusal, each folder resolved once
        if refusal is not None:
            done.append(LoadedManifest(path, rel_path, "", None, (Problem(rel_path, 1, 1, refusal),)))
            continue
        cached, key = _from_cache(cache, path, rel_path)
        if cached is not None:
            done.append(cached)
            continue
        jobs.append((path, rel_path))
        if key is not None:
            keys[rel_path] = key
    fresh = _load_all(jobs, renderer, odf_version)
    for i, manifest in enumerate(fresh):
        key = keys.get(manifest.rel_path)
        if key is not None and manifest.snapshot is not None and not manifest.problems:
            digest = cache.put(
                manifest.rel_path, key, manifest.snapshot, manifest.rendered_text, manifest.source_text
            )
            fresh[i] = replace(manifest, definition_digest=digest)
    cache.save(keep=None if files is not None else [*keys, *(m.rel_path for m in done)])
    loaded = tuple(sorted([*fresh, *done], key=lambda m: m.rel_path))
    problems = [*renderer.problems]
    for manifest in loaded:
        problems.extend(manifest.problems)
    problems.extend(_duplicate_problems(loaded))
    return ProjectManifests(
        root=config.root,
        manifests=loaded,
        problems=tuple(problems),
        by_name=ManifestsByName(loaded),
        renderer=renderer,
    )


#: Below this many manifests, starting worker processes costs more than it saves.
PARALLEL_MIN_MANIFESTS = 200

# The renderer a forked worker inherits from its parent (set just before the pool starts).
_WORKER_RENDERER: Renderer | None = None


def _load_all(jobs: Sequence[tuple[Path, str]], renderer: Renderer, odf_version: str) -> list[LoadedManifest]:
    """Load every manifest; large projects on several cores are split over forked workers.

    Rendering, YAML and JSON Schema validation are pure Python and hold the GIL, so threads would
    not help; fork shares the already-built renderer (macros compiled once) without pickling it.
    """
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1, 4)
    serial = (
        len(jobs) < PARALLEL_MIN_MANIFESTS
        or workers < 2
        or "fork" not in mp.get_all_start_methods()
        or threading.active_count() > 1  # forking a threaded process (a warm JVM in watch) can deadlock
    )
    if serial:
        return [load_manifest(path, rel, renderer, odf_version) for path, rel in jobs]
    global _WORKER_RENDERER
    _WORKER_RENDERER = renderer
    try:
        chunk = -(-len(jobs) // (workers * 4))
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            return list(pool.map(partial(_load_in_worker, odf_version=odf_version), jobs, chunksize=chunk))
    except (OSError, BrokenProcessPool):  # no fork allowed here (sandbox, limits): do it serially
        return [load_manifest(path, rel, renderer, odf_version) for path, rel in jobs]
    finally:
        _WORKER_RENDERER = None


def _from_cache(cache: ParseCache, path: Path, rel_path: str) -> tuple[LoadedManifest | None, str | None]:
    """The manifest as the parse cache remembers it, or None and the key to remember it under.

    A file that cannot be read or decoded has no key: loading it reports why.
    """
    try:
        data = path.read_bytes()
        source = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None, None
    key = cache.key_of(rel_path, data, source)
    hit = cache.get(rel_path, key, source)
    if hit is None:
        return None, key
    manifest = LoadedManifest(
        path=path,
        rel_path=rel_path,
        rendered_text=hit.rendered,
        snapshot=hit.snapshot,
        problems=(),
        name=hit.snapshot.name,
        source_text=source,
        source_map=deferred_source_map(hit.rendered, rel_path),
        definition_digest=hit.digest,
    )
    return manifest, None


class _SourceMapLater:
    """Builds the source map of a rendered text the first time a position is asked for."""

    def __init__(self, text: str, rel_path: str) -> None:
        self._text = text
        self._rel_path = rel_path
        self._map: SourceMap | None = None

    def part(self, name: str) -> Mapping[DocPath, tuple[int, int]]:
        if self._map is None:
            self._map = load_yaml_document(self._text.encode("utf-8"), self._rel_path).source_map
        return self._map.values if name == "values" else self._map.keys


class _SourceMapPart(Mapping[DocPath, tuple[int, int]]):
    def __init__(self, later: _SourceMapLater, name: str) -> None:
        self._later = later
        self._name = name

    def __getitem__(self, path: DocPath) -> tuple[int, int]:
        return self._later.part(self._name)[path]

    def __iter__(self) -> Iterator[DocPath]:
        return iter(self._later.part(self._name))

    def __len__(self) -> int:
        return len(self._later.part(self._name))


def deferred_source_map(text: str, rel_path: str) -> SourceMap:
    """The source map of ``text``, parsed only if a problem needs a position.

    A manifest from the parse cache has no problem of its own; only a later one (an unknown input, a
    second file with its name) asks where something is, so most never pay for a YAML parse.
    """
    later = _SourceMapLater(text, rel_path)
    return SourceMap(_SourceMapPart(later, "values"), _SourceMapPart(later, "keys"))


def _load_in_worker(job: tuple[Path, str], odf_version: str) -> LoadedManifest:
    assert _WORKER_RENDERER is not None
    return load_manifest(job[0], job[1], _WORKER_RENDERER, odf_version)


def load_manifest(
    path: Path, rel_path: str, renderer: Renderer, odf_version: str = DEFAULT_ODF_VERSION
) -> LoadedManifest:
    """Read, render, validate and parse one file; never raises for what is in the file."""
    try:
        data = path.read_bytes()
    except OSError as e:
        reason = "no such file" if isinstance(e, FileNotFoundError) else f"cannot read: {e.strerror}"
        return LoadedManifest(path, rel_path, "", None, (Problem(rel_path, 1, 1, reason),))
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        # Validation reports the exact byte; rendering is pointless.
        from odfproj.odf.validation import check_manifest

        return LoadedManifest(path, rel_path, "", None, tuple(check_manifest(data, rel_path).problems))
    return build_manifest(path, rel_path, source, renderer, odf_version)


def build_manifest(
    path: Path, rel_path: str, source: str, renderer: Renderer, odf_version: str = DEFAULT_ODF_VERSION
) -> LoadedManifest:
    """Render, validate and parse manifest text that was read from ``path`` (or from git).

    ``odf_version`` is the workspace's: it words the refusal of a construct of a newer ODF.
    """
    rendered = renderer.render(source, rel_path)
    if rendered.text is None:
        # Best effort: keep the dataset's name when the template happens to be YAML, so that
        # datasets using it as an input are not also reported as having an unknown input.
        document = load_yaml_document(source.encode("utf-8"), rel_path).document
        return LoadedManifest(
            path,
            rel_path,
            "",
            None,
            rendered.problems,
            name=_declared_name(document),
            declared_inputs=_declared_inputs(document),
            declared_keywords=_declared_keywords(document),
            source_text=source,
        )
    text = rendered.text
    # Imported here: JSON Schema and the DDL parser (pyarrow) are needed only by manifests not in the cache.
    from odfproj.odf.validation import check_manifest

    checked = check_manifest(text.encode("utf-8"), rel_path, odf_version=odf_version)
    problems = list(checked.problems)
    snapshot = None
    if not any(p.severity == "error" for p in problems):
        snapshot, problem = _parse(checked.document, rel_path)
        if problem is not None:
            problems.append(problem)
    return LoadedManifest(
        path=path,
        rel_path=rel_path,
        rendered_text=text,
        snapshot=snapshot,
        problems=tuple(problems),
        name=snapshot.name if snapshot is not None else _declared_name(checked.document),
        declared_inputs=() if snapshot is not None else _declared_inputs(checked.document),
        declared_keywords=() if snapshot is not None else _declared_keywords(checked.document),
        source_text=source,
        source_map=checked.source_map,
    )


def _parse(document: Any, rel_path: str) -> tuple[DatasetSnapshot | None, Problem | None]:
    """Validation passed, so parsing should too; if the two ever disagree, report it, don't crash.

    Builds the model from the document validation already loaded: YAML is parsed once per file.
    """
    try:
        snapshot, _ = manifest_from_data(document, expected_kind="DatasetSnapshot")
    except (InvalidValueError, ValueError) as e:
        return None, Problem(rel_path, 1, 1, str(e))
    return snapshot, None


def _declared_name(document: Any) -> str | None:
    content = document.get("content") if isinstance(document, dict) else None
    name = content.get("name") if isinstance(content, dict) else None
    if not isinstance(name, str):
        return None
    try:
        DatasetAlias.parse(name)
    except InvalidValueError:
        return None
    return name


def _last_event(document: Any, kind: str) -> dict[str, Any]:
    """The last event of ``kind`` in a document's ``content.metadata`` (event kinds are case-insensitive)."""
    content = document.get("content") if isinstance(document, dict) else None
    metadata = content.get("metadata") if isinstance(content, dict) else None
    found: dict[str, Any] = {}
    for event in metadata if isinstance(metadata, list) else ():
        if isinstance(event, dict) and str(event.get("kind", "")).lower() == kind.lower():
            found = event
    return found


def _declared_inputs(document: Any) -> tuple[str, ...]:
    inputs = _last_event(document, "SetTransform").get("inputs")
    refs = (i.get("datasetRef") for i in inputs if isinstance(i, dict)) if isinstance(inputs, list) else ()
    return tuple(r for r in refs if isinstance(r, str) and r)


def _declared_keywords(document: Any) -> tuple[str, ...]:
    keywords = _last_event(document, "SetInfo").get("keywords")
    return tuple(k for k in keywords if isinstance(k, str)) if isinstance(keywords, list) else ()


def _duplicate_problems(manifests: Sequence[LoadedManifest]) -> list[Problem]:
    """A name defined twice is reported at the later file, naming both files."""
    first: dict[str, LoadedManifest] = {}
    problems = []
    for manifest in manifests:
        if manifest.name is None:
            continue
        earlier = first.setdefault(manifest.name.lower(), manifest)
        if earlier is not manifest:
            problems.append(
                manifest.problem_at(
                    _NAME_PATH,
                    f"dataset {manifest.name!r} is defined twice: in {earlier.rel_path} and {manifest.rel_path}",
                )
            )
    return problems


def _manifest_paths(config: ProjectConfig, files: Sequence[Path] | None) -> list[Path]:
    """The given files (relative ones are relative to the project root), or every discovered manifest.

    Discovery (``ProjectConfig.manifest_files``) skips odfproj.yaml, ``macros/`` and the workspace.
    """
    if files is not None:
        return [path if path.is_absolute() else config.root / path for path in files]
    return config.manifest_files()


def _rel_path(path: Path, root: Path) -> str:
    text, prefix = str(path), str(root) + os.sep
    if text.startswith(prefix) and f"{os.sep}..{os.sep}" not in f"{text}{os.sep}":
        return text[len(prefix) :].replace(os.sep, "/")  # the common case, without touching the disk
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
