"""``odfproj init``, ``fmt`` and ``lineage`` end to end, the pre-commit hooks, and the scaffolded CI.

Every command runs through the real entry point (``odfproj.cli.main.main``: its error boundary, exit codes,
stdout and stderr apart), in-process (tests/cli_inprocess.py) with the test's environment and folder. What
is about the process stays a subprocess: the hooks' ``entry`` run as an ``odfproj`` executable on PATH (whose
``BOOT`` registers the three commands when ``cli/main.py`` does not yet), pre-commit itself, and the CI steps.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from unittest import mock

import git
import pytest
import yaml

from odfproj.project.scaffold import scaffold_project
from tests.cli_inprocess import run_main_split

REPO = Path(__file__).resolve().parents[2]

BOOT = """\
import sys
from odfproj.cli import fmt, init, lineage, main
registered = {c.name for c in main.COMMANDS}
for name, command in (("init", init.init), ("fmt", fmt.fmt), ("lineage", lineage.lineage)):
    if name not in registered:
        main.app.command(name)(command)
sys.argv[0] = "odfproj"
main.main()
"""

MESSY_ROOT = """\
# Sensor readings
version: 1
kind: DatasetSnapshot
content:
  kind: Root
  name: com.example.extra   # the name
  metadata:
  - kind: SetVocab
    eventTimeColumn: t
