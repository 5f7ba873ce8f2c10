"""The project boundary: the only files validate and plan may read are the project's own.

A pull request controls every file of the checkout, symlinks included, so a manifest, a macro or a
glob could otherwise make CI read ``/etc/passwd`` or ``.git/config`` (where CI checkouts keep the job
token) and print it in a plan comment. Each path is therefore judged after symlinks are resolved:
it must lie inside the project root and outside ``.git``. The same rule serves manifests, macros
and globs, so there is one place to get it right.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath

__all__ = ["FolderResolver", "glob_refusal", "path_refusal"]

#: Folders under the root that are never project files (git keeps credentials there).
PRIVATE_DIRS = frozenset({".git"})


class FolderResolver:
    """``Path.resolve`` for many files in few folders: each folder is resolved once, and a file that is
    not a symlink costs one ``lstat`` (resolving walks every component of the path with one each).

    Gives what ``Path.resolve`` gives. Keep one only as long as the folders cannot change (one
    command's listing of the project), since it remembers them.
    """

    def __init__(self) -> None:
        self._folders: dict[str, str] = {}

    def __call__(self, path: Path) -> Path:
        text = os.fspath(path)  # strings inside: a Path per step would cost more than the lstat saved
        if not os.path.isabs(text):
            text = os.path.join(os.getcwd(), text)
        folder, name = os.path.split(text)
        if name in ("", ".", ".."):
            return Path(text).resolve()
        try:
            if stat.S_ISLNK(os.lstat(text).st_mode):
                return Path(text).resolve()
        except OSError:
            return Path(text).resolve()  # missing: resolve() says how (a broken link, a loop)
        resolved = self._folders.get(folder)
        if resolved is None:
            resolved = self._folders[folder] = str(Path(folder).resolve())
        return Path(os.path.join(resolved, name))


def path_refusal(path: Path, root: Path, resolve: Callable[[Path], Path] = Path.resolve) -> str | None:
    """Why the project may not read ``path``, or None when it may.

    ``root`` must already be resolved. A broken symlink resolves to its (missing) target, which is
    judged like any other path. ``resolve`` may be a ``FolderResolver`` when many files are judged.
    """
    try:
        resolved = resolve(path)
    except (OSError, RuntimeError):  # a symlink loop
        return "refused: a symlink loop"
    # Compared as text (both are resolved, absolute and normal): a plan of ten thousand manifests
    # judges each, and Path.relative_to would build three Paths a file.
    text, base = os.fspath(resolved), os.fspath(root)
    prefix = base if base.endswith(os.sep) else base + os.sep
    if text != base and not text.startswith(prefix):
        via = " through a symlink" if path.absolute().is_relative_to(root) else ""
        return f"refused: resolves outside the project folder{via}; only files inside it are read"
    first = text[len(prefix) :].split(os.sep, 1)[0] if text != base else ""
    if first in PRIVATE_DIRS:
        return f"refused: resolves into {first}/, which the project never reads"
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
