"""The project boundary: validate and plan read nothing outside the project folder, nor under .git.

Each vector is a pull request that points a manifest, a macro, a glob or odfproj.yaml itself at a
file outside (a stand-in for /etc/passwd holding a secret) or at .git/config (where CI checkouts keep
the job token). The audit of opened paths proves the file was not read, not just not printed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security.project_helpers import (
    ROOT_MANIFEST,
    SECRET_VALUE,
    CliRun,
    assert_clean_failure,
    assert_no_secret,
    make_project,
    run_cli,
)

COMMANDS = [("validate",), ("plan", "--no-validate-queries")]


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A file outside the project that looks like a manifest and holds a secret."""
    folder = tmp_path / "outside"
    folder.mkdir()
    target = folder / "passwd.yaml"
    target.write_text(ROOT_MANIFEST.format(name=f"org.leak.{SECRET_VALUE.lower()}"), encoding="utf-8")
    return target


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "pr", {"ok.yaml": ROOT_MANIFEST.format(name="com.example.ok")})
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text(
        f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {SECRET_VALUE}\n',
        encoding="utf-8",
    )
    return root


def assert_not_read(run: CliRun, *targets: Path) -> None:
    for target in targets:
        real = os.path.realpath(target)
        assert not [p for p in run.opened if os.path.realpath(p) == real], f"{target} was opened"


@pytest.mark.parametrize("command", COMMANDS)
def test_symlinked_manifest_to_a_file_outside_is_refused_unread(
    project: Path, outside: Path, command
) -> None:
    (project / "datasets" / "evil.yaml").symlink_to(outside)
    run = run_cli(project, *command)
    assert_clean_failure(run, file="datasets/evil.yaml:1:1: refused: resolves outside the project folder")
    assert_not_read(run, outside)
    assert_no_secret(run)


@pytest.mark.parametrize("command", COMMANDS)
def test_symlinked_manifest_to_git_config_is_refused_unread(project: Path, command) -> None:
    (project / "datasets" / "evil.yaml").symlink_to(project / ".git" / "config")
    run = run_cli(project, *command)
    assert_clean_failure(run, file="datasets/evil.yaml:1:1: refused: resolves into .git/")
    assert_not_read(run, project / ".git" / "config")
    assert_no_secret(run)


def test_symlinked_manifest_to_etc_passwd_is_refused_unread(project: Path) -> None:
    (project / "datasets" / "passwd.yaml").symlink_to("/etc/passwd")
    run = run_cli(project, "validate")
    assert_clean_failure(run, file="datasets/passwd.yaml:1:1: refused")
    assert_not_read(run, Path("/etc/passwd"))
    assert "root:" not in run.output


@pytest.mark.parametrize("command", COMMANDS)
def test_symlinked_macro_to_a_file_outside_is_refused_unread(project: Path, outside: Path, command) -> None:
    (project / "macros").mkdir()
    (project / "macros" / "evil.j2").symlink_to(outside)
    run = run_cli(project, *command)
    assert_clean_failure(run, file="macros/evil.j2:1:1: refused: resolves outside the project folder")
    assert_not_read(run, outside)
    assert_no_secret(run)


def test_symlinked_macro_to_git_config_is_refused_unread(project: Path) -> None:
    (project / "macros").mkdir()
    (project / "macros" / "token.sql").symlink_to(project / ".git" / "config")
    run = run_cli(project, "plan", "--no-validate-queries")
    assert_clean_failure(run, file="macros/token.sql:1:1: refused: resolves into .git/")
    assert_not_read(run, project / ".git" / "config")
    assert_no_secret(run)


def test_symlinked_macro_folder_is_refused_unread(project: Path, outside: Path) -> None:
    (project / "macros").symlink_to(outside.parent, target_is_directory=True)
    outside.with_suffix(".j2").write_text("{% macro leak() %}" + SECRET_VALUE + "{% endmacro %}\n")
    run = run_cli(project, "validate")
    assert_clean_failure(run, file="refused: resolves outside the project folder")
    assert_not_read(run, outside.with_suffix(".j2"))
    assert_no_secret(run)


@pytest.mark.parametrize(
    "include",
    [
        "{% include '/etc/passwd' %}",
        "{% include '../outside/passwd.yaml' %}",
        "{% import '.git/config' as c %}",
        "{% include 'odfproj.yaml' %}",
        "{% from 'datasets/ok.yaml' import x %}",
    ],
)
def test_include_and_import_reach_only_macro_files(project: Path, outside: Path, include: str) -> None:
    (project / "datasets" / "inc.yaml").write_text(
        f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: com.example.inc\n  kind: Root\n  metadata: []\n{include}\n"
    )
    run = run_cli(project, "validate")
    assert_clean_failure(run, file="datasets/inc.yaml:")
    assert "not found" in run.stderr
    assert_not_read(run, outside, Path("/etc/passwd"), project / ".git" / "config")
    assert_no_secret(run)


def test_manifests_glob_climbing_out_with_dotdot_is_refused(project: Path, outside: Path) -> None:
    (project / "odfproj.yaml").write_text("name: pr\nmanifests: ['../outside/*.yaml']\n")
    for command in COMMANDS:
        run = run_cli(project, *command)
        assert_clean_failure(run, file="odfproj.yaml: manifests glob '../outside/*.yaml' climbs out")
        assert_not_read(run, outside)
        assert_no_secret(run)


def test_absolute_manifests_glob_is_a_clean_error_not_an_internal_error(project: Path, outside: Path) -> None:
    (project / "odfproj.yaml").write_text(f"name: pr\nmanifests: ['{outside.parent}/*.yaml']\n")
    for command in COMMANDS:
        run = run_cli(project, *command)
        assert_clean_failure(run, file="is absolute; globs are relative to the project folder")
        assert_not_read(run, outside)


def test_symlinked_datasets_folder_pointing_outside_is_refused_unread(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "pr"
    root.mkdir()
    (root / "odfproj.yaml").write_text("name: pr\n")
    (root / "datasets").symlink_to(outside.parent, target_is_directory=True)
    run = run_cli(root, "plan", "--no-validate-queries")
    assert_clean_failure(run, file="datasets/passwd.yaml:1:1: refused: resolves outside the project folder")
    assert_not_read(run, outside)
    assert_no_secret(run)


def test_symlinked_odfproj_yaml_pointing_outside_is_refused_unread(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text(f"name: {SECRET_VALUE}\n")
    root = tmp_path / "pr"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").symlink_to(secret)
    run = run_cli(root, "validate")
    assert_clean_failure(run, file="odfproj.yaml: refused: resolves outside the project folder")
    assert_not_read(run, secret)
    assert_no_secret(run)


def test_symlink_loop_is_a_one_line_error(project: Path) -> None:
    (project / "datasets" / "a.yaml").symlink_to(project / "datasets" / "b.yaml")
    (project / "datasets" / "b.yaml").symlink_to(project / "datasets" / "a.yaml")
    run = run_cli(project, "validate")
    assert run.returncode == 1 and "Traceback" not in run.output and "internal error" not in run.output


def test_symlink_inside_the_project_is_still_allowed(project: Path) -> None:
    (project / "shared").mkdir()
    (project / "shared" / "m.yaml").write_text(ROOT_MANIFEST.format(name="com.example.shared"))
    (project / "datasets" / "m.yaml").symlink_to(project / "shared" / "m.yaml")
    run = run_cli(project, "validate")
    assert run.returncode == 0, run.output
    assert "2 manifest(s) valid" in run.stdout
