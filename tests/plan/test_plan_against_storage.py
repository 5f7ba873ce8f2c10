"""The planner against real chains in a real workspace (events applied by hand until apply exists)."""

from __future__ import annotations

import shutil

from odfproj.odf import model
from odfproj.odf.yaml_codec import from_data
from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.storage.workspace import Workspace
from tests.conftest import REPO_DIR


def _plan(config):
    return plan_project(config, PlanRequest())[0]


def _apply_by_hand(config, plan) -> None:
    workspace = Workspace(config.workspace())
    for step in plan.steps:
        if step.action is Action.CREATE:
            dataset = workspace.create(step.dataset, model.DatasetKind[step.kind])
        else:
            dataset = workspace.open(step.dataset)
        events = [from_data("MetadataEvent", c.event) for c in step.changes if c.event is not None]
        if events:
            dataset.append(events)


def test_plan_is_unchanged_after_apply_and_an_edit_appends_one_set_info(tmp_path) -> None:
    project = tmp_path / "p"
    shutil.copytree(REPO_DIR / "example_project", project, ignore=shutil.ignore_patterns(".odf"))
    daily = project / "datasets" / "org.example.weather.daily.yaml"
    # Only the root: the derivative's input ids are known only after the root exists.
    (project / "datasets" / "org.example.weather.monthly.yaml").unlink()
    config = load_project(project)
    first = _plan(config)
    assert [s.action for s in first.steps] == [Action.CREATE]
    _apply_by_hand(config, first)
    assert [s.action for s in _plan(config).steps] == [Action.UNCHANGED]

    daily.write_text(daily.read_text().replace("Daily weather observations", "Daily weather readings"))
    edited = _plan(config)
    assert [s.action for s in edited.steps] == [Action.UPDATE]
    assert [c.kind for c in edited.steps[0].changes] == ["SetInfo"]
