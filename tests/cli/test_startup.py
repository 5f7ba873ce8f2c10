"""Start-up: commands load lazily, and the commands that need no JVM never import PySpark or py4j.

``odfproj --help`` lists every command from the summaries in ``cli/main.py`` and imports no command's
module; ``odfproj COMMAND --help`` imports that command's module, which imports none of the lower
layers' big libraries. The commands that need no JVM run in fresh interpreters on a small project, and
what they imported is read from ``sys.modules`` at exit; each run must also have done its work (its
output, its own modules loaded), and ``sql`` shows that the check sees PySpark when it is imported.
How fast this is, bench/bench_startup.py measures; no test here asserts a time.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from odfproj.cli import lineage as lineage_cmd
from odfproj.cli import main as cli_main
from odfproj.cli import redact
from odfproj.ingest.fetch import KIND_FILES_GLOB, POLLING_SOURCE_NAME
from odfproj.odf import model
from odfproj.project import config as project_config
from odfproj.project import lineage as project_lineage
from odfproj.project.config import WORKSPACE_ENV
from odfproj.project.env import REDACTED
from odfproj.remote.workspace import acquire_lock
from odfproj.storage.object_store import open_store
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main_split
from tests.security.project_helpers import INFO_MANIFEST, ROOT_MANIFEST
from tests.storage.helpers.chains import BASE_TIME, Writer, set_schema

#: The JVM's Python side: a command that needs no JVM imports neither.
SPARK = ("pyspark", "py4j")
#: What resolving a command (for its --help) must not import: the JVM's client and the lower layers'
#: big libraries, which the command functions import when they run.
HEAVY = (
    *SPARK,
    "pyarrow",
    "numpy",
    "networkx",
    "jinja2",
    "sqlglot",
    "httpx",
    "boto3",
    "jsonschema",
    "ruamel",
)
#: What showing a help imports none of: typer's coercion too, which needs pydantic (cli/metavars.py).
HELP_HEAVY = (*HEAVY, "pydantic")

#: ``odfproj ARGS`` through the console entry point; at exit, the names in ``sys.modules`` go to a file.
DRIVER = textwrap.dedent(
    """
    import atexit, json, os, sys

    def _report():
        with open(os.environ["ODFPROJ_TEST_MODULES"], "w", encoding="utf-8") as out:
            json.dump(sorted(sys.modules), out)

    atexit.register(_report)
    sys.argv = ["odfproj", *sys.argv[1:]]
    from odfproj.cli.start import main
    main()
    """
)


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str
    modules: frozenset[str]

    def imported(self, package: str) -> bool:
        return any(name == package or name.startswith(package + ".") for name in self.modules)

    def imported_any(self, packages: tuple[str, ...]) -> list[str]:
        return [package for package in packages if self.imported(package)]


def odfproj(*args: str, cwd: Path, scratch: Path, bare: bool = False, **env: str) -> Ran:
    """``odfproj ARGS`` in a fresh interpreter in ``cwd``; the warm engine off unless ``env`` says so.

    ``bare``: an environment of only ``PATH``, ``PYTHONPATH`` and these settings, so that no variable's value happens
    to appear in the output (which would make the redactor read the project: ``cli/redact.py``).
    """
    keep = ("PATH", "PYTHONPATH") if bare else tuple(k for k in os.environ if k not in (WORKSPACE_ENV, "CI"))
    environ = {k: os.environ[k] for k in keep if k in os.environ}
    environ |= {
        "ODFPROJ_WARM_ENGINE": "off",
        "ODFPROJ_ENGINE_DIR": str(scratch / "engine"),  # a server, if one started, would be ours alone
        "ODFPROJ_WARM_IDLE": "5",
        "ODFPROJ_TEST_MODULES": str(scratch / "modules.json"),
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    environ |= env
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    modules = frozenset(json.loads((scratch / "modules.json").read_text(encoding="utf-8")))
    (scratch / "modules.json").unlink()
    return Ran(done.returncode, done.stdout, done.stderr, modules)


# --- the command list of `odfproj --help` -------------------------------------------------------------


def _help(group: typer.core.TyperGroup) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        group.main(["--help"], prog_name="odfproj", standalone_mode=False)
    return out.getvalue()


def test_each_summary_is_the_first_paragraph_of_its_command_s_help() -> None:
    group = typer.main.get_command(cli_main.app)
    assert isinstance(group, typer.core.TyperGroup)
    for command in cli_main.COMMANDS:
        loaded = command.load(group)
        first = inspect.cleandoc(loaded.help or "").split("\n\n")[0].replace("\n", " ")
        assert command.summary == first, f"cli/main.py's summary of `{command.name}` is not its help's"
        assert loaded.name == command.name and not loaded.hidden and not loaded.deprecated


def test_the_help_lists_every_command_as_the_commands_themselves_would() -> None:
    """The root help from the summaries, then with every command loaded: the same text."""
    group = typer.main.get_command(cli_main.app)
    assert isinstance(group, typer.core.TyperGroup)
    listed = _help(group)
    ctx = typer.Context(group, info_name="odfproj")
    names = group.list_commands(ctx)
    assert names == [command.name for command in cli_main.COMMANDS]
    assert not any(group.commands.is_loaded(name) for name in names)  # type: ignore[attr-defined]
    for name in names:
        group.get_command(ctx, name)
    assert all(group.commands.is_loaded(name) for name in names)  # type: ignore[attr-defined]
    assert _help(group) == listed
    for name in names:
        assert f"│ {name} " in listed


def test_what_help_texts_name_without_importing_it_is_what_the_code_uses() -> None:
    assert [f.value for f in lineage_cmd.LineageFormat] == [f.value for f in project_lineage.LineageFormat]
    group = typer.main.get_command(cli_main.app)
    assert isinstance(group, typer.core.TyperGroup)
    unlock = group.get_command(typer.Context(group), "unlock")
    assert unlock is not None
    assert any(f"${WORKSPACE_ENV}" in (getattr(param, "help", None) or "") for param in unlock.params)


@pytest.mark.parametrize(
    ("flags", "env", "says"),
    [
        (["--warm"], "off", "yes (--warm)"),
        (["--cold"], "on", "no (--cold)"),
        ([], "off", "no (ODFPROJ_WARM_ENGINE=off)"),
        ([], "on", "yes (ODFPROJ_WARM_ENGINE=on)"),
    ],
)
def test_warm_and_cold_are_read_only_when_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], env: str, says: str
) -> None:
    """`--warm/--cold` is a plain flag (cli/main.py): its default must still mean "not given"."""
    monkeypatch.setenv("ODFPROJ_WARM_ENGINE", env)
    monkeypatch.setenv("ODFPROJ_ENGINE_DIR", str(tmp_path / "engine"))
    code, out, err = run_main_split(*flags, "engine", "status")
    assert code == 0, err
    assert f"commands use it: {says}" in out


# --- what a start imports ---------------------------------------------------------------------------


def test_the_help_imports_no_command_and_no_spark(tmp_path: Path) -> None:
    ran = odfproj("--help", cwd=tmp_path, scratch=tmp_path, bare=True)
    assert ran.code == 0 and "│ validate " in ran.stdout, ran.stderr
    assert ran.imported_any(HELP_HEAVY) == []
    loaded = sorted(f"odfproj.cli.{c.target.split(':')[0].rsplit('.', 1)[1]}" for c in cli_main.COMMANDS)
    assert [m for m in loaded if m in ran.modules] == []
    assert not ran.imported("odfproj.project.config")  # the redactor reads no project for the help


def test_a_command_s_help_imports_that_command_and_no_spark(tmp_path: Path) -> None:
    ran = odfproj("plan", "--help", cwd=tmp_path, scratch=tmp_path)
    assert ran.code == 0 and "--validate-queries" in ran.stdout, ran.stderr
    assert "odfproj.cli.plan" in ran.modules and "odfproj.cli.apply" not in ran.modules
    assert ran.imported_any(HELP_HEAVY) == []


def test_no_command_s_module_imports_a_heavy_library() -> None:
    """What every `odfproj COMMAND --help` imports, in one interpreter: each command as the group builds it."""
    script = textwrap.dedent(
        f"""
        import sys, typer
        from odfproj.cli.main import COMMANDS, app
        group = typer.main.get_command(app)
        ctx = typer.Context(group, info_name="odfproj")
        for command in COMMANDS:
            assert group.get_command(ctx, command.name).name == command.name
        heavy = {HEAVY!r}
        print(sorted(p for p in heavy if any(m == p or m.startswith(p + ".") for m in sys.modules)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- the commands that need no JVM ------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A root-only project (nothing for plan to check on an engine) and an orphan dataset with 3 records."""
    folder = tmp_path / "proj"
    (folder / "datasets").mkdir(parents=True)
    (folder / "odfproj.yaml").write_text("name: demo\n", encoding="utf-8")
    (folder / "datasets" / "root.yaml").write_text(
        ROOT_MANIFEST.format(name="com.example.root"), encoding="utf-8"
    )
    dataset = Workspace(folder / ".odf").create("trades", model.DatasetKind.Root)
    dataset.append([model.SetInfo(description="Trades"), set_schema()])
    Writer(dataset, tmp_path / "scratch").add_data(3, watermark=BASE_TIME)
    yield folder


def _remote_lock(project: Path) -> tuple[str, ...]:
    url = f"file://{project.parent / 'remote'}"
    held = acquire_lock(open_store(url), purpose="a CI job that died")
    return (held.lock_id, "--workspace", url)


#: command line, the module that implements it, what its output says.
JVM_FREE: dict[str, tuple[tuple[str, ...], str, str]] = {
    "validate": (("validate",), "odfproj.project.validate", "1 manifest(s) valid"),
    "plan": (("plan",), "odfproj.plan.planner", "+ com.example.root [Root]"),
    "fmt": (("fmt",), "odfproj.run.fmt", "1 file(s) reformatted"),
    "lineage": (("lineage",), "odfproj.project.lineage", "com.example.root"),
    "log": (("log", "trades", "--oneline"), "odfproj.odf.summary", "AddData"),
    "query": (("query", "trades", "--changelog"), "odfproj.state.read", "(3 row(s))"),
    "show": (("show", "trades"), "odfproj.run.show", "trades (Root)"),
    "destroy": (("destroy", "trades", "--yes"), "odfproj.run.destroy", "Destroyed 1 dataset(s)."),
    "unlock": (("unlock",), "odfproj.remote.workspace", "removed the lock of"),
}


@pytest.mark.parametrize("name", sorted(JVM_FREE))
def test_a_command_that_needs_no_jvm_imports_no_spark(project: Path, tmp_path: Path, name: str) -> None:
    args, implementation, says = JVM_FREE[name]
    if name == "unlock":
        args = (*args, *_remote_lock(project))
    ran = odfproj(*args, cwd=project, scratch=tmp_path)
    assert ran.code == 0, ran.stdout + ran.stderr
    assert says in ran.stdout + ran.stderr  # it did its work...
    assert implementation in ran.modules  # ...through the lower layer that does it...
    assert ran.imported_any(SPARK) == []  # ...without PySpark
    if name in (
        "validate",
        "plan",
        "lineage",
    ):  # the dataset graph is odfproj's own: networkx names cycles only
        assert not ran.imported("networkx")


def test_plan_of_an_ingested_files_glob_root_imports_no_ingest_pipeline(
    project: Path, tmp_path: Path
) -> None:
    """Plan reads what an ingested ``FilesGlob`` root has read (to list the files it would read next):
    that is metadata, and must not bring the ingest pipeline and the Spark engine's modules with it."""
    applied = odfproj("apply", "--auto-approve", cwd=project, scratch=tmp_path)
    assert applied.code == 0, applied.stdout + applied.stderr
    root = Workspace(project / ".odf").open("com.example.root")
    root.append([set_schema()])
    state = model.SourceState(
        source_name=POLLING_SOURCE_NAME, kind=KIND_FILES_GLOB, value='{"path":"data/a.csv"}'
    )
    Writer(root, tmp_path / "scratch").add_data(2, source_state=state)
    (project / "data").mkdir()
    for name in ("a.csv", "b.csv"):
        (project / "data" / name).write_text("id,value\n1,x\n", encoding="utf-8")
    ran = odfproj("plan", cwd=project, scratch=tmp_path)
    assert ran.code == 0, ran.stdout + ran.stderr
    assert "data/b.csv" in ran.stdout and "data/a.csv" not in ran.stdout, ran.stdout  # it read the history
    assert "odfproj.ingest.fetch" in ran.modules
    assert "odfproj.ingest.pipeline" not in ran.modules and "odfproj.engine.spark" not in ran.modules
    assert ran.imported_any(SPARK) == []


def test_an_unchanged_plan_and_no_op_run_import_no_data_library(tmp_path: Path) -> None:
    """What an unchanged project's ``plan`` and no-op ``run`` need is the manifests and the chains'
    state: no Arrow (its schemas are decoded only for a changed query or schema), no numpy (which the
    flatbuffers library imports: odfproj reads blocks without it), no jsonschema (the configuration
    passed before) and no pydantic (typer's coercion before 0.29). A project of 20 manifests: the size
    from which manifests and chain views are remembered."""
    folder = tmp_path / "proj"
    (folder / "datasets").mkdir(parents=True)
    (folder / "odfproj.yaml").write_text("name: demo\n", encoding="utf-8")
    for i in range(20):
        (folder / "datasets" / f"root{i}.yaml").write_text(  # push sources nothing pushed to: a no-op run
            INFO_MANIFEST.format(name=f"com.example.root{i}", description=f"root {i}"), encoding="utf-8"
        )
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    applied = odfproj("apply", "--auto-approve", cwd=folder, scratch=tmp_path, **cache)
    assert applied.code == 0, applied.stdout + applied.stderr
    odfproj("plan", cwd=folder, scratch=tmp_path, **cache)  # the first plan after apply remembers
    for args, says in ((("plan",), "No changes"), (("run",), "20 skipped")):
        ran = odfproj(*args, cwd=folder, scratch=tmp_path, **cache)
        assert ran.code == 0 and says in ran.stdout, ran.stdout + ran.stderr
        assert ran.imported_any(("pyarrow", "numpy", "jsonschema", "pydantic", *SPARK)) == []


def test_plan_on_the_warm_engine_with_no_query_to_check_imports_no_spark(
    project: Path, tmp_path: Path
) -> None:
    ran = odfproj("--warm", "plan", cwd=project, scratch=tmp_path, ODFPROJ_WARM_ENGINE="on")
    assert ran.code == 0 and "+ com.example.root [Root]" in ran.stdout, ran.stderr
    # The query checker (and with it the warm engine's client) is built on the first changed query.
    assert "odfproj.engine.warm.client" not in ran.modules and "odfproj.plan.engine_checks" not in ran.modules
    assert ran.imported_any(SPARK) == []
    assert not (tmp_path / "engine").exists()  # no server was found, let alone started


def test_sql_imports_spark_so_the_check_sees_it(project: Path, tmp_path: Path) -> None:
    """The other side: `sql` needs the JVM, and the same check sees it import PySpark.

    No Java where JAVA_HOME points, so the gateway fails at once instead of starting a JVM.
    """
    ran = odfproj(
        "--cold", "sql", "SELECT 1", cwd=project, scratch=tmp_path, JAVA_HOME=str(tmp_path / "no-java")
    )
    assert ran.code != 0 and "could not start Spark" in ran.stderr, ran.stdout + ran.stderr
    assert ran.imported_any(SPARK) == list(SPARK)


def test_the_redactor_reads_the_project_only_for_output_that_may_hold_its_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names decide at once; the project's own secrets are looked up when output holds a candidate value."""
    (tmp_path / "odfproj.yaml").write_text("name: p\nenv:\n  - {name: PLAIN_LOOKING, secret: true}\n")
    monkeypatch.chdir(tmp_path)
    reads: list[Path | None] = []
    real = project_config.load_project

    def counted(project: Path | None = None) -> project_config.ProjectConfig:
        reads.append(project)
        return real(project)

    monkeypatch.setattr(project_config, "load_project", counted)
    environ = {"GITHUB_TOKEN": "tok-12345", "PLAIN_LOOKING": "plain-value-1", "HOME": "/home/someone"}
    redactor = redact.command_redactor([], environ)
    assert redactor.redact("Usage: odfproj [OPTIONS] COMMAND") == "Usage: odfproj [OPTIONS] COMMAND"
    assert redactor.redact("token tok-12345") == f"token {REDACTED}"
    assert reads == []  # nothing yet could be a secret only the project knows
    assert redactor.redact("in /home/someone: plain-value-1") == f"in /home/someone: {REDACTED}"
    assert redactor.redact("again plain-value-1") == f"again {REDACTED}"
    assert reads == [None]  # read once, where the command finds its project
