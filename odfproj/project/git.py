"""Read files as they were at a git revision, for ``--changed-since``. Never writes to the repository.

A thin wrapper over gitpython so the rest of the project layer sees two questions only: which
repository holds this project, and what did this file contain at that revision. Revisions are
resolved by the ``git`` binary (``rev-parse``), so everything git accepts works: branches, tags,
``HEAD~3``, ``origin/main``, ``main@{yesterday}``, abbreviated hashes.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import git

from odfproj.errors import OdfprojError

__all__ = ["GitError", "GitRepository", "find_repo"]


class GitError(OdfprojError):
    """A revision or path that git does not know."""


class GitRepository:
    """A working-tree repository; resolved revisions are cached, so ask for many files cheaply."""

    def __init__(self, repo: git.Repo) -> None:
        if repo.working_tree_dir is None:
            raise GitError(f"{repo.git_dir}: a bare repository has no working tree")
        self._repo = repo
        self.root = Path(repo.working_tree_dir).resolve()
        self._commits: dict[str, git.Commit] = {}

    def __enter__(self) -> GitRepository:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the ``git cat-file`` helper processes gitpython keeps running."""
        self._repo.close()

    def resolve(self, ref: str) -> str:
        """The full commit hash ``ref`` names; ``GitError`` "unknown git revision" otherwise."""
        return self._commit(ref).hexsha

    def file_at(self, ref: str, path: Path | str) -> str | None:
        """The text of ``path`` at revision ``ref``, or None when the file did not exist there.

        ``path`` is absolute or relative to the repository root. Bytes that are not UTF-8 are
        replaced, which is enough to tell that the file differs.
        """
        rel = self.relative(path)
        try:
            blob = self._commit(ref).tree / rel
        except KeyError:
            return None
        if blob.type != "blob":
            return None
        return blob.data_stream.read().decode("utf-8", errors="replace")

    def files_at(self, ref: str, folder: Path | str) -> dict[str, str]:
        """Every file below ``folder`` at ``ref``: repository-relative path -> text (empty if absent)."""
        rel = self.relative(folder)
        try:
            tree = self._commit(ref).tree / rel if rel not in ("", ".") else self._commit(ref).tree
        except KeyError:
            return {}
        if tree.type != "tree":
            return {}
        return {
            item.path: item.data_stream.read().decode("utf-8", errors="replace")
            for item in tree.traverse()
            if item.type == "blob"
        }

    def relative(self, path: Path | str) -> str:
        """``path`` relative to the repository root, in git's ``/`` form."""
        candidate = Path(path)
        if not candidate.is_absolute():
            return candidate.as_posix()
        # Try the path as given first: resolving would follow a symlinked manifest to its target.
        for absolute in (candidate.absolute(), candidate.resolve()):
            if absolute.is_relative_to(self.root):
                return absolute.relative_to(self.root).as_posix()
        raise GitError(f"{path} is not inside the git repository {self.root}")

    def _commit(self, ref: str) -> git.Commit:
        cached = self._commits.get(ref)
        if cached is not None:
            return cached
        if not ref or ref.startswith("-") or any(c.isspace() or c == "\0" for c in ref):
            raise GitError(f"unknown git revision {ref!r}")
        import git  # GitPython runs `git --version` on import: only pay for it when git is used

        try:
            sha = self._repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")
        except git.GitCommandError:
            raise GitError(f"unknown git revision {ref!r}{self._shallow_hint()}") from None
        commit = self._repo.commit(sha)
        self._commits[ref] = commit
        return commit

    def _shallow_hint(self) -> str:
        if (Path(self._repo.git_dir) / "shallow").exists():
            return " (this is a shallow clone: fetch the revision first, e.g. git fetch --unshallow)"
        return ""


def find_repo(path: Path) -> GitRepository | None:
    """The repository whose working tree contains ``path``, or None (no repository, or a bare one)."""
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if repo.working_tree_dir is None:
        repo.close()
        return None
    return GitRepository(repo)
