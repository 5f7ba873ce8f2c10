"""``odfproj log`` and ``odfproj verify``: through typer's runner, and end to end through the real entry point.

The end-to-end tests (in-process: ``odfproj.cli.main.main`` with its error boundary) run once the commands are registered in ``odfproj/cli/main.py``; until then they
are skipped with a reason, and the runner tests cover the same behaviour.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from unittest import mock

import pytest
import typer
from typer.testing import CliRunner

from odfproj.cli import log as log_cmd
from odfproj.cli import main as cli_main
from odfproj.cli import verify as verify_cmd
from odfproj.odf import model
from odfproj.odf.identity import DatasetKeyPair
from odfproj.odf.summary import summarize
from odfproj.project.config import WORKSPACE_ENV
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import DatasetNotFoundError
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main_split
from tests.storage.helpers.chains import BASE_TIME, Writer, set_schema

REPO = Path(__file__).resolve().parents[2]


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("log")(log_cmd.log)
    app.command("verify")(verify_cmd.verify)
    return app


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    return CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder whose workspace is the default ``.odf/``, holding one dataset with data."""
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "odfproj.yaml").write_text("name: demo\n")
    dataset = Workspace(folder / ".odf").create("trades", model.DatasetKind.Root)
    dataset.append([model.SetInfo(description="Trades"), set_schema()])
    Writer(dataset, tmp_path / "scratch").add_data(3, watermark=BASE_TIME, checkpoint=b"ck")
    return folder


def _dataset(project: Path) -> Dataset:
    return Workspace(project / ".odf").open("trades")


