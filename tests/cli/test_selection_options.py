"""``selection_options``: one declaration of the selection options, received by a command as one value."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from odfproj.cli.options import DatasetSelection, selection_options


def _app(*, changed_since: bool) -> tuple[typer.Typer, list[DatasetSelection]]:
    got: list[DatasetSelection] = []
    app = typer.Typer()

    @app.command()
    @selection_options(changed_since=changed_since)
    def command(selection: DatasetSelection = DatasetSelection(), threads: int = typer.Option(1)) -> None:
        got.append(selection)
        typer.echo(f"threads={threads}")

    return app, got


def test_the_options_arrive_as_one_selection_with_the_commands_own_options() -> None:
    app, got = _app(changed_since=True)
    args = ["--project", "p", "-t", "prod", "-s", "a", "-s", "b+", "--exclude", "c"]
    result = CliRunner().invoke(app, [*args, "--changed-since", "main", "--var", "n=3", "--threads", "2"])
    assert result.exit_code == 0, result.output
    assert "threads=2" in result.output
    assert got == [DatasetSelection(Path("p"), "prod", ("a", "b+"), ("c",), "main", ("n=3",))]
    assert got[0].narrowed
    request = got[0].request()
    assert (request.target, request.select, request.changed_since) == ("prod", ("a", "b+"), "main")
    assert dict(request.vars_override) == {"n": 3}


def test_no_options_is_the_whole_project_and_changed_since_can_be_left_out() -> None:
    app, got = _app(changed_since=False)
    assert CliRunner().invoke(app, []).exit_code == 0
    assert got == [DatasetSelection()] and not got[0].narrowed
    refused = CliRunner().invoke(app, ["--changed-since", "main"])
    assert refused.exit_code != 0 and "No such option" in refused.output
