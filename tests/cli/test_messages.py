"""What the CLI says matches what it does: help metavars, op codes, short hashes, orphans, run output.

All JVM-free: datasets are written with the storage test helpers, and the run fails in its fetch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from odfproj.cli.main import app
from odfproj.cli.query import _as_at
from odfproj.errors import OdfprojError
from odfproj.odf import model
from odfproj.project.config import WORKSPACE_ENV
from odfproj.run.run import RUN_RESULTS_FILE
from odfproj.storage.workspace import Workspace
from tests.run.test_run import ROOT
from tests.storage.helpers.chains import BASE_TIME, Writer, set_schema

COMMANDS = (
    *[
        "init",
        "validate",
        "fmt",
        "plan",
        "apply",
        "log",
        "verify",
        "lineage",
        "ingest",
        "run",
        "query",
        "sql",
        "watch",
    ],
    "block hash",
    "block encode",
    "block decode",
)


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose workspace holds one dataset with three records and no manifest (an orphan)."""
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    folder = tmp_path / "proj"
    (folder / "datasets").mkdir(parents=True)
    (folder / "odfproj.yaml").write_text("name: demo\n")
    dataset = Workspace(folder / ".odf").create("trades", model.DatasetKind.Root)
    dataset.append([model.SetInfo(description="Trades"), set_schema()])
    Writer(dataset, tmp_path / "scratch").add_data(3, watermark=BASE_TIME)
    return folder


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_values_not_python_types(runner: CliRunner, command: str) -> None:
    result = runner.invoke(app, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    options = [line for line in result.output.splitlines() if re.match(r"^│ +-", line)]
    assert options, result.output
    for line in options:
        assert not re.search(r"<(bool|str|path|float|int|list\[[a-zA-Z]+\])[^>]*>", line), line


def test_shared_options_say_what_to_type(runner: CliRunner) -> None:
    text = runner.invoke(app, ["run", "--help"]).output
    for expected in (
        "--var  ",
        "KEY=VALUE",
        "--select",
        "ITEM",
        "--lock-timeout",
        "SECONDS",
        "--changed-since",
    ):
        assert expected in text


def test_query_shows_op_codes_with_a_legend(runner: CliRunner, project: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    table = runner.invoke(app, ["query", "trades", "--changelog"])
    assert table.exit_code == 0, table.output
    rows = [line for line in table.output.splitlines() if line.startswith("│")]
    assert len(rows) == 3 and all("│ +A " in row for row in rows), table.output
    assert "op: +A append, -R retract, -C correction (old values), +C correction (new values)" in table.output
    csv = runner.invoke(app, ["query", "trades", "--changelog", "--format", "csv"])
    assert csv.output.splitlines()[1].split(",")[1] == "0", csv.output  # tools get the stored number
    assert "+A" not in csv.output


def test_as_at_accepts_the_short_hash_log_prints(project: Path) -> None:
    dataset = Workspace(project / ".odf").open("trades")
    blocks = [h for h, _ in dataset.iter_blocks()]
    assert _as_at(dataset, blocks[1].short()) == blocks[1]
    assert _as_at(dataset, blocks[1].to_multibase()[:20]) == blocks[1]  # a longer beginning
    assert _as_at(dataset, blocks[0].to_multibase()) == blocks[0]
    with pytest.raises(OdfprojError, match="match; give more characters"):
        _as_at(dataset, blocks[0].to_multibase()[:5])  # every hash starts with the same prefix
    with pytest.raises(OdfprojError, match="no block of dataset trades"):
        _as_at(dataset, "abcdef12" if not any(str(h).endswith("abcdef12") for h in blocks) else "12abcdef")
    with pytest.raises(OdfprojError, match="expected an RFC 3339 time or a block hash"):
        _as_at(dataset, "yesterday")


def test_orphans_say_what_to_do_instead_of_promising_a_flag(project: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "odfproj", "plan"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "trades" in proc.stdout and "explicit flag" not in proc.stdout
    assert "restore its manifest, or delete it with `odfproj destroy trades`" in proc.stdout


LONG = "org.example.municipal.transport.weekday-ridership-by-station-and-hour-detailed"


def test_run_off_a_terminal_keeps_long_names_names_the_target_and_logs(tmp_path: Path) -> None:
    """No file matches the glob, so the run fails without a JVM; its table and results are what counts."""
    root = tmp_path / "proj"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: long\n")
    (root / "datasets" / "long.yaml").write_text(ROOT.format(name=LONG))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # rich would default to 80
    proc = subprocess.run(
        [sys.executable, "-m", "odfproj", "run"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    table_rows = [line for line in proc.stdout.splitlines() if line.startswith("│")]
    assert any(f"│ {LONG} " in row for row in table_rows), proc.stdout
    assert "…" not in proc.stdout
    saved = json.loads((root / ".odf" / RUN_RESULTS_FILE).read_text())
    assert saved["metadata"]["target"] == "dev", saved["metadata"]
    assert saved["interrupted"] is False
    log = Path(saved["log_file"])  # the run's log: every event in full, under the workspace
    assert (
        log.parent == root / ".odf" / "logs"
        and f"Log (with the warnings not shown here): {log}" in proc.stdout
    )
    text = log.read_text()
    assert f"START {LONG} (ingest)" in text and f"ERROR {LONG} (ingest)" in text and "no files match" in text
    assert "Run complete" in text
