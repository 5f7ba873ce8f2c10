"""``odfproj test [SELECTORS]``: run the selected datasets' data tests, print the failing rows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from odfproj.cli.context import CliState
from odfproj.cli.interrupt import stopped_after
from odfproj.cli.options import (
    DatasetSelection,
    EnvReadOption,
    ExcludeOption,
    ProjectOption,
    TargetOption,
    VarOption,
    as_at_time,
    session_holder,
)
from odfproj.cli.tables import QueryFormat, print_table

if TYPE_CHECKING:
    from odfproj.quality.execute import TestResult

#: Each outcome's style, by its value (``quality.execute.Outcome``).
_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "error": "bold red"}


def test(
    ctx: typer.Context,
    selectors: list[str] | None = typer.Argument(
        None,
        help="Datasets whose tests to run, in --select's grammar (NAME, +NAME, NAME+, path:GLOB, tag:KEYWORD). "
        "Default: all.",
    ),
    exclude: list[str] | None = ExcludeOption,
    as_at: str | None = typer.Option(
        None,
        "--as-at",
        metavar="TIME",
        help="Test every dataset as it was known at this RFC 3339 system time (freshness is judged at it too).",
    ),
    env: str | None = EnvReadOption,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
    variables: list[str] | None = VarOption,
) -> None:
    """Run data tests (the project's tests/ files) over the datasets' current state; exit 1 on failure.

    Each test prints one line (PASS, FAIL, WARN or ERROR) with where it is defined; a failing test
    also prints up to 10 of its failing rows. Tests with severity warn never fail the command; a
    test that cannot run (no data yet, a query Spark refuses) does. Nothing is written. See
    docs/guide/data-tests.md. Example:

        odfproj test org.example.weather.daily+ --as-at 2024-01-31T00:00:00Z
    """
    from odfproj.engine.spark import SparkEngine
    from odfproj.project.config import load_project, spark_settings
    from odfproj.quality.project import test_project
    from odfproj.run.environments import require_environment

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    moment = as_at_time(as_at)
    config = load_project(project).in_environment(env)
    require_environment(config, target)
    request = DatasetSelection(
        project, target, tuple(selectors or ()), tuple(exclude or ()), variables=tuple(variables or ())
    ).request()
    holder = session_holder(spark_settings(config, target, verbose=state.verbose), state.warm)
    console = Console(highlight=False, soft_wrap=True)
    with stopped_after(holder):  # read-only: Ctrl-C has nothing to finish
        outcome = test_project(
            config, request, SparkEngine(holder), as_at=moment, on_result=lambda r: _show(console, r)
        )
    if outcome.untested and not outcome.results:
        console.print(f"no data tests for the {len(outcome.untested)} selected dataset(s)")
    console.print(escape(outcome.summary()))
    if not outcome.ok:
        raise typer.Exit(1)


def _show(console: Console, result: TestResult) -> None:
    style = _STYLE[result.outcome]
    console.print(f"[{style}]{result.outcome.value.upper()}[/] {escape(result.line().split(' ', 1)[1])}")
    if result.sample is not None and result.sample.num_rows:
        print_table(result.sample, QueryFormat.table)
