"""The CI workflows ``odfproj init`` writes follow docs/design/security.md.

A pull request's files (its manifests, and on ``pull_request`` even its copy of the workflow) are
untrusted, so: the job that runs them holds no secrets and only a read-only token, and never the
durable workspace; the job that writes to the pull request runs nothing from it; secrets live only
in the ``production`` environment of the apply job on main.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from odfproj.project.scaffold import scaffold_project


@pytest.fixture(scope="module")
def workflows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ci") / "p"
    scaffold_project(root)
    folder = root / ".github" / "workflows"
    return {p.name: yaml.safe_load(p.read_text(encoding="utf-8")) for p in folder.glob("*.yml")}


def _text(value: Any) -> str:
    return yaml.safe_dump(value)


def test_pull_request_job_holds_no_secret_and_no_write_permission(workflows: dict[str, Any]) -> None:
    main = workflows["odfproj.yml"]
    plan = main["jobs"]["plan"]
    assert "pull_request" in plan["if"]
    assert set(plan["permissions"].values()) == {"read"}
    assert set(main["permissions"].values()) == {"read"}, "the workflow-wide default must be read-only too"
    assert "secrets." not in _text(plan), "no secret may reach the job that runs a pull request's files"
    assert "environment" not in plan
    assert "gh pr comment" not in _text(plan)


def test_pull_request_job_never_sees_the_durable_workspace(workflows: dict[str, Any]) -> None:
    main = workflows["odfproj.yml"]
    assert "ODFPROJ_WORKSPACE" not in main.get("env", {}), "a workflow-wide workspace would reach the PR job"
    plan_env = main["jobs"]["plan"]["env"]["ODFPROJ_WORKSPACE"]
    assert "runner.temp" in plan_env and "secrets" not in plan_env and "vars." not in plan_env


def test_checkouts_leave_no_token_in_git_config(workflows: dict[str, Any]) -> None:
    for name, workflow in workflows.items():
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/checkout"):
                    assert step["with"]["persist-credentials"] is False, name


def test_pull_request_job_is_plan_only(workflows: dict[str, Any]) -> None:
    runs = [s.get("run", "") for s in workflows["odfproj.yml"]["jobs"]["plan"]["steps"]]
    commands = re.findall(r"\bodfproj (\w+)", "\n".join(runs))
    assert commands and set(commands) <= {"validate", "plan"}, commands


def test_apply_runs_only_on_main_with_the_secrets(workflows: dict[str, Any]) -> None:
    main = workflows["odfproj.yml"]
    apply = main["jobs"]["apply"]
    assert "push" in apply["if"] and "refs/heads/main" in apply["if"]
    assert apply["environment"] == "production"
    assert "secrets.ODFPROJ_WORKSPACE" in apply["env"]["ODFPROJ_WORKSPACE"]
    uploads = [s for s in apply["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["with"]["name"] == "workspace-metadata"
    copy = next(s["run"] for s in apply["steps"] if "metadata" in s.get("name", "").lower() and "run" in s)
    assert "keys" not in copy and "-name data" not in copy, "only blocks, refs and info are shared"


def test_comment_job_runs_nothing_from_the_pull_request(workflows: dict[str, Any]) -> None:
    comment = workflows["odfproj-comment.yml"]
    assert list(comment[True]) == ["workflow_run"]  # PyYAML reads the key `on` as a boolean
    job = comment["jobs"]["comment"]
    assert job["permissions"]["pull-requests"] == "write"
    text = _text(job)
    assert "actions/checkout" not in text and "pip install" not in text and "odfproj " not in text
    assert "secrets." not in text
    run = next(s["run"] for s in job["steps"] if "run" in s)
    assert "tr -dc '0-9'" in run, "the PR number from the artifact is untrusted: digits only"


def test_both_workflows_are_listed_in_the_security_design() -> None:
    design = (Path(__file__).resolve().parents[2] / "docs" / "design" / "security.md").read_text(
        encoding="utf-8"
    )
    assert "odfproj.yml" in design and "odfproj-comment.yml" in design


def test_previews_run_only_for_branches_of_this_repository_and_only_in_their_environment(
    workflows: dict[str, Any],
) -> None:
    preview = workflows["odfproj.yml"]["jobs"]["preview"]
    assert "pull_request" in preview["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in preview["if"]
    assert preview["environment"] == "preview", "never production's secrets"
    assert set(preview["permissions"].values()) == {"read"}
    runs = "\n".join(s.get("run", "") for s in preview["steps"])
    commands = re.findall(r"\bodfproj (\w+)(.*)", runs)
    assert {c for c, _ in commands} == {"run", "test", "diff"}
    assert all('--env "$PREVIEW"' in rest for _, rest in commands), "every command works in the environment"
    assert preview["env"]["PREVIEW"] == "pr-${{ github.event.pull_request.number }}"


def test_main_publishes_the_merged_preview_before_it_applies(workflows: dict[str, Any]) -> None:
    steps = workflows["odfproj.yml"]["jobs"]["apply"]["steps"]
    names = [s.get("name", "") for s in steps]
    assert names.index("odfproj publish") < names.index("odfproj apply")
    publish = steps[names.index("odfproj publish")]["run"]
    assert "tr -dc '0-9'" in publish, "the pull request number comes from an API answer: digits only"
    assert 'odfproj publish "pr-$pr" --recompute' in publish


def test_the_data_diff_is_posted_by_the_job_that_runs_nothing(workflows: dict[str, Any]) -> None:
    steps = workflows["odfproj-comment.yml"]["jobs"]["comment"]["steps"]
    post = next(s["run"] for s in steps if s.get("name") == "Post the data diff on the pull request")
    assert "tr -dc '0-9' < preview-comment/pr-number" in post
