"""Broken references (issue 14.4): a typo in ``datasetRef``, an input whose manifest was deleted, and a
deleted manifest of a dataset that exists in the workspace; plus the markdown plan with hostile names."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.plan.model import Action, AppendDefinitions, Plan
from odfproj.plan.render import render_markdown
from odfproj.project.config import parse_config
from odfproj.project.validate import validate_project
from tests.security.project_helpers import DERIVATIVE_MANIFEST, info_manifest, make_project, run_cli


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "p",
        {
            "a.yaml": info_manifest("com.example.readings", "root"),
            "b.yaml": DERIVATIVE_MANIFEST.format(name="com.example.daily", input="com.example.readings"),
        },
    )


def _problems(root: Path) -> list[str]:
    config = parse_config(root, (root / "odfproj.yaml").read_text())
    return [str(p) for p in validate_project(config).problems]


def test_typo_in_dataset_ref_is_a_validate_error_with_a_suggestion_at_file_and_line(project: Path) -> None:
    (project / "datasets" / "b.yaml").write_text(
        DERIVATIVE_MANIFEST.format(name="com.example.daily", input="com.exmple.readings")
    )
    assert _problems(project) == [
        "datasets/b.yaml:9:23: unknown input dataset 'com.exmple.readings': no manifest in the project "
        "defines it (did you mean 'com.example.readings'?)"
    ]


def test_unknown_input_without_a_close_name_has_no_suggestion(project: Path) -> None:
    (project / "datasets" / "b.yaml").write_text(
        DERIVATIVE_MANIFEST.format(name="com.example.daily", input="zzz")
    )
    [problem] = _problems(project)
    assert problem.endswith("unknown input dataset 'zzz': no manifest in the project defines it")


def test_deleting_an_input_manifest_is_a_validate_error(project: Path) -> None:
    (project / "datasets" / "a.yaml").unlink()
    run = run_cli(project, "validate")
    assert run.returncode == 1, run.output
    assert "datasets/b.yaml:9:23: unknown input dataset 'com.example.readings'" in run.stderr


def test_validate_renders_templates_of_the_whole_project(project: Path) -> None:
    """docs/guide/templating.md: validate sees the rendered text, so a template error is found."""
    (project / "datasets" / "a.yaml").write_text(info_manifest("com.example.readings", "{{ var('nope') }}"))
    [problem] = _problems(project)
    assert problem.startswith("datasets/a.yaml:") and "var 'nope' is not defined" in problem


def test_deleted_manifest_of_an_applied_dataset_is_a_change_naming_its_readers(project: Path) -> None:
    (project / "datasets" / "b.yaml").unlink()  # a derivative would need Spark to apply
    applied = run_cli(project, "apply", "--auto-approve")
    assert applied.returncode == 0, applied.output
    (project / "datasets" / "a.yaml").unlink()
    run = run_cli(project, "plan", "--detailed-exitcode")
    assert run.returncode == 2, run.output
    assert "? com.example.readings [Root]" in run.stdout
    assert "1 without a manifest (to destroy: odfproj destroy --orphans)." in run.stdout
    assert "No changes" not in run.stdout


def test_orphan_still_read_by_a_project_dataset_is_named_in_the_plan(project: Path, tmp_path: Path) -> None:
    from odfproj.plan.planner import make_plan

    plan = make_plan(
        project="p", workspace=str(tmp_path), desired=[], views={}, orphans=["com.example.readings"],
        orphan_readers={"com.example.readings": ("com.example.daily",)},
    )  # fmt: skip
    [step] = plan.definitions
    assert step.action is Action.ORPHAN and plan.has_orphans and not plan.has_changes
    assert step.reasons[-1] == "still an input of com.example.daily: restore its manifest"


@pytest.mark.parametrize(
    "manifest",
    [
        "datasets/a`b.yaml",
        "datasets/``x``.yaml",
        "datasets/`",
        "datasets/a|b.yaml",
        "datasets/x\n# Title.yaml",
    ],
)
def test_markdown_code_spans_hold_any_file_name(manifest: str) -> None:
    step = AppendDefinitions("com.example.a", Action.REFUSED, manifest, "Root", reasons=("```\n<img src=x>",))
    markdown = render_markdown(Plan(project="p`q", workspace="/w", steps=(step,)))
    row = next(line for line in markdown.splitlines() if line.startswith("| `!`"))
    cells = row.split(" | ")
    assert len([c for c in row.replace("\\|", "").split("|")]) == 8, row  # the table keeps its 6 columns
    span = cells[3]
    fence = span[: len(span) - len(span.lstrip("`"))]
    assert span.endswith(fence) and fence not in span[len(fence) : len(span) - len(fence)], span
    assert "\n# Title" not in markdown, "a file name must not start a line of markdown"
    body = markdown.split("```diff", 1)[-1] if "```diff" in markdown else markdown.split("````diff", 1)[-1]
    assert "````diff" in markdown, "the diff fence must be longer than the ``` inside a reason"
    assert body.count("````") == 1
