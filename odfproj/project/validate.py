"""Validate a set of manifests: each file on its own, then the set (one manifest per dataset name)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from odfproj.odf.validation import Problem, validate_manifest
from odfproj.odf.yaml_codec import load_yaml


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
    return ValidationReport(files, tuple(problems))


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
