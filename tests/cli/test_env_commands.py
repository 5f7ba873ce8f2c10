"""``odfproj env list|refresh|destroy``, ``odfproj publish`` and ``--env`` on readers, through the real entry
point (in-process, with its error boundary). No JVM: the environments are built with storage's own writers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.project.config import WORKSPACE_ENV
from odfproj.storage.env_record import read_record, write_record
from odfproj.storage.environment import create_environment, fork
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main_split
from tests.storage.helpers.chains import Writer, set_schema


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose workspace has a dataset ``trades`` and an environment ``pr-1`` that forked it and
    appended a block."""
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "odfproj.yaml").write_text("name: demo\nenvironments:\n  ttl: 2d\n")
    production = Workspace(folder / ".odf")
    trades = production.create("trades", model.DatasetKind.Root)
    trades.append([set_schema()])
    Writer(trades, tmp_path / "scratch").add_data(3)
    create_environment(production, "pr-1")
    env = Workspace(folder / ".odf" / "envs" / "pr-1")
    fork(env, ["trades"])
    Writer(env.open("trades"), tmp_path / "scratch").add_data(2)
    monkeypatch.chdir(folder)
    return folder


def test_env_list_shows_what_each_environment_changed_and_its_own_bytes(project: Path) -> None:
    code, out, err = run_main_split("env", "list")
    assert (code, err) == (0, "")
    assert out.startswith("pr-1: refreshed ") and "of its own; changed: trades" in out
    assert "STALE" not in out


def test_a_stale_environment_is_listed_and_destroyed_with_stale(project: Path) -> None:
    root = project / ".odf" / "envs" / "pr-1"
    record = read_record(root)
    assert record is not None
    write_record(root, record.with_pins({}, refreshed=datetime.now(UTC) - timedelta(days=3)))
    assert "STALE" in run_main_split("env", "list")[1]
    code, out, _ = run_main_split("env", "destroy", "--stale", "--yes")
    assert (code, out) == (0, "destroyed environment pr-1\n")
    assert not root.exists()
    assert run_main_split("env", "list")[1].startswith("no environments in workspace")


def test_publish_fast_forwards_and_says_what_it_linked(project: Path) -> None:
    env_head = Workspace(project / ".odf" / "envs" / "pr-1").open("trades").head()
    code, out, err = run_main_split("publish", "pr-1")
    assert (code, err) == (0, "")
    assert out == (
        "> trades: fast-forwarded, 1 block(s), 2 object(s) linked\n"
        "published 1 dataset(s) of environment pr-1; 0 refused\n"
    )
    assert Workspace(project / ".odf").open("trades").head() == env_head
    assert run_main_split("log", "trades", "--env", "pr-1", "--oneline")[0] == 0


def test_publish_refused_exits_1_in_one_line_per_dataset(project: Path, tmp_path: Path) -> None:
    Writer(Workspace(project / ".odf").open("trades"), tmp_path / "scratch").add_data(1)  # production moves
    code, out, _ = run_main_split("publish", "pr-1")
    assert code == 1
    first, summary = out.splitlines()
    assert first.startswith("! trades: refused: production's head moved since the fork")
    assert first.endswith("refresh the environment")
    assert summary == "published 0 dataset(s) of environment pr-1; 1 refused"
    code, out, _ = run_main_split("env", "refresh", "pr-1")
    assert code == 0 and "reset (production moved since the fork): trades" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("log", "trades", "--env", "pr-9"), "error: environment 'pr-9' does not exist in workspace "),
        (("show", "trades", "--env", "Bad/Name"), "error: 'Bad/Name' is not an environment name"),
        (("publish", "pr-9"), "error: environment 'pr-9' does not exist in workspace "),
        (("env", "refresh", "pr-9"), "error: environment 'pr-9' does not exist in workspace "),
        (("env", "destroy", "--yes"), "error: env destroy needs NAME or --stale"),
    ],
)
def test_bad_environments_are_one_line_errors(project: Path, args: tuple[str, ...], message: str) -> None:
    code, _, err = run_main_split(*args)
    assert code == 1
    assert err.startswith(message) and err.count("\n") == 1, err


def test_a_remote_workspaces_environment_not_in_the_cache_is_one_line(project: Path) -> None:
    (project / "odfproj.yaml").write_text("name: demo\nworkspace: s3://bucket/prefix\n")
    code, _, err = run_main_split("log", "trades", "--env", "pr-1")
    assert code == 1
    assert err.startswith("error: environment 'pr-1' does not exist in workspace ") and err.count("\n") == 1


def test_a_bad_ttl_is_one_line_naming_the_file(project: Path) -> None:
    (project / "odfproj.yaml").write_text("name: demo\nenvironments:\n  ttl: soon\n")
    code, _, err = run_main_split("env", "list")
    assert code == 1
    assert "odfproj.yaml" in err and "environments.ttl" in err and err.count("\n") == 1, err


def test_an_environment_adopts_nothing_and_its_verify_uses_productions_records(project: Path) -> None:
    code, out, err = run_main_split("verify", "--env", "pr-1")
    assert (code, err) == (0, ""), out
    assert not (project / ".odf" / "envs" / "pr-1" / ".names").exists()
