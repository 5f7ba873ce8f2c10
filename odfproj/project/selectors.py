"""Choose which datasets a command works on: ``--select``, ``--exclude`` and ``--changed-since``.

The grammar, in one parser (``parse_selector``); an item is::

    [+][method:]value[+]

* ``value`` alone is a dataset name, case-insensitive, with shell wildcards (``com.example.*``).
* ``path:GLOB`` matches manifest paths relative to the project root (``*`` stays inside a folder,
  ``**`` crosses folders; a folder selects every manifest below it).
* ``tag:KEYWORD`` matches a ``SetInfo`` keyword, case-insensitive, wildcards allowed.
* a leading ``+`` adds everything upstream, a trailing ``+`` everything downstream.

Items are separated by spaces or given in repeated flags, and are unioned. No ``--select`` means
every dataset of the project. ``--changed-since REF`` narrows that to the manifests whose rendered
text differs from the same file rendered at ``REF`` (with the macros of ``REF`` and today's vars
and target), plus everything downstream of them; ``--exclude`` (same grammar) is subtracted last.
A selector that matches nothing is a warning, not an error: CI jobs often select optional datasets.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Literal, cast

from odfproj.errors import OdfprojError
from odfproj.odf.model import SetInfo
from odfproj.project.config import MACRO_DIR, MACRO_SUFFIXES
from odfproj.project.git import GitRepository, find_repo
from odfproj.project.graph import DatasetGraph
from odfproj.project.manifests import LoadedManifest, ProjectManifests
from odfproj.project.render import Renderer

__all__ = [
    "Selection",
    "SelectorError",
    "SelectorSpec",
    "changed_datasets",
    "parse_selector",
    "parse_selectors",
    "select",
]

Method = Literal["name", "path", "tag"]
_METHODS: tuple[Method, ...] = ("name", "path", "tag")
_ITEM = re.compile(r"(?P<up>\+)?(?:(?P<method>[A-Za-z_]+):)?(?P<value>.*?)(?P<down>\+)?")
_NAME_VALUE = re.compile(r"[A-Za-z0-9.\-/*?\[\]!]+")


class SelectorError(OdfprojError):
    """A ``--select``/``--exclude`` item that does not follow the grammar, or an unusable git setup."""


@dataclass(frozen=True)
class SelectorSpec:
    """One parsed item: ``+tag:finance+`` is method tag, value finance, upstream and downstream."""

    raw: str
    method: Method
    value: str
    upstream: bool = False
    downstream: bool = False


@dataclass(frozen=True)
class Selection:
    """The chosen datasets in topological order, and what the user should hear about."""

    names: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    unnamed: tuple[str, ...] = ()
    """Paths of the manifests whose dataset name cannot be read that the selection covers: by ``path:``,
    or because nothing narrowed it. Such a manifest cannot be planned; the loader reports it."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in {n.lower() for n in self.names}


# ------------------------------------------------------------------------------------------------
# Parsing


def parse_selector(item: str) -> SelectorSpec:
    """Parse one item; ``SelectorError`` explains what is wrong with it."""
    match = _ITEM.fullmatch(item)
    if match is None or not match.group("value"):
        raise SelectorError(f"invalid selector {item!r}: expected [+]NAME[+], path:GLOB or tag:KEYWORD")
    value = match.group("value")
    method = (match.group("method") or "name").lower()
    if method not in _METHODS:
        raise SelectorError(
            f"invalid selector {item!r}: unknown method {match.group('method')!r} (use path: or tag:, "
            "or a bare dataset name)"
        )
    if "," in value:
        raise SelectorError(
            f"invalid selector {item!r}: intersections with ',' are not supported; "
            "separate selectors with spaces to select their union"
        )
    if "+" in value:
        raise SelectorError(f"invalid selector {item!r}: '+' may only start or end a selector")
    if method == "name" and not _NAME_VALUE.fullmatch(value):
        raise SelectorError(
            f"invalid selector {item!r}: a dataset name has letters, digits, '-', '.' "
            "and wildcards (* ? [...]) only"
        )
    return SelectorSpec(item, cast(Method, method), value, bool(match.group("up")), bool(match.group("down")))


def parse_selectors(values: Iterable[str]) -> tuple[SelectorSpec, ...]:
    """Every item of every flag value (a value may hold several items separated by spaces)."""
    return tuple(parse_selector(item) for value in values for item in value.split())


# ------------------------------------------------------------------------------------------------
# Matching


