"""``odfproj diff``: how datasets' tables changed, row by row, since a moment."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from odfproj.cli.context import CliState
from odfproj.cli.interrupt import stopped_after
from odfproj.cli.options import (
    PROJECT_HELP,
    WORKSPACE_HELP,
    as_at_time,
    project_engine,
    resolve_workspace,
)
from odfproj.errors import OdfprojError


class DiffFormat(enum.StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def diff(
    ctx: typer.Context,
    datasets: list[str] | None = typer.Argument(None, help="Dataset names. Default: every dataset."),
    since: str | None = typer.Option(
        None,
        "--since",
        metavar="TIME",
        help="Compare each dataset's state now with its state as known at this RFC 3339 system time.",
    ),
    sample: int = typer.Option(
        5, "--sample", min=0, metavar="N", help="Show at most N rows of each kind (added, removed, changed)."
    ),
    env: str | None = typer.Option(
        None,
        "--env",
        metavar="NAME",
        help="Compare preview environment NAME's datasets with production's: what publishing it would change "
        "(default datasets: those NAME changed).",
    ),
    output_format: DiffFormat = typer.Option(
        DiffFormat.text, "--format", help="text, json, or markdown (fits a pull-request comment)."
    ),
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Show how datasets' tables differ between two points: schema changes, row counts, and the rows
    added, removed and changed.

    Each dataset's state (the rows valid: the latest row per key for a dataset with a primary key,
    else the records not retracted) now is compared with its state as known at --since, or, with
    --env NAME, environment NAME's state with production's (for a pull request's comment). Rows are
    matched by primary key where the dataset has one (a changed row names the columns that differ),
    else compared as multisets. Counts are exact; each kind shows its first --sample rows. Example:

        odfproj diff org.example.weather.daily --since 2026-11-26T00:00:00Z --format markdown
        odfproj diff --env pr-12 --format markdown

    Starts Spark (or uses the warm engine). Exits 0 whether or not anything differs.
    """
    from odfproj.engine.warm.client import WarmSessionHolder
    from odfproj.run.data_diff import diff_datasets, warm_diff
    from odfproj.run.diff_render import render_json, render_markdown, render_text

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    if (since is None) == (env is None):
        raise OdfprojError(
            "diff: name the point to compare with: --since TIME (an RFC 3339 system time) or --env NAME "
            "(an environment against production)"
        )
    moment = as_at_time(since)
    opened = resolve_workspace(workspace, project, env=env)
    base = opened.production
    names = [opened.open(name).name for name in datasets or []]  # an unknown name fails before Spark starts
    engine = project_engine(project, workspace, verbose=state.verbose, warm=state.warm)
    with stopped_after(engine.holder):  # Ctrl-C: nothing to finish, a diff only reads
        if isinstance(engine.holder, WarmSessionHolder):
            result = warm_diff(engine.holder, opened, names, since=moment, base=base, sample=sample)
        else:
            result = diff_datasets(engine, opened, names, since=moment, base=base, sample=sample)
    render = {
        DiffFormat.text: render_text,
        DiffFormat.json: render_json,
        DiffFormat.markdown: render_markdown,
    }
    typer.echo(render[output_format](result), nl=False)
