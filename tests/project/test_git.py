"""The git wrapper, on real repositories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from odfproj.project.git import GitError, find_repo
from tests.project.conftest import commit_all


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[git.Repo]:
    repo = git.Repo.init(tmp_path / "repo")
    root = Path(repo.working_tree_dir or "")
    (root / "sub").mkdir()
    (root / "sub/a.yaml").write_text("one\n")
    commit_all(repo, "one")
    (root / "sub/a.yaml").write_text("two\n")
    (root / "sub/b.yaml").write_text("new\n")
    commit_all(repo, "two")
    yield repo
    repo.close()


def test_find_repo_from_a_subfolder(repo: git.Repo, tmp_path: Path) -> None:
    with find_repo(tmp_path / "repo" / "sub") as found:  # type: ignore[union-attr]
        assert found.root == (tmp_path / "repo").resolve()
    assert find_repo(tmp_path) is None


def test_file_at_revisions(repo: git.Repo, tmp_path: Path) -> None:
    with find_repo(tmp_path / "repo") as found:  # type: ignore[union-attr]
        assert found.file_at("HEAD", "sub/a.yaml") == "two\n"
        assert found.file_at("HEAD~1", tmp_path / "repo/sub/a.yaml") == "one\n"
        assert found.file_at("HEAD~1", "sub/b.yaml") is None
        assert found.file_at("HEAD", "sub") is None  # a folder is not a file
        assert found.resolve("HEAD") == repo.head.commit.hexsha
        first = repo.head.commit.parents[0].hexsha
        assert found.file_at(first[:8], "sub/a.yaml") == "one\n"


def test_unknown_revisions_and_outside_paths(repo: git.Repo, tmp_path: Path) -> None:
    with find_repo(tmp_path / "repo") as found:  # type: ignore[union-attr]
        for ref in ("nope", "HEAD~5", "--output=/tmp/x", "", "a b"):
            with pytest.raises(GitError, match=f"^unknown git revision {ref!r}"):
                found.file_at(ref, "sub/a.yaml")
        with pytest.raises(GitError, match="is not inside the git repository"):
            found.file_at("HEAD", tmp_path / "elsewhere.yaml")