def _name_matches(spec: SelectorSpec, graph: DatasetGraph) -> set[str]:
    pattern = spec.value.lower()
    return {n for n in graph.datasets if fnmatch.fnmatchcase(n.lower(), pattern)}


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """``*`` and ``?`` stay within one folder, ``**`` spans folders, ``[...]`` is a character class."""
    out = []
    for token in re.split(r"(\*\*/?|\*|\?|\[[^\]]*\])", pattern):
        if token in ("**", "**/"):
            out.append(".*" if token == "**" else "(?:.*/)?")
        elif token == "*":
            out.append("[^/]*")
        elif token == "?":
            out.append("[^/]")
        elif token.startswith("[") and token.endswith("]") and len(token) > 2:
            negate = token.startswith("[!")
            body = token[2:-1] if negate else token[1:-1]
            escaped = body.replace("\\", "\\\\").replace("[", "\\[").replace("^", "\\^")
            out.append(("[^" if negate else "[") + escaped + "]")
        else:
            out.append(re.escape(token))
    return re.compile("".join(out))


def _normalise_path_pattern(value: str, root: Path) -> str:
    candidate = Path(value)
    if candidate.is_absolute():
        try:
            value = candidate.relative_to(root).as_posix()
        except ValueError:
            return value
    while value.startswith("./"):
        value = value[2:]
    return value.rstrip("/") or "**"


def _path_manifests(spec: SelectorSpec, manifests: ProjectManifests) -> list[LoadedManifest]:
    """Every manifest file ``spec`` (a ``path:`` item) matches, named or not."""
    regex = _glob_regex(_normalise_path_pattern(spec.value, manifests.root))
    found = []
    for manifest in manifests.manifests:
        rel = PurePosixPath(manifest.rel_path)
        candidates = [str(rel), *(str(p) for p in rel.parents if str(p) != ".")]
        if any(regex.fullmatch(c) for c in candidates):
            found.append(manifest)
    return found


def _path_matches(spec: SelectorSpec, graph: DatasetGraph, manifests: ProjectManifests) -> set[str]:
    """The datasets of the matched files: a second file defining a name selects that name's dataset."""
    return {graph.canonical(m.name) for m in _path_manifests(spec, manifests) if m.name and m.name in graph}


def _unnamed_matches(spec: SelectorSpec, manifests: ProjectManifests) -> set[str]:
    """Paths of the files without a readable dataset name that ``spec`` matches (``path:`` items only)."""
    if spec.method != "path":
        return set()
    return {m.rel_path for m in _path_manifests(spec, manifests) if m.name is None}


def _keywords(manifest: LoadedManifest) -> tuple[str, ...]:
    """Keywords of the manifest's last ``SetInfo`` (a later event replaces an earlier one).

    A manifest with errors has the keywords it declares, as written (``tag:`` finds it to report it).
    """
    if manifest.snapshot is None:
        return manifest.declared_keywords
    infos = [e for e in manifest.snapshot.metadata if isinstance(e, SetInfo)]
    return (infos[-1].keywords or ()) if infos else ()


def _tag_matches(spec: SelectorSpec, graph: DatasetGraph) -> set[str]:
    pattern = spec.value.lower()
    return {
        graph.canonical(m.name or "")
        for m in _managed_manifests(graph)
        if any(fnmatch.fnmatchcase(k.lower(), pattern) for k in _keywords(m))
    }


def _managed_manifests(graph: DatasetGraph) -> list[LoadedManifest]:
    return [m for m in (graph.manifest_of(n) for n in graph.datasets) if m is not None]


def _resolve(spec: SelectorSpec, graph: DatasetGraph, manifests: ProjectManifests) -> set[str]:
    """The managed datasets one item selects, graph operators applied."""
    if spec.method == "path":
        base = _path_matches(spec, graph, manifests)
    elif spec.method == "tag":
        base = _tag_matches(spec, graph)
    else:
        base = _name_matches(spec, graph)
    result = set(base)
    for name in base:
        if spec.upstream:
            result |= graph.upstream(name)
        if spec.downstream:
            result |= graph.downstream(name)
    return {n for n in result if graph.is_managed(n)}


# ------------------------------------------------------------------------------------------------
# --changed-since


def _render_key(text: str, rel_path: str, renderer: Renderer) -> tuple[bool, str]:
    """What to compare: the rendered text, or the raw text when the template does not render."""
    result = renderer.render(text, rel_path)
    return (True, result.text) if result.text is not None else (False, text)