"""


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A folder with an ``odfproj`` executable, like the console script pip installs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "odfproj_boot.py").write_text(BOOT, encoding="utf-8")
    script = folder / "odfproj"
    script.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{folder / "odfproj_boot.py"}" "$@"\n', encoding="utf-8"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


@pytest.fixture
def env(bin_dir: Path, tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ODFPROJ_")}
    environ["PATH"] = f"{bin_dir}{os.pathsep}{environ.get('PATH', '')}"
    environ["ODFPROJ_WORKSPACE"] = str(tmp_path / "workspace")
    return environ


def odfproj(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``odfproj ARGS`` in ``cwd`` with exactly ``env``, in-process through the real entry point."""
    with mock.patch.dict(os.environ, env, clear=True), contextlib.chdir(cwd):
        code, stdout, stderr = run_main_split(*args)
    return subprocess.CompletedProcess(["odfproj", *args], code, stdout, stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scaffolded project (in-process: ``init`` itself is tested through the CLI below)."""
    return scaffold_project(tmp_path / "weather").root


# ------------------------------------------------------------------------------------------------
# init


def test_init_scaffolds_the_current_folder(env: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "weather"
    project.mkdir()
    done = odfproj(env, project, "init")
    assert done.returncode == 0, done.stderr
    assert (project / "odfproj.yaml").is_file()
    assert (project / ".github" / "workflows" / "odfproj.yml").is_file()
    assert yaml.safe_load((project / "odfproj.yaml").read_text(encoding="utf-8"))["name"] == "weather"
    done = odfproj(env, project, "validate")
    assert done.returncode == 0, done.stderr


def test_init_with_a_folder_and_a_name(env: dict[str, str], tmp_path: Path) -> None:
    done = odfproj(env, tmp_path, "init", "new/proj", "--name", "sales")
    assert done.returncode == 0, done.stderr
    assert "Created project 'sales'" in done.stdout
    assert "datasets/com.example.readings.yaml" in done.stdout
    assert yaml.safe_load((tmp_path / "new/proj/odfproj.yaml").read_text(encoding="utf-8"))["name"] == "sales"


def test_init_refuses_to_overwrite_with_one_line_and_writes_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    root = tmp_path / "p"
    (root / "datasets").mkdir(parents=True)
    (root / "datasets" / "com.example.readings.yaml").write_text("mine\n", encoding="utf-8")
    done = odfproj(env, root, "init")
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "com.example.readings.yaml: already exists" in lines[0]
    assert "Traceback" not in done.stderr
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "datasets",
        "datasets/com.example.readings.yaml",
    ]


# ------------------------------------------------------------------------------------------------
# fmt


def test_fmt_check_then_fmt_then_check(project: Path, env: dict[str, str]) -> None:
    messy = project / "datasets" / "extra.yaml"
    messy.write_text(MESSY_ROOT, encoding="utf-8")
    check = odfproj(env, project, "fmt", "--check")
    assert check.returncode == 1
    assert check.stdout == "would reformat datasets/extra.yaml\n"
    assert "1 file(s) would be reformatted, 2 unchanged" in check.stderr
    assert messy.read_text(encoding="utf-8") == MESSY_ROOT

    done = odfproj(env, project, "fmt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "reformatted datasets/extra.yaml\n"
    assert messy.read_text(encoding="utf-8") == (
        "# Sensor readings\nkind: DatasetSnapshot\nversion: 1\ncontent:\n  name: com.example.extra   # the name\n"
        "  kind: Root\n  metadata:\n    - kind: SetVocab\n      eventTimeColumn: t\n"
    )
    again = odfproj(env, project, "fmt", "--check")
    assert again.returncode == 0, again.stderr
    assert again.stdout == ""


def test_fmt_paths_warns_on_jinja_and_fails_on_broken_yaml(project: Path, env: dict[str, str]) -> None:
    (project / "datasets" / "tmpl.yaml").write_text(
        MESSY_ROOT.replace("  metadata:\n", "  metadata:\n{% if true %}\n") + "{% endif %}\n",
        encoding="utf-8",
    )
    done = odfproj(env, project, "fmt", "datasets/tmpl.yaml")
    assert done.returncode == 0
    assert "warning: datasets/tmpl.yaml: skipped:" in done.stderr
    (project / "broken.yaml").write_text("kind: DatasetSnapshot\ncontent: [\n", encoding="utf-8")
    done = odfproj(env, project, "fmt", "broken.yaml", "datasets")
    assert done.returncode == 1
    assert re.search(r"^error: broken\.yaml: \d+:\d+: invalid YAML", done.stderr, re.MULTILINE)
    assert "Traceback" not in done.stderr


def test_fmt_outside_a_project_is_a_one_line_error(env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = odfproj(env, empty, "fmt")
    assert done.returncode == 1
    assert done.stderr.startswith("error: no odfproj.yaml found")
    assert len(done.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------
# lineage


def test_lineage_in_every_format(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    text = odfproj(env, project, "lineage")
    assert text.returncode == 0, text.stderr
    assert "com.example.readings [Root]" in text.stdout
    assert "  <- com.example.readings as readings" in text.stdout

    dot = odfproj(env, tmp_path, "lineage", "--format", "dot", "--project", str(project))
    assert dot.returncode == 0, dot.stderr
    assert '"com.example.readings" -> "com.example.readings-daily" [label="readings"];' in dot.stdout

    mermaid = odfproj(env, project, "lineage", "--format", "mermaid")
    assert mermaid.stdout.startswith("flowchart LR\n")
    assert 'n0[("com.example.readings")]' in mermaid.stdout

    data = json.loads(odfproj(env, project, "lineage", "--format", "json").stdout)
    assert [(n["name"], n["kind"]) for n in data["nodes"]] == [
        ("com.example.readings", "root"),
        ("com.example.readings-daily", "derivative"),
    ]
    assert data["edges"] == [
        {"source": "com.example.readings", "target": "com.example.readings-daily", "alias": "readings"}
    ]


def test_lineage_reports_problems_as_warnings(project: Path, env: dict[str, str]) -> None:
    path = project / "datasets" / "com.example.readings-daily.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            "datasetRef: com.example.readings", "datasetRef: com.example.gone"
        ),
        encoding="utf-8",
    )
    done = odfproj(env, project, "lineage")
    assert done.returncode == 0
    assert "warning: " in done.stderr and "com.example.gone" in done.stderr


# ------------------------------------------------------------------------------------------------
# pre-commit hooks


def load_hooks() -> dict[str, dict]:
    return {
        hook["id"]: hook
        for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    }


def test_hook_definitions() -> None:
    hooks = load_hooks()
    assert set(hooks) == {"odfproj-validate", "odfproj-fmt"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["entry"].startswith("odfproj ")
        pattern = re.compile(hook["files"])
        assert pattern.search("datasets/a.yaml") and pattern.search("sub/project/datasets/x/b.yml")
        assert not pattern.search("odfproj.yaml") and not pattern.search("macros/common.j2")


def test_hook_entries_run_as_pre_commit_runs_them(project: Path, env: dict[str, str]) -> None:
    """What pre-commit does: the entry, split like a shell would, plus the staged files matching ``files``."""
    (project / "datasets" / "extra.yaml").write_text(MESSY_ROOT, encoding="utf-8")
    files = sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file())
    hooks = load_hooks()

    def run(hook_id: str) -> subprocess.CompletedProcess[str]:
        hook = hooks[hook_id]
        matching = [f for f in files if re.search(hook["files"], f)]
        assert len(matching) == 3
        return subprocess.run(
            [*hook["entry"].split(), *hook.get("args", []), *matching],
            cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    first = run("odfproj-fmt")
    assert first.returncode == 0, first.stderr  # files changed: pre-commit itself fails the commit
    assert "reformatted datasets/extra.yaml" in first.stdout
    assert run("odfproj-fmt").stdout == ""
    validated = run("odfproj-validate")
    assert validated.returncode == 0, validated.stderr
    (project / "datasets" / "extra.yaml").write_text(
        MESSY_ROOT.replace("kind: Root", "kind: Rooot"), encoding="utf-8"
    )
    failed = run("odfproj-validate")
    assert failed.returncode == 1
    assert "datasets/extra.yaml:" in failed.stderr


def _copy_worktree(source: Path, target: Path, tag: str) -> None:
    """The repository as it is on disk (tracked and new files), committed and tagged in a fresh repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = source / rel
        if not (src.exists() or src.is_symlink()):
            continue
        dst = target / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    _register_commands(target / "odfproj" / "cli" / "main.py")
    repo = git.Repo.init(target)
    repo.git.add(all=True)
    actor = git.Actor("Test", "test@example.com")
    repo.index.commit("snapshot", author=actor, committer=actor)
    repo.create_tag(tag)
    repo.close()


def _register_commands(main_py: Path) -> None:
    """In the COPY only: register init/fmt/lineage when cli/main.py does not yet (what ``BOOT`` does)."""
    text = main_py.read_text(encoding="utf-8")
    anchor = 'app.command("validate")(validate.validate)\n'
    if 'app.command("fmt")' in text or anchor not in text:
        return
    text = text.replace(
        anchor,
        anchor
        + 'app.command("init")(init.init)\napp.command("fmt")(fmt.fmt)\napp.command("lineage")(lineage.lineage)\n',
    )
    text = text.replace(
        "from odfproj.cli.context import",
        "from odfproj.cli import fmt, init, lineage\nfrom odfproj.cli.context import",
    )
    main_py.write_text(text, encoding="utf-8")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_pre_commit_hooks_install_from_the_repository(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """The real thing: pre-commit builds the hook environment from this repository and runs both hooks.

    The project's scaffolded ``.pre-commit-config.yaml`` is used as written, its ``repo`` pointed at a
    snapshot of this repository tagged with the ``rev`` it names. Two ``pre-commit run``s share one
    PRE_COMMIT_HOME, as on a developer's machine: the first builds the environment (odfproj and all its
    dependencies, from the repository), the second reuses it. (``pre-commit try-repo`` would build it twice:
    each call has its own temporary store.) Needs PyPI or a pip cache; about a minute with PySpark cached.
    """
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which(
        "pre-commit"
    )
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (it is in the dev extra)")
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    config_file = project / ".pre-commit-config.yaml"
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    (hooks,) = config["repos"]
    assert [h["id"] for h in hooks["hooks"]] == ["odfproj-fmt", "odfproj-validate"]
    hooks_repo = tmp_path / "hooks-repo"
    _copy_worktree(REPO, hooks_repo, tag=hooks["rev"])
    config_file.write_text(
        config_file.read_text(encoding="utf-8").replace(hooks["repo"], str(hooks_repo)), encoding="utf-8"
    )
    (project / "datasets" / "extra.yaml").write_text(MESSY_ROOT, encoding="utf-8")
    repo = git.Repo.init(project)
    repo.git.add(all=True)
    repo.close()
    pc_env = {**env, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    command = [pre_commit, "run", "--all-files"]
    first = subprocess.run(command, cwd=project, env=pc_env, capture_output=True, text=True, timeout=840)
    assert first.returncode == 1, first.stdout + first.stderr  # fmt changed a file
    assert "Installing environment for " + str(hooks_repo) in first.stdout + first.stderr
    assert re.search(r"odfproj fmt\.+Failed", first.stdout), first.stdout
    assert "files were modified by this hook" in first.stdout
    assert re.search(r"odfproj validate\.+Passed", first.stdout), first.stdout
    second = subprocess.run(command, cwd=project, env=pc_env, capture_output=True, text=True, timeout=840)
    assert second.returncode == 0, second.stdout + second.stderr
    assert re.search(r"odfproj fmt\.+Passed", second.stdout)


# ------------------------------------------------------------------------------------------------
# The scaffolded CI workflow, step by step


def _plan_supports_markdown(env: dict[str, str], cwd: Path) -> bool:
    return "markdown" in odfproj(env, cwd, "plan", "--help").stdout


def test_ci_workflow_commands_run_in_order_in_a_git_repository(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """The pull-request job's validate and plan steps, run by bash as GitHub Actions would run them."""
    repo = git.Repo.init(project)
    repo.git.add(all=True)
    actor = git.Actor("Test", "test@example.com")
    repo.index.commit("odfproj init", author=actor, committer=actor)
    repo.close()

    workflow = yaml.safe_load((project / ".github/workflows/odfproj.yml").read_text(encoding="utf-8"))
    steps = [s for s in workflow["jobs"]["plan"]["steps"] if "odfproj " in s.get("run", "")]
    commands = [s["run"] for s in steps if "pip install" not in s["run"]]
    assert [c.split()[1] for c in commands if c.startswith("odfproj ")] == ["validate"]
    assert "odfproj plan --format markdown --detailed-exitcode" in commands[1]
    markdown = _plan_supports_markdown(env, project)
    output = tmp_path / "github-output"
    step_env = {**env, "GITHUB_OUTPUT": str(output)}
    for script in commands:
        if not markdown:  # until `plan --format markdown` lands, the same step with text output
            script = script.replace("--format markdown", "--format text")
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=project,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    assert output.read_text(encoding="utf-8").strip() == "exitcode=2"  # two datasets to create
    plan_text = (project / "plan.md").read_text(encoding="utf-8")
    assert "com.example.readings" in plan_text and "com.example.readings-daily" in plan_text
