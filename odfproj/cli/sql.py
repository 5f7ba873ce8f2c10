"""``odfproj sql "SELECT ..."``: one Spark SQL query over every dataset of the workspace as a view."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.context import CliState
from odfproj.cli.interrupt import stopped_after
from odfproj.cli.io import read_input
from odfproj.cli.options import (
    PROJECT_HELP,
    WORKSPACE_HELP,
    EnvReadOption,
    as_at_time,
    project_engine,
    resolve_workspace,
)
from odfproj.cli.tables import QueryFormat, print_table
from odfproj.errors import OdfprojError


def sql(
    ctx: typer.Context,
    query: str = typer.Argument(
        ...,
        help="A Spark SQL query, or - to read it from standard input. Quote dataset names with backticks.",
    ),
    as_at: str | None = typer.Option(
        None, "--as-at", help="Every dataset as it was known at this RFC 3339 system time.", metavar="TIME"
    ),
    limit: int = typer.Option(
        100, "--limit", "-n", min=0, help="At most this many rows (0: all).", metavar="N"
    ),
    output_format: QueryFormat = typer.Option(
        QueryFormat.table, "--format", help="table, csv or json lines."
    ),
    env: str | None = EnvReadOption,
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Run a Spark SQL query over the workspace's datasets, each exposed as a view.

    `NAME` is a dataset's current state (for a dataset with a primary key, the latest valid row per
    key, read through the state index; for any other, its records not retracted), with event_time
    and its columns: exactly what a derivative query sees of an input. `NAME$changelog` is every
    record as stored, with offset, op and system_time. With --as-at both show the dataset as it was
    known at that time. The query is checked like a derivative's (one SELECT, deterministic, no file
    or JVM access), so what works here works in a manifest. Example:

        odfproj sql "SELECT location, count(*) FROM `org.example.weather.daily` GROUP BY location"
    """
    from odfproj.engine.warm.client import WarmSessionHolder
    from odfproj.plan.served_checks import warm_sql
    from odfproj.state.views import run_sql

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    text = read_input("-").decode() if query == "-" else query
    if not text.strip():
        raise OdfprojError("sql: the query is empty")
    moment = as_at_time(as_at)
    opened = resolve_workspace(workspace, project, env=env)
    engine = project_engine(project, workspace, verbose=state.verbose, warm=state.warm)
    with stopped_after(engine.holder):  # Ctrl-C: nothing to finish, the query is read-only
        if isinstance(engine.holder, WarmSessionHolder):  # the server runs it whole: no Spark client here
            table = warm_sql(engine.holder, opened, text, as_at=moment, limit=limit or None)
        else:
            table = run_sql(engine, opened, text, as_at=moment, limit=limit or None)
    print_table(table, output_format)