def _renderer_at(repo: GitRepository, ref: str, manifests: ProjectManifests) -> Renderer:
    """A renderer like the current one (vars, target, environment) but with the macros of ``ref``."""
    project_prefix = PurePosixPath(repo.relative(manifests.root))
    macros = {}
    for path, text in repo.files_at(ref, manifests.root / MACRO_DIR).items():
        rel = PurePosixPath(path).relative_to(project_prefix)
        if rel.suffix.lower() in MACRO_SUFFIXES:
            macros[rel.as_posix()] = text
    return Renderer(replace(manifests.renderer.context, macros=MappingProxyType(macros), problems=()))


def changed_datasets(
    graph: DatasetGraph, manifests: ProjectManifests, ref: str, repo_root: Path | None = None
) -> set[str]:
    """Managed datasets whose manifest renders differently at ``ref`` (or did not exist there).

    The file as it was at ``ref`` is rendered with the macros as they were at ``ref`` and the
    current vars, target and environment. So an edit to template text that renders to the same
    result selects nothing, and a macro edit selects exactly the manifests whose output it changes.
    """
    return _changed(graph, manifests, ref, repo_root)[0]


def _changed(
    graph: DatasetGraph, manifests: ProjectManifests, ref: str, repo_root: Path | None
) -> tuple[set[str], set[str]]:
    """``changed_datasets``, and the paths of the changed files whose dataset name cannot be read."""
    repo = find_repo(repo_root or manifests.root)
    if repo is None:
        raise SelectorError(f"--changed-since needs a git repository, but {manifests.root} is not inside one")
    named = [(name, graph.manifest_of(name)) for name in graph.datasets]
    unnamed = [(None, m) for m in manifests.manifests if m.name is None]
    changed: set[str] = set()
    changed_unnamed: set[str] = set()
    with repo:
        repo.resolve(ref)  # an unknown revision is an error even if the project has no manifests
        old_renderer = _renderer_at(repo, ref, manifests)
        for name, manifest in [*named, *unnamed]:
            if manifest is None:
                continue
            old = repo.file_at(ref, manifest.path)
            before = None if old is None else _render_key(old, manifest.rel_path, old_renderer)
            if before != _render_key(manifest.source_text, manifest.rel_path, manifests.renderer):
                if name is None:
                    changed_unnamed.add(manifest.rel_path)
                else:
                    changed.add(name)
    return changed, changed_unnamed


# ------------------------------------------------------------------------------------------------
# Entry point


def select(
    graph: DatasetGraph,
    manifests: ProjectManifests,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    changed_since: str | None = None,
    repo_root: Path | None = None,
) -> Selection:
    """Apply ``--select``, ``--changed-since`` and ``--exclude``; names come in topological order.

    A manifest whose dataset name cannot be read is no dataset: only ``path:`` items (or selecting
    everything) cover it, and ``Selection.unnamed`` lists it so that the caller can report it.

    Raises ``SelectorError`` for bad syntax or no git repository, ``GitError`` for an unknown
    revision, ``GraphError`` for a dependency cycle.
    """
    selected_specs = parse_selectors(select)
    excluded_specs = parse_selectors(exclude)
    warnings: list[str] = []
    if selected_specs:
        chosen: set[str] = set()
        unnamed: set[str] = set()
        for spec in selected_specs:
            found = _resolve(spec, graph, manifests)
            files = _unnamed_matches(spec, manifests)
            if not found and not files:
                warnings.append(f"--select {spec.raw!r} matched no datasets")
            chosen |= found
            unnamed |= files
    else:
        chosen = set(graph.datasets)
        unnamed = {m.rel_path for m in manifests.manifests if m.name is None}
    if changed_since is not None:
        changed, changed_unnamed = _changed(graph, manifests, changed_since, repo_root)
        if not changed and not changed_unnamed:
            warnings.append(f"no manifest changed since {changed_since!r}")
        with_downstream = set(changed)
        for name in changed:
            with_downstream |= graph.downstream(name)
        chosen &= with_downstream
        unnamed &= changed_unnamed
    for spec in excluded_specs:
        found = _resolve(spec, graph, manifests)
        files = _unnamed_matches(spec, manifests)
        if not found and not files:
            warnings.append(f"--exclude {spec.raw!r} matched no datasets")
        chosen -= found
        unnamed -= files
    return Selection(graph.topological_order(chosen), tuple(warnings), tuple(sorted(unnamed)))
