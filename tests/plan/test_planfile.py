"""The plan's JSON form: validates against schemas/plan.schema.json, round-trips, rejects bad files."""

from __future__ import annotations

import json
import re
import shutil

import jsonschema
import pytest

from odfproj.errors import PlanError
from odfproj.plan.model import Action
from odfproj.plan.planfile import plan_from_data, plan_schema, plan_to_data, read_plan_file, write_plan_file
from odfproj.plan.render import render_markdown
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.apply import apply_plan
from odfproj.storage.workspace import Workspace
from tests.conftest import REPO_DIR
from tests.plan.test_plan_cli import run


@pytest.fixture()
def example(tmp_path):
    project = tmp_path / "example"
    shutil.copytree(REPO_DIR / "example_project", project, ignore=shutil.ignore_patterns(".odf"))
    return project


def test_published_schema_is_a_valid_json_schema() -> None:
    published = json.loads((REPO_DIR / "schemas" / "plan.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(published)
    assert published == plan_schema()


def test_cli_json_output_validates_against_the_published_schema(example) -> None:
    schema = json.loads((REPO_DIR / "schemas" / "plan.schema.json").read_text())
    created = run(["plan", "--format", "json"], example)
    jsonschema.validate(json.loads(created.stdout), schema)
    assert run(["apply", "--auto-approve"], example).returncode == 0
    daily = example / "datasets" / "org.example.weather.daily.yaml"
    daily.write_text(daily.read_text().replace("Daily weather observations", "Daily readings"))
    (example / "datasets" / "org.example.weather.monthly.yaml").unlink()
    stocks = example / "datasets" / "org.example.stocks.monthly.yaml"
    stocks.write_text(stocks.read_text().replace("          - price DOUBLE\n", ""))
    updated = json.loads(run(["plan", "--format", "json"], example).stdout)
    jsonschema.validate(updated, schema)
    definitions = [s for s in updated["steps"] if s["step"] == "append_definitions"]
    assert {s["action"] for s in definitions} == {"update", "orphan", "refused", "unchanged"}


def test_round_trip_through_a_file(example, tmp_path) -> None:
    plan, _ = plan_project(load_project(example), PlanRequest())
    path = tmp_path / "plan.json"
    write_plan_file(plan, path)
    again = read_plan_file(path)
    assert again == plan
    assert plan_from_data(plan_to_data(again)) == plan


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "invalid JSON"),
        ('{"format_version": 99}', "format version 99"),
        ('{"format_version": 1, "steps": []}', "format version 1"),
        ('{"format_version": 2, "steps": []}', "not a valid plan file"),
    ],
)
def test_bad_plan_files_are_one_line_errors(tmp_path, content, message) -> None:
    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(PlanError, match=message):
        read_plan_file(path)
    with pytest.raises(PlanError, match="not found"):
        read_plan_file(tmp_path / "missing.json")


def test_markdown_puts_refusals_first_and_collapses_diffs(example) -> None:
    config = load_project(example)
    plan, _ = plan_project(config, PlanRequest())
    ws = Workspace(config.workspace())
    with ws.lock():
        apply_plan(plan, ws)
    daily = example / "datasets" / "org.example.weather.daily.yaml"
    original = daily.read_text()
    daily.write_text(original.replace("          - wind DOUBLE\n", "").replace("observations", "obs"))
    plan, _ = plan_project(config, PlanRequest())
    assert plan.has_refusals
    text = render_markdown(plan)
    assert text.index("[!CAUTION]") < text.index("| dataset |")
    assert "removes or renames column 'wind'" in text
    assert "Plan: 0 to create, 0 to update, 6 unchanged, 1 refused." in text
    daily.write_text(original)
    edit_only = example / "datasets" / "org.example.weather.monthly.yaml"
    edit_only.write_text(edit_only.read_text().replace("Monthly weather summary", "Monthly summary"))
    plan, _ = plan_project(config, PlanRequest())
    text = render_markdown(plan)
    assert [s.action for s in plan.definitions].count(Action.UPDATE) >= 1
    assert "<details><summary><code>~ org.example.weather.monthly</code>" in text
    assert "```diff" in text
    assert re.search(
        r'\n +~ SetInfo\.description:\n- +"Monthly weather summary per city \(an aggregation\)\."\n'
        r'\+ +"Monthly summary per city \(an aggregation\)\."\n',
        text,
    )
    assert "Plan: 0 to create, 1 to update, 6 unchanged, 0 refused." in text
