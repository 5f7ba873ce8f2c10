"""``odfproj init``'s scaffold: a project that validates, plans and formats as it is; never overwrites."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import git
import pytest
import yaml

from odfproj import __version__
from odfproj.project.config import load_project
from odfproj.project.fmt import format_text
from odfproj.project.graph import DatasetGraph
from odfproj.project.manifests import load_manifests
from odfproj.project.scaffold import ODFPROJ_REPOSITORY, ScaffoldError, render_skeleton, scaffold_project
from odfproj.project.validate import validate_files

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "odfproj" / "resources" / "templates"

EXPECTED = {
    "odfproj.yaml",
    "README.md",
    ".gitignore",
    ".pre-commit-config.yaml",
    ".github/workflows/odfproj.yml",
    ".github/workflows/odfproj-comment.yml",
    "macros/common.j2",
    "datasets/com.example.readings.yaml",
    "datasets/com.example.readings-daily.yaml",
    "schemas/odfproj.schema.json",
    "schemas/dataset-snapshot.schema.json",
}


def snapshot_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_scaffold_writes_the_whole_skeleton(tmp_path: Path) -> None:
    result = scaffold_project(tmp_path / "weather")
    assert {p.as_posix() for p in result.files} == EXPECTED
    assert set(snapshot_tree(tmp_path / "weather")) == EXPECTED
    for text in snapshot_tree(tmp_path / "weather").values():
        assert b"%%" not in text, "a placeholder was left"
    config = load_project(tmp_path / "weather")
    assert result.name == config.name == "weather"


def test_name_option_overrides_the_folder_name(tmp_path: Path) -> None:
    assert scaffold_project(tmp_path / "folder", "Sales Analytics").name == "Sales Analytics"
    assert load_project(tmp_path / "folder").name == "Sales Analytics"


def test_scaffolded_manifests_validate_render_and_form_a_root_to_derivative_graph(tmp_path: Path) -> None:
    scaffold_project(tmp_path / "p")
    config = load_project(tmp_path / "p")
    assert validate_files(config.manifest_files()).ok
    manifests = load_manifests(config)  # renders with the project's macros
    assert manifests.ok, manifests.problems
    graph = DatasetGraph.build(manifests)
    assert graph.ok
    assert graph.topological_order() == ("com.example.readings", "com.example.readings-daily")
    assert graph.inputs_of("com.example.readings-daily") == [("readings", "com.example.readings")]
    kinds = {m.snapshot.name: m.snapshot.kind.name for m in manifests.manifests if m.snapshot}
    assert kinds == {"com.example.readings": "Root", "com.example.readings-daily": "Derivative"}


def test_scaffolded_manifests_are_already_canonical(tmp_path: Path) -> None:
    scaffold_project(tmp_path / "p")
    for path in (tmp_path / "p" / "datasets").glob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        assert format_text(text) == text, path.name


def test_gitignore_keeps_the_workspace_and_keys_out_of_git(tmp_path: Path) -> None:
    root = tmp_path / "p"
    scaffold_project(root)
    repo = git.Repo.init(root)
    try:
        ignored = set(
            repo.ignored(".odf/datasets/x/info", "keys/dataset.pem", "odfproj.yaml", "datasets/a.yaml")
        )
    finally:
        repo.close()
    assert ignored == {".odf/datasets/x/info", "keys/dataset.pem"}


def test_pre_commit_config_uses_this_repositorys_hooks(tmp_path: Path) -> None:
    scaffold_project(tmp_path / "p")
    config = yaml.safe_load((tmp_path / "p" / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    published = {hook["id"] for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    (entry,) = config["repos"]
    assert entry["repo"] == ODFPROJ_REPOSITORY
    assert entry["rev"] == f"v{__version__}"
    assert [h["id"] for h in entry["hooks"]] == ["odfproj-fmt", "odfproj-validate"]
    assert {h["id"] for h in entry["hooks"]} <= published


def _run_lines(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_ci_workflow_plans_pull_requests_and_applies_main(tmp_path: Path) -> None:
    scaffold_project(tmp_path / "p")
    workflow = yaml.safe_load((tmp_path / "p" / ".github/workflows/odfproj.yml").read_text(encoding="utf-8"))
    triggers = workflow[True]  # PyYAML reads the key `on` as a boolean
    assert "pull_request" in triggers
    assert triggers["push"]["branches"] == ["main"]
    plan_job, apply_job = workflow["jobs"]["plan"], workflow["jobs"]["apply"]
    assert "pull_request" in plan_job["if"]
    assert "push" in apply_job["if"] and "refs/heads/main" in apply_job["if"]
    plan_runs = _run_lines(plan_job)
    validate_at = next(i for i, run in enumerate(plan_runs) if "odfproj validate" in run)
    plan_at = next(i for i, run in enumerate(plan_runs) if "odfproj plan" in run)
    assert validate_at < plan_at
    assert "--format markdown" in plan_runs[plan_at] and "--detailed-exitcode" in plan_runs[plan_at]
    assert not any("gh pr comment" in run for run in plan_runs), "the plan job may not write to the PR"
    assert set(plan_job["permissions"].values()) == {"read"}
    apply_runs = _run_lines(apply_job)
    assert any("odfproj apply --auto-approve" in run for run in apply_runs)
    assert f"@v{__version__}" in workflow["env"]["ODFPROJ_PACKAGE"]


@pytest.mark.parametrize(
    "existing",
    ["odfproj.yaml", ".gitignore", "datasets/com.example.readings.yaml", ".github/workflows/odfproj.yml"],
)
def test_an_existing_file_refuses_the_whole_init(tmp_path: Path, existing: str) -> None:
    root = tmp_path / "p"
    (root / existing).parent.mkdir(parents=True, exist_ok=True)
    (root / existing).write_text("mine\n", encoding="utf-8")
    (root / "notes.txt").write_text("unrelated\n", encoding="utf-8")
    before = snapshot_tree(root)
    with pytest.raises(ScaffoldError, match=rf"{existing}: already exists") as info:
        scaffold_project(root)
    assert "\n" not in str(info.value)
    assert snapshot_tree(root) == before


def test_a_file_where_a_folder_is_needed_refuses_the_init(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "datasets").write_text("not a folder\n", encoding="utf-8")
    with pytest.raises(ScaffoldError, match="datasets: exists and is not a folder"):
        scaffold_project(root)
    assert [p.name for p in root.iterdir()] == ["datasets"]


def test_unrelated_files_and_empty_folders_are_fine(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "datasets").mkdir(parents=True)
    (root / "data.csv").write_text("a\n", encoding="utf-8")
    scaffold_project(root)
    assert (root / "data.csv").read_text(encoding="utf-8") == "a\n"


@pytest.mark.parametrize("name", ["", "bad:name", "-leading", "trailing ", "a\nb", "#x"])
def test_names_that_would_break_odfproj_yaml_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ScaffoldError, match="invalid project name"):
        scaffold_project(tmp_path / "p", name)
    assert not (tmp_path / "p").exists()


def test_target_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "p").write_text("x", encoding="utf-8")
    with pytest.raises(ScaffoldError, match="not a folder"):
        scaffold_project(tmp_path / "p")


def test_templates_are_package_data_and_the_root_folder_links_to_them() -> None:
    """setuptools' package-data globs skip hidden files: packaged names must not start with a dot."""
    packaged = [p for p in (TEMPLATES / "project").rglob("*") if p.is_file()]
    assert packaged
    assert not [p for p in packaged if any(part.startswith(".") for part in p.relative_to(TEMPLATES).parts)]
    assert (REPO / "templates").resolve() == TEMPLATES.resolve()
    assert {
        f.path
        for f in render_skeleton({"PROJECT_NAME": "x", "ODFPROJ_VERSION": "1", "ODFPROJ_REPOSITORY": "u"})
    } == {PurePosixPath(p) for p in EXPECTED}
