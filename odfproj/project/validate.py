"""Validate manifests: each file on its own, then the set (unique names, known inputs, no cycles).

Inside a project, files are validated as ``plan`` reads them: rendered with the project's vars,
macros and declared environment, inside the project boundary. Files outside any project are
validated as plain YAML.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odfproj.odf import model
from odfproj.odf.yaml_codec import from_data, load_yaml
from odfproj.odf.yaml_source import Problem
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph
from odfproj.project.manifests import LoadedManifest, load_manifests


@dataclass(frozen=True)
class ValidationReport:
    files: tuple[Path, ...]
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given; folders become the YAML files below them."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*.y*ml") if p.is_file()))
        else:
            out.append(path)
    return out


def validate_project(
    config: ProjectConfig,
    *,
    files: Sequence[Path] | None = None,
    vars_override: Mapping[str, Any] | None = None,
    target: str | None = None,
) -> ValidationReport:
    """Render and validate the project's manifests (or just ``files``), as ``plan`` would read them.

    The whole project is also checked as a graph: every input must have a manifest in the project
    (a typo gets a "did you mean"), and there must be no cycle. With ``files`` only those are
    checked, each on its own: their inputs may live in files that were not given. The workspace is
    never opened, so a dataset whose manifest was deleted is an unknown input here.
    """
    manifests = load_manifests(config, vars_override=vars_override, target=target, files=files)
    problems = list(manifests.problems)
    for manifest in manifests.manifests:
        if manifest.snapshot is not None and not manifest.problems:
            problems.extend(_untranslatable_in(manifest))
    if files is None:
        problems.extend(DatasetGraph.build(manifests).problems)
    listed = tuple(m.path for m in manifests.manifests)
    return ValidationReport(listed, tuple(sorted(problems, key=lambda p: (p.file, p.line, p.col, p.message))))


def validate_files(files: Iterable[Path], display_root: Path | None = None) -> ValidationReport:
    """Validate files that belong to no project: plain YAML, no rendering."""
    from odfproj.odf.validation import validate_manifest

    files = tuple(files)
    problems: list[Problem] = []
    names: dict[str, str] = {}
    for path in files:
        shown = _display(path, display_root)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            problems.append(Problem(shown, 1, 1, "no such file"))
            continue
        except OSError as e:
            problems.append(Problem(shown, 1, 1, f"cannot read: {e.strerror}"))
            continue
        found = validate_manifest(data, shown)
        problems.extend(found)
        if not found:
            _check_unique_name(data, shown, names, problems)
            problems.extend(untranslatable_queries(data, shown))
    return ValidationReport(files, tuple(problems))


def _untranslatable_in(manifest: LoadedManifest) -> list[Problem]:
    """``untranslatable_queries`` of a loaded manifest, read from its snapshot (parsed once, or cached).

    The snapshot's events are the document's, in order, so the positions are the same.
    """
    assert manifest.snapshot is not None
    problems = []
    for index, event in enumerate(manifest.snapshot.metadata):
        for key in _QUERY_FIELDS:
            transform = getattr(event, key, None)
            if not isinstance(transform, model.TransformSql) or _runs_as_written(transform):
                continue
            from odfproj.engine.dialects import UntranslatableQueryError, to_spark

            try:
                to_spark(transform)
            except UntranslatableQueryError as e:
                line, col = manifest.position(("content", "metadata", index, key, "engine"))
                message = f"dataset {manifest.snapshot.name}: the {key} query: {e}"
                problems.append(Problem(manifest.rel_path, line, col, message))
    return problems


#: The event fields that hold a query: a derivative's transform, a root's preprocess.
_QUERY_FIELDS = ("transform", "preprocess")


def _runs_as_written(transform: model.TransformSql) -> bool:
    """Spark SQL, which needs no translation: what ``engine.dialects.is_spark`` says, asked here first so
    that validating a project written for Spark never imports the SQL translator (sqlglot, ~0.3 s)."""
    return transform.engine.strip().lower() == "spark"


def untranslatable_queries(data: bytes, shown: str) -> list[Problem]:
    """A query written for another engine that cannot run on Spark with the same meaning (engine.dialects).

    Checked here, without an engine, so ``validate`` refuses it as early as ``plan`` does.
    """
    from odfproj.engine.dialects import UntranslatableQueryError, to_spark
    from odfproj.odf.validation import check_manifest

    loaded = check_manifest(data, shown)
    content = (loaded.document or {}).get("content") or {}
    problems = []
    for index, event in enumerate(content.get("metadata") or ()):
        for key in _QUERY_FIELDS:
            transform = event.get(key) if isinstance(event, dict) else None
            if not isinstance(transform, dict) or str(transform.get("kind", "")).lower() != "sql":
                continue
            try:
                to_spark(from_data("TransformSql", {k: v for k, v in transform.items() if k != "kind"}))
            except UntranslatableQueryError as e:
                line, col = loaded.source_map.nearest(("content", "metadata", index, key, "engine"))
                problems.append(
                    Problem(shown, line, col, f"dataset {content.get('name')}: the {key} query: {e}")
                )
    return problems


def _check_unique_name(data: bytes, shown: str, names: dict, problems: list[Problem]) -> None:
    content = (load_yaml(data) or {}).get("content") or {}
    raw = content.get("name")
    if not isinstance(raw, str):
        return
    key = raw.lower()  # dataset names are case-insensitive (spec, Aliases and References)
    if key in names:
        problems.append(Problem(shown, 1, 1, f"dataset {raw!r} is also defined by {names[key]}"))
    else:
        names[key] = shown


def _display(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(path)
