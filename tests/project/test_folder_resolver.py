"""FolderResolver gives what Path.resolve gives, for every kind of path a manifest glob or a user can name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odfproj.project.boundary import FolderResolver


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f.yaml").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "a")  # a symlinked folder
    (tmp_path / "a" / "b" / "out.yaml").symlink_to("/etc/hostname")  # a symlinked file, outside
    (tmp_path / "a" / "b" / "loop.yaml").symlink_to(tmp_path / "a" / "b" / "loop.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


PATHS = [
    "a/b/f.yaml",
    "link/b/f.yaml",
    "link/b/../b/f.yaml",
    "a/./b/f.yaml",
    "a/b/out.yaml",
    "a/b/missing.yaml",
    "a/b/..",
    "a/b/",
]


@pytest.mark.parametrize("relative", PATHS)
def test_the_same_path_as_resolve(tree, relative):
    resolve = FolderResolver()
    for path in (Path(relative), tree / relative):
        assert resolve(path) == path.resolve()
        assert resolve(path) == path.resolve(), "a second call, from the remembered folder"


def test_a_symlink_loop_raises_as_resolve_does(tree):
    path = tree / "a" / "b" / "loop.yaml"
    with pytest.raises((OSError, RuntimeError)):
        path.resolve()
    with pytest.raises((OSError, RuntimeError)):
        FolderResolver()(path)


def test_a_file_that_becomes_a_symlink_is_resolved_through_it(tree):
    resolve = FolderResolver()
    path = tree / "a" / "b" / "f.yaml"
    assert resolve(path) == path
    path.unlink()
    os.symlink("/etc/hostname", path)
    assert resolve(path) == Path("/etc/hostname").resolve()
