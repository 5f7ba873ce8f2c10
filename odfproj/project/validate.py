"""Validate a set of manifests: each file on its own, then the set (one manifest per dataset name)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from odfproj.engine.dialects import UntranslatableQueryError, to_spark
from odfproj.odf.validation import Problem, check_manifest, validate_manifest
from odfproj.odf.yaml_codec import from_data, load_yaml


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


def validate_files(files: Iterable[Path], display_root: Path | None = None) -> ValidationReport:
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


def untranslatable_queries(data: bytes, shown: str) -> list[Problem]:
    """A query written for another engine that cannot run on Spark with the same meaning (engine.dialects).

    Checked here, without an engine, so ``validate`` refuses it as early as ``plan`` does.
    """
    loaded = check_manifest(data, shown)
    content = (loaded.document or {}).get("content") or {}
    problems = []
    for index, event in enumerate(content.get("metadata") or ()):
        for key in ("transform", "preprocess"):
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
