"""``odfproj init``: a new project from the packaged skeleton (``odfproj/resources/templates/project``).

The skeleton is package data so that an installed wheel can scaffold without the source tree. Two
conventions keep it packageable (see the templates' README): a leading ``dot-`` in a name stands for
``.`` (package-data globs skip hidden files), and ``%%NAME%%`` placeholders are the only thing that is
substituted, so manifests' Jinja and the workflow's ``${{ }}`` are copied untouched.

Init never overwrites: every target path is checked BEFORE the first write, and files are created
with exclusive mode, so an existing file is never touched and a refused init writes nothing at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath

from odfproj import __version__
from odfproj.errors import OdfprojError

__all__ = [
    "ODFPROJ_REPOSITORY",
    "ScaffoldError",
    "ScaffoldResult",
    "TemplateFile",
    "project_name_for",
    "render_skeleton",
    "scaffold_project",
]

#: Where odfproj (and its pre-commit hooks) are published; the scaffolded CI installs odfproj from it
#: and the scaffolded pre-commit config uses its hooks.
ODFPROJ_REPOSITORY = "https://github.com/odfproj/odfproj"
_TEMPLATE_PACKAGE = "odfproj"
_SKELETON = ("resources", "templates", "project")
#: The packaged JSON Schemas copied into a new project's ``schemas/``, where the ``# yaml-language-server:
#: $schema=`` lines of its odfproj.yaml and manifests point (a relative path: no URL is needed).
_SCHEMAS = ("resources", "schemas")
PROJECT_SCHEMAS = ("odfproj.schema.json", "dataset-snapshot.schema.json")
_DOT_PREFIX = "dot-"
_PLACEHOLDER = re.compile(r"%%([A-Z_]+)%%")
#: Letters, digits, ``.``, ``_``, ``-`` and inner spaces: safe unquoted in odfproj.yaml and in markdown.
_PROJECT_NAME = re.compile(r"^\w(?:[\w.\- ]*[\w.\-])?$")


class ScaffoldError(OdfprojError):
    """The project cannot be created where asked (a file is in the way, a bad name...)."""


@dataclass(frozen=True)
class TemplateFile:
    """One file of the skeleton, rendered: its path in the new project and its bytes."""

    path: PurePosixPath
    data: bytes


@dataclass(frozen=True)
class ScaffoldResult:
    root: Path
    name: str
    files: tuple[PurePosixPath, ...]


def project_name_for(root: Path, name: str | None) -> str:
    """``name``, or the folder's name; refused when it would need quoting in YAML."""
    chosen = name if name is not None else root.resolve().name
    if not _PROJECT_NAME.match(chosen):
        hint = "" if name is not None else " (pass --name)"
        raise ScaffoldError(
            f"invalid project name {chosen!r}: use letters, digits, '.', '_', '-' and spaces{hint}"
        )
    return chosen


def _walk(folder: Traversable, prefix: PurePosixPath) -> Iterator[tuple[PurePosixPath, Traversable]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        name = "." + entry.name[len(_DOT_PREFIX) :] if entry.name.startswith(_DOT_PREFIX) else entry.name
        if entry.is_dir():
            yield from _walk(entry, prefix / name)
        else:
            yield prefix / name, entry


def render_skeleton(values: Mapping[str, str]) -> tuple[TemplateFile, ...]:
    """Every file of the skeleton with its placeholders replaced, and the packaged schemas its files
    name; an unknown placeholder is a bug."""
    skeleton = resources.files(_TEMPLATE_PACKAGE).joinpath(*_SKELETON)
    rendered = []
    for path, entry in _walk(skeleton, PurePosixPath()):
        text = entry.read_text(encoding="utf-8")

        def replace(match: re.Match[str], path: PurePosixPath = path) -> str:
            try:
                return values[match.group(1)]
            except KeyError:
                raise AssertionError(f"template {path}: unknown placeholder {match.group(0)}") from None

        rendered.append(TemplateFile(path, _PLACEHOLDER.sub(replace, text).encode("utf-8")))
    schemas = resources.files(_TEMPLATE_PACKAGE).joinpath(*_SCHEMAS)
    for name in PROJECT_SCHEMAS:
        rendered.append(TemplateFile(PurePosixPath("schemas", name), schemas.joinpath(name).read_bytes()))
    return tuple(rendered)


def _conflict(root: Path, rel: PurePosixPath) -> str | None:
    """Why ``rel`` cannot be created under ``root`` (a file or a non-folder in the way), or None."""
    target = root.joinpath(*rel.parts)
    if target.exists() or target.is_symlink():
        return f"{target}: already exists; odfproj init never overwrites files (nothing was written)"
    for parent in reversed(target.parents):
        if parent == root or root not in parent.parents:
            continue
        if (parent.exists() or parent.is_symlink()) and not parent.is_dir():
            return f"{parent}: exists and is not a folder; odfproj init needs one there (nothing was written)"
    return None


def scaffold_project(root: Path, name: str | None = None) -> ScaffoldResult:
    """Create a project in ``root`` (made if missing); raises ``ScaffoldError`` before writing anything
    if any file of the skeleton is already there."""
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"{root}: exists and is not a folder")
    project_name = project_name_for(root, name)
    files = render_skeleton(
        {
            "PROJECT_NAME": project_name,
            "ODFPROJ_VERSION": __version__,
            "ODFPROJ_REPOSITORY": ODFPROJ_REPOSITORY,
        }
    )
    for file in files:
        problem = _conflict(root, file.path)
        if problem is not None:
            raise ScaffoldError(problem)
    try:
        for file in files:
            target = root.joinpath(*file.path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as out:
                out.write(file.data)
    except FileExistsError as e:  # created by someone else since the check
        raise ScaffoldError(f"{e.filename}: already exists; odfproj init never overwrites files") from None
    except OSError as e:
        raise ScaffoldError(f"{e.filename or root}: cannot write: {e.strerror}") from None
    return ScaffoldResult(root, project_name, tuple(f.path for f in files))
