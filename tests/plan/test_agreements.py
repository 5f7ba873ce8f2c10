"""Agreements (plan.diff.Agreement): a dataset whose manifest and chain are both unchanged since the last
plan is compared by digest, not diffed, and the plan is byte for byte the plan made without any cache.

A project of 24 datasets (the parse and view caches start at 20) is applied to a real workspace
(definitions only: no engine). ``diff_dataset`` is wrapped to count the datasets really diffed, and
``StoredEvents.events`` to count the chains whose events were unpickled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from odfproj.plan import planner, view_cache
from odfproj.plan.model import Plan
from odfproj.plan.render import render_json, render_markdown, render_text
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project import user_cache
from odfproj.project.config import ProjectConfig, load_project
from odfproj.run.apply import apply_plan
from odfproj.run.destroy import destroy, destroy_plan
from odfproj.storage.workspace import Workspace
from tests import manifests

ROOTS = [f"org.agree.r{i}" for i in range(4)]
DERIVATIVES = [f"org.agree.d{i:02d}" for i in range(20)]


def _root(name: str, description: str = "a root {{ var('suffix') }}") -> str:
    return manifests.root(
        name,
        path=f"data/{name}/*.csv",
        schema=("id BIGINT", "v STRING"),
        extra=[manifests.set_info(description)],
    )


def _derivative(i: int, query: str = "SELECT id, v FROM src", description: str = "a derivative") -> str:
    source = ROOTS[i % len(ROOTS)] if i < 8 else DERIVATIVES[i - 8]
    return manifests.derivative(
        DERIVATIVES[i], {"src": source}, query, extra=[manifests.set_info(description)]
    )


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(user_cache.CACHE_ENV, raising=False)
    return home


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The datasets diffed and the chains whose events were unpickled, by the plans made since."""
    seen: dict[str, list[str]] = {"diffed": [], "unpickled": []}
    diff = planner.diff_dataset

    def diffing(snapshot: Any, *args: Any) -> Any:
        seen["diffed"].append(snapshot.name)
        return diff(snapshot, *args)

    events = view_cache.StoredEvents.events

    def unpickling(self: view_cache.StoredEvents) -> Any:
        if self._events is None:
            seen["unpickled"].append("a chain")
        return events(self)

    monkeypatch.setattr(planner, "diff_dataset", diffing)
    monkeypatch.setattr(view_cache.StoredEvents, "events", unpickling)
    return seen


def _write(root: Path, name: str, text: str) -> None:
    (root / "datasets" / f"{name}.yaml").write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> ProjectConfig:
    root = tmp_path / "project"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: agree\nvars:\n  suffix: v1\n")
    for name in ROOTS:
        _write(root, name, _root(name))
    for i in range(len(DERIVATIVES)):
        _write(root, DERIVATIVES[i], _derivative(i))
    config = load_project(root)
    _apply(config)
    return config


def _apply(config: ProjectConfig) -> None:
    plan, _ = plan_project(config, PlanRequest())
    workspace = Workspace(config.workspace())
    with workspace.lock():
        apply_plan(plan, workspace)


def _plan(config: ProjectConfig) -> Plan:
    return plan_project(config, PlanRequest())[0]


def _outputs(plan: Plan) -> tuple[str, ...]:
    """What ``odfproj plan`` prints in each format (the JSON without the moment it was made)."""
    data = json.loads(render_json(plan))
    data.pop("created_at", None)
    return (
        render_text(plan, show_unchanged=False),
        render_text(plan, show_unchanged=True),
        render_markdown(plan, show_unchanged=True),
        json.dumps(data, sort_keys=True),
    )


def _without_caches(config: ProjectConfig, monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    with monkeypatch.context() as m:
        m.setenv(user_cache.CACHE_ENV, "off")
        return _outputs(_plan(config))


def test_an_unchanged_project_diffs_nothing_and_unpickles_no_chain(project, counted, monkeypatch):
    first = _outputs(_plan(project))  # the chains moved with apply: every view is built and diffed
    assert sorted(counted["diffed"]) == sorted(ROOTS + DERIVATIVES)
    counted["diffed"].clear()
    second = _outputs(_plan(project))
    assert counted == {"diffed": [], "unpickled": []}
    assert second == first == _without_caches(project, monkeypatch)
    assert "No changes." in second[0]


@pytest.mark.parametrize("change", ["description", "query", "an event removed", "a var the roots render"])
def test_a_changed_manifest_is_diffed_and_plans_as_without_caches(project, counted, monkeypatch, change):
    _plan(project)  # the agreements of the applied chains
    root = project.root
    changed = [DERIVATIVES[5]]  # reads ROOTS[1]
    if change == "description":
        _write(root, DERIVATIVES[5], _derivative(5, description="another description"))
    elif change == "query":
        _write(root, DERIVATIVES[5], _derivative(5, query="SELECT id FROM src"))
    elif change == "an event removed":  # its chain keeps the SetInfo: an unchanged step that shows a change
        _write(
            root,
            DERIVATIVES[5],
            manifests.derivative(DERIVATIVES[5], {"src": ROOTS[1]}, "SELECT id, v FROM src"),
        )
    else:
        (root / "odfproj.yaml").write_text("name: agree\nvars:\n  suffix: v2\n")
        project = load_project(root)
        changed = ROOTS
    for _ in range(2):  # the second time, no agreement was found for them: diffed again, the rest not
        counted["diffed"].clear()
        counted["unpickled"].clear()
        cached = _outputs(_plan(project))
        assert sorted(counted["diffed"]) == sorted(changed)
        assert len(counted["unpickled"]) == len(changed)
        assert cached == _without_caches(project, monkeypatch)
    if change != "an event removed":
        assert all(f"~ {name}" in cached[0] for name in changed)
    else:
        assert "cannot be removed from the chain; kept" in cached[3]  # the JSON form lists it


def test_an_applied_change_rebuilds_that_view_and_plans_as_without_caches(project, counted, monkeypatch):
    _plan(project)
    _write(project.root, DERIVATIVES[7], _derivative(7, description="applied"))
    _apply(project)
    counted["diffed"].clear()
    cached = _outputs(_plan(project))
    assert counted["diffed"] == [DERIVATIVES[7]]  # its chain moved: its view is new, with no agreement
    assert cached == _without_caches(project, monkeypatch)


def test_an_input_recreated_with_another_id_is_diffed_although_nothing_else_changed(
    project, counted, monkeypatch
):
    """The reader's manifest and chain are unchanged, but its input's name now resolves to another id
    (or to none): the agreement names the ids, so the reader is diffed, not taken as unchanged."""
    _plan(project)
    reader = DERIVATIVES[0]  # reads ROOTS[0]
    destroy(destroy_plan(project, [ROOTS[0]]))
    counted["diffed"].clear()
    gone = _outputs(_plan(project))
    assert reader in counted["diffed"]
    assert gone == _without_caches(project, monkeypatch)
    workspace = Workspace(project.workspace())
    with workspace.lock():  # the root again, under its name, with a new id; the reader's chain untouched
        plan = _plan(project)
        apply_plan(
            Plan(plan.project, plan.workspace, tuple(s for s in plan.steps if s.dataset == ROOTS[0])),
            workspace,
        )
    counted["diffed"].clear()
    again = _outputs(_plan(project))
    assert reader in counted["diffed"]
    assert again == _without_caches(project, monkeypatch)
    assert f"~ {reader}" in again[0]
