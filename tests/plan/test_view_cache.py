"""The view cache (plan.view_cache): an unchanged chain's ChainView is not read again, a changed one always is.

A real project is applied to a real workspace (definitions only: no engine), then the workspace is read
for planning several times; ``_view_of`` is wrapped to count the views really built from the chains.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from odfproj.plan import view_cache, workspace_state
from odfproj.plan.apply_record import APPLY_RECORD
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.plan.workspace_state import WorkspaceState, load_workspace_state
from odfproj.project import user_cache as cache_files
from odfproj.project.config import ProjectConfig, load_project
from odfproj.project.user_cache import write_checked
from odfproj.run.apply import apply_plan
from odfproj.storage.workspace import Workspace
from tests import manifests

FILES = {
    "org.views.a": manifests.root("org.views.a", path="data/a/*.csv", schema=("id BIGINT",)),
    "org.views.b": manifests.root("org.views.b", path="data/b/*.csv", schema=("id BIGINT",)),
    "org.views.c": manifests.derivative("org.views.c", ["org.views.a"], "SELECT * FROM `org.views.a`"),
}


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(cache_files.CACHE_ENV, raising=False)
    monkeypatch.setattr(view_cache, "MIN_DATASETS", 1)
    return home


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = workspace_state._view_of

    def counting(dataset: Any) -> Any:
        seen.append(dataset.name)
        return real(dataset)

    monkeypatch.setattr(workspace_state, "_view_of", counting)
    return seen


def _apply(config: ProjectConfig) -> None:
    plan, _ = plan_project(config, PlanRequest())
    workspace = Workspace(config.workspace())
    with workspace.lock():
        apply_plan(plan, workspace)


@pytest.fixture
def project(tmp_path: Path) -> ProjectConfig:
    root = tmp_path / "project"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: views\n")
    for name, text in FILES.items():
        (root / "datasets" / f"{name}.yaml").write_text(text)
    config = load_project(root)
    _apply(config)
    return config


def _state(config: ProjectConfig) -> WorkspaceState:
    return load_workspace_state(config.workspace())


def test_an_unchanged_workspace_is_read_from_the_cache_as_it_was_built(project, built, cache_home):
    first = _state(project)
    assert sorted(built) == sorted(FILES)
    built.clear()
    second = _state(project)
    assert built == []
    assert second == first
    assert second.views["org.views.c"].input_offsets == first.views["org.views.c"].input_offsets
    assert list((cache_home / "odfproj" / "plan").glob("*.pickle"))


def test_a_new_block_builds_that_view_again(project, built):
    _state(project)
    path = project.root / "datasets" / "org.views.b.yaml"
    path.write_text(manifests.root("org.views.b", path="data/b/*.csv", schema=("id BIGINT", "v STRING")))
    _apply(project)
    built.clear()
    cached = _state(project)
    assert built == ["org.views.b"]
    assert cached == WorkspaceState(*_uncached(project))


def _uncached(config: ProjectConfig) -> tuple[Any, ...]:
    os.environ[cache_files.CACHE_ENV] = "off"
    try:
        state = _state(config)
    finally:
        del os.environ[cache_files.CACHE_ENV]
    return state.views, state.names, state.total


def test_a_rewritten_apply_record_builds_that_view_again(project, built):
    _state(project)
    dataset = Workspace(project.workspace()).open("org.views.a", recover=False)
    record = dataset.read_info(APPLY_RECORD)
    dataset.write_info(APPLY_RECORD, record + b" ")  # same meaning, another file: the stamp differs
    built.clear()
    _state(project)
    assert built == ["org.views.a"]


class _Hostile:
    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.canary}",))


def _cache_file(cache_home: Path) -> Path:
    (found,) = (cache_home / "odfproj" / "plan").glob("*.pickle")
    return found


@pytest.mark.parametrize("content", ["garbage", "truncated", "hostile"])
def test_a_corrupt_or_hostile_cache_is_ignored(project, built, cache_home, tmp_path, content):
    first = _state(project)
    path = _cache_file(cache_home)
    canary = tmp_path / "canary"
    if content == "garbage":
        path.write_bytes(b"not a cache")
    elif content == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
    else:  # a valid digest over a pickle that would run a command if it were loaded blindly
        body = pickle.dumps(_Hostile(canary))
        assert not canary.exists() and pickle.loads is not None
        assert write_checked(path, body)
        with pytest.raises(pickle.UnpicklingError):
            view_cache._ViewUnpickler(io.BytesIO(body)).load()
    built.clear()
    assert _state(project) == first
    assert sorted(built) == sorted(FILES)
    assert not canary.exists()
    built.clear()
    _state(project)
    assert built == [], "the unusable file was not replaced"


def test_a_small_workspace_is_not_cached(project, built, cache_home, monkeypatch):
    monkeypatch.setattr(view_cache, "MIN_DATASETS", len(FILES) + 1)
    _state(project)
    built.clear()
    _state(project)
    assert sorted(built) == sorted(FILES)
    assert not (cache_home / "odfproj" / "plan").exists()


def test_a_cached_view_unpickles_its_events_only_when_they_are_read(project):
    built = _state(project).views["org.views.c"]
    cached = _state(project).views["org.views.c"]
    events = cached.definition_events
    assert isinstance(events, view_cache.StoredEvents) and events._events is None
    assert cached == built  # compared as the tuple it stands for: this reads them
    assert events._events is not None
    assert tuple(events) == built.definition_events and len(events) == len(built.definition_events)
    assert pickle.loads(pickle.dumps(events)).pickled == events.pickled  # kept as its bytes
    assert repr(cached) == repr(built)  # shown as the events, not as bytes


def test_stored_events_build_nothing_but_what_a_view_holds(tmp_path):
    canary = tmp_path / "canary"
    stored = view_cache.StoredEvents(pickle.dumps((_Hostile(canary),)))
    with pytest.raises(pickle.UnpicklingError):
        list(stored)
    assert not canary.exists()


def test_a_view_whose_events_cannot_be_pickled_is_not_kept(project, built, monkeypatch):
    _state(project)

    def refuse(cls: Any, events: Any) -> Any:
        raise pickle.PicklingError("not today")

    monkeypatch.setattr(view_cache.StoredEvents, "of", classmethod(refuse))
    path = project.root / "datasets" / "org.views.b.yaml"
    path.write_text(manifests.root("org.views.b", path="data/b/*.csv", schema=("id BIGINT", "w STRING")))
    _apply(project)
    built.clear()
    cached = _state(project)
    assert built == ["org.views.b"]
    built.clear()
    _state(project)
    assert built == ["org.views.b"], "kept although its events could not be pickled"
    assert cached == WorkspaceState(*_uncached(project))