def test_log_oneline_newest_first(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(_app(), ["log", "TRADES", "--oneline", "--project", str(project)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    hashes = [h for h, _ in _dataset(project).iter_blocks()]
    assert [line.split()[0] for line in lines] == [h.short() for h in hashes]
    assert [line.split()[1:3] for line in lines] == [
        ["3", "AddData"],
        ["2", "SetDataSchema"],
        ["1", "SetInfo"],
        ["0", "Seed"],
    ]
    assert lines[0].startswith(
        f"{hashes[0].short()} 3 AddData records 0..2 (3), watermark 2024-01-01T00:00:00Z"
    )
    assert lines[1].startswith(f"{hashes[1].short()} 2 SetDataSchema 5 columns: offset, op, system_time")
    assert lines[2] == f"{hashes[2].short()} 1 SetInfo Trades"
    assert lines[3].startswith(f"{hashes[3].short()} 0 Seed Root dataset did:odf:")


def test_log_full_format(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(_app(), ["log", "trades", "--workspace", str(project / ".odf")])
    assert result.exit_code == 0, result.output
    head = _dataset(project).head()
    blocks = result.stdout.split("\n\n")
    assert len(blocks) == 4
    assert blocks[0].splitlines()[:4] == [
        f"block {head}",
        "Sequence:    3",
        blocks[0].splitlines()[2],
        "Event:       AddData",
    ]
    assert blocks[0].splitlines()[2].startswith("System time: ")


def test_log_unknown_dataset(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(_app(), ["log", "nope", "--project", str(project)])
    assert isinstance(result.exception, DatasetNotFoundError)
    assert str(result.exception) == f"dataset 'nope' not found in workspace {project / '.odf'}"


def test_verify_clean(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(_app(), ["verify", "--integrity", "--project", str(project)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "1 dataset verified\n"
    Workspace(project / ".odf").create("other", model.DatasetKind.Derivative)
    result = runner.invoke(_app(), ["verify", "--workspace", str(project / ".odf")])
    assert result.stdout == (
        "2 datasets verified: no new block since the last check, 1 dataset in full "
        "(use --full to re-check all 5 blocks)\n"
    )
    result = runner.invoke(_app(), ["verify", "--full", "--workspace", str(project / ".odf")])
    assert result.stdout == "2 datasets verified\n"


def test_verify_checks_what_is_new_and_full_checks_everything(
    runner: CliRunner, project: Path, tmp_path: Path
) -> None:
    """After a successful check only the new blocks are checked; what was checked is re-read with --full."""
    args = ["verify", "--integrity", "--project", str(project)]
    assert runner.invoke(_app(), args).stdout == "1 dataset verified\n"  # the first check is a full one
    dataset = _dataset(project)
    writer = Writer(dataset, tmp_path / "scratch")
    for _ in range(3):
        writer.add_data(2, watermark=BASE_TIME, checkpoint=b"ck")
    result = runner.invoke(_app(), args)
    assert result.stdout == (
        "1 dataset verified: 3 new blocks since the last check (use --full to re-check all 7 blocks)\n"
    )
    old_data = dataset.layout.data_path(
        next(b.event.new_data.physical_hash for _, b in dataset.iter_blocks() if b.sequence_number == 3)  # type: ignore[union-attr]
    )
    raw = bytearray(old_data.read_bytes())
    raw[len(raw) // 2] ^= 1
    old_data.write_bytes(bytes(raw))  # changed after it was checked: only --full reads it again
    assert runner.invoke(_app(), args).exit_code == 0
    result = runner.invoke(_app(), [*args, "--full"])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{old_data}: physical hash is ")


def test_verify_reports_problems_by_path(runner: CliRunner, project: Path) -> None:
    dataset = _dataset(project)
    [data_file] = list(dataset.layout.data_dir.iterdir())
    raw = bytearray(data_file.read_bytes())
    raw[len(raw) // 2] ^= 1
    data_file.write_bytes(bytes(raw))
    without = runner.invoke(_app(), ["verify", "trades", "--project", str(project)])
    assert without.exit_code == 0  # a same-size flip needs --integrity
    result = runner.invoke(_app(), ["verify", "trades", "--integrity", "--project", str(project)])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{data_file}: physical hash is ")
    assert "1 problem(s) in 1 of 1 dataset" in result.stderr


# --- end to end through `python -m odfproj` ------------------------------------------------------------

_REGISTERED = {c.name for c in cli_main.COMMANDS}
needs_registration = pytest.mark.skipif(
    not {"log", "verify"} <= _REGISTERED, reason="log/verify are not registered in odfproj/cli/main.py yet"
)


def _odfproj(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``odfproj ARGS`` in ``cwd`` through the real entry point, in-process (none of these starts Spark)."""
    env = {k: v for k, v in os.environ.items() if k != WORKSPACE_ENV}
    with mock.patch.dict(os.environ, env, clear=True), contextlib.chdir(cwd):
        code, stdout, stderr = run_main_split(*args)
    return subprocess.CompletedProcess(["odfproj", *args], code, stdout, stderr)


@needs_registration
def test_cli_log_and_verify_end_to_end(project: Path) -> None:
    log = _odfproj("log", "trades", "--oneline", cwd=project)  # the project is discovered from cwd
    assert log.returncode == 0, log.stderr
    assert len(log.stdout.splitlines()) == 4
    ok = _odfproj("verify", "--integrity", cwd=project)
    assert (ok.returncode, ok.stdout) == (0, "1 dataset verified\n"), ok.stderr
    dataset = _dataset(project)
    dataset.layout.block_path(dataset.head()).write_bytes(b"garbage")
    bad = _odfproj("verify", "--project", str(project), cwd=REPO)
    assert bad.returncode == 1
    assert bad.stdout.startswith(f"{dataset.layout.block_path(dataset.head())}: block content hashes to")


@needs_registration
def test_cli_errors_are_one_line(project: Path) -> None:
    result = _odfproj("log", "missing", "--project", str(project), cwd=REPO)
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: dataset 'missing' not found in workspace {project / '.odf'}"


def test_every_event_kind_has_a_summary() -> None:
    from tests.storage.helpers.chains import polling_source, push_source, set_schema, set_transform

    key = DatasetKeyPair.generate().dataset_id
    events = [
        model.Seed(dataset_id=key, dataset_kind=model.DatasetKind.Root),
        model.AddData(new_source_state=model.SourceState(source_name="s", kind="odf/etag", value="1")),
        model.ExecuteTransform(query_inputs=(model.ExecuteTransformInput(dataset_id=key),)),
        polling_source(),
        set_transform(key),
        model.SetVocab(offset_column="off"),
        model.SetAttachments(
            attachments=model.AttachmentsEmbedded(items=(model.AttachmentEmbedded(path="a", content="b"),))
        ),
        model.SetInfo(description="d", keywords=("k1", "k2")),
        model.SetLicense(short_name="MIT", name="MIT", website_url="https://mit-license.org"),
        set_schema(),
        push_source("p"),
        model.DisablePushSource(source_name="p"),
        model.DisablePollingSource(),
    ]
    assert {type(e).__name__ for e in events} == {t for _, t in model.UNIONS["MetadataEvent"].variants}
    summaries = [summarize(e) for e in events]
    assert summaries[:3] == [
        f"Root dataset {key}",
        "no new data, source state odf/etag",
        "no new data, 1 input(s)",
    ]
    assert summaries[3] == "fetch Url, read Csv, merge Append"
    assert summaries[4] == "spark over 1 input(s): in0"
    assert summaries[5:9] == ["offset=off", "1 attachment(s)", "d [k1, k2]", "MIT"]
    assert summaries[10:] == ["source 'p': read NdJson, merge Append", "source 'p'", ""]


@needs_registration
def test_query_on_a_truncated_data_file_is_a_one_line_error(project: Path) -> None:
    dataset = _dataset(project)
    data = next(
        dataset.layout.data_path(b.event.new_data.physical_hash)
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData) and b.event.new_data is not None
    )
    content = data.read_bytes()
    data.chmod(0o644)
    data.write_bytes(content[: len(content) // 2])
    result = _odfproj("query", "trades", "--project", str(project), cwd=REPO)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: dataset trades: {data}: cannot read this data file")
    assert "internal error" not in line
