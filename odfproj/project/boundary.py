"""The project boundary: the only files validate and plan may read are the project's own.

A pull request controls every file of the checkout, symlinks included, so a manifest, a macro or a
glob could otherwise make CI read ``/etc/passwd`` or ``.git/config`` (where CI checkouts keep the job
token) and print it in a plan comment. Each path is therefore judged after symlinks are resolved:
it must lie inside the project root and outside ``.git``. The same rule serves manifests, macros
and globs, so there is one place to get it right.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

__all__ = ["glob_refusal", "path_refusal"]

#: Folders under the root that are never project files (git keeps credentials there).
PRIVATE_DIRS = frozenset({".git"})


def path_refusal(path: Path, root: Path) -> str | None:
    """Why the project may not read ``path``, or None when it may.

    ``root`` must already be resolved. A broken symlink resolves to its (missing) target, which is
    judged like any other path.
    """
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return "refused: a symlink loop"
    if not resolved.is_relative_to(root):
        via = " through a symlink" if path.absolute().is_relative_to(root) else ""
        return f"refused: resolves outside the project folder{via}; only files inside it are read"
    inside = resolved.relative_to(root).parts
    if inside and inside[0] in PRIVATE_DIRS:
        return f"refused: resolves into {inside[0]}/, which the project never reads"
    return None


def glob_refusal(pattern: str) -> str | None:
    """Why a ``manifests:`` glob is not allowed: it must be relative and may not climb out with ``..``."""
    if (
        PurePosixPath(pattern).is_absolute()
        or PureWindowsPath(pattern).is_absolute()
        or pattern.startswith("~")
    ):
        return f"manifests glob {pattern!r} is absolute; globs are relative to the project folder"
    if ".." in PurePosixPath(pattern.replace("\\", "/")).parts:
        return f"manifests glob {pattern!r} climbs out of the project folder with '..'"
    return None
