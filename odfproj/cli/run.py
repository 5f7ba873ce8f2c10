"""``odfproj run``: apply the definitions, then ingest and transform the selected datasets in order."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from odfproj.cli.context import CliState
from odfproj.cli.options import (
    ExcludeOption,
    ProjectOption,
    SelectOption,
    TargetOption,
    ValidateQueriesOption,
    VarOption,
    plan_request,
)
from odfproj.engine.session import SparkSessionHolder
from odfproj.project.config import load_project, spark_settings
from odfproj.run.run import (
    RUN_RESULTS_FILE,
    DatasetRun,
    RunEvent,
    RunResult,
    Status,
    run_project,
)

_STYLE = {Status.SUCCESS: "green", Status.ERROR: "bold red", Status.SKIPPED: "yellow"}


def run(
    ctx: typer.Context,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
    select: list[str] | None = SelectOption,
    exclude: list[str] | None = ExcludeOption,
    variables: list[str] | None = VarOption,
    threads: int = typer.Option(1, "--threads", min=1, help="Datasets to process at the same time."),
    lock_timeout: float | None = typer.Option(
        None,
        "--lock-timeout",
        help="Seconds to wait for another apply/run to finish (default: fail at once).",
    ),
    validate_queries: bool = ValidateQueriesOption,
) -> None:
    """Apply the manifests, then bring every selected dataset's data up to date, inputs first.

    Roots with a polling source are ingested; derivatives are transformed. A failing dataset is
    reported and its downstream skipped; the others still run. Exits 1 if any dataset failed.
    Results are also written to run_results.json in the workspace.
    """
    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    config = load_project(project)
    request = plan_request(target, select, exclude, None, variables)
    holder = SparkSessionHolder(spark_settings(config, target, verbose=state.verbose))
    console = Console(highlight=False)
    live = sys.stdout.isatty()
    try:
        if live:
            view = _LiveView()
            with Live(view.render(), console=console, refresh_per_second=8, transient=True) as display:

                def on_event(event: RunEvent) -> None:
                    view.update(event)
                    display.update(view.render())

                result = run_project(
                    config,
                    request,
                    holder=holder,
                    threads=threads,
                    on_event=on_event,
                    lock_timeout=lock_timeout,
                    validate_queries=validate_queries,
                )
        else:
            result = run_project(
                config,
                request,
                holder=holder,
                threads=threads,
                on_event=_print_line,
                lock_timeout=lock_timeout,
                validate_queries=validate_queries,
            )
    finally:
        holder.stop()
    _summary(console, result)
    if not result.ok:
        raise typer.Exit(1)


def event_line(event: RunEvent) -> str:
    """One line per run event, for output that is not a terminal (CI logs) and for watch --apply."""
    if event.phase == "start":
        return f"START {event.dataset} ({event.work.value})"
    r = event.result
    assert r is not None
    detail = f"{r.records_added} record(s)" if r.status is Status.SUCCESS else r.message
    if r.status is Status.SUCCESS and r.message:
        detail += f", {r.message}"
    return f"{r.status.value.upper()} {r.dataset} ({r.work.value}) in {r.seconds:.1f}s: {detail}"


def _print_line(event: RunEvent) -> None:
    typer.echo(event_line(event))


class _LiveView:
    """The per-dataset progress table, updated from worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[str, str]] = {}

    def update(self, event: RunEvent) -> None:
        with self._lock:
            if event.phase == "start":
                self._rows[event.dataset] = (f"[cyan]running[/] ({event.work.value})", "")
            elif event.result is not None:
                self._rows[event.dataset] = (_status(event.result), _detail(event.result))

    def render(self) -> Table:
        table = Table(box=None, show_header=False, pad_edge=False)
        with self._lock:
            for name, (status, detail) in self._rows.items():
                table.add_row(escape(name), status, escape(detail))
        return table


def _status(r: DatasetRun) -> str:
    return f"[{_STYLE[r.status]}]{r.status.value}[/]"


def _detail(r: DatasetRun) -> str:
    if r.status is Status.SUCCESS:
        return f"{r.records_added} record(s)" + (f", {r.message}" if r.message else "")
    return r.message


def _summary(console: Console, result: RunResult) -> None:
    """A table of every dataset, then the full message of each failure and skip (tables wrap badly)."""
    if result.apply is not None and result.apply.changed:
        console.print(escape(result.apply.summary()))
    table = Table()
    for column in ("Dataset", "Work", "Status", "Records", "Blocks", "Time"):
        table.add_column(column, justify="right" if column in ("Records", "Blocks", "Time") else "left")
    for r in result.results:
        table.add_row(
            escape(r.dataset),
            r.work.value,
            _status(r),
            str(r.records_added),
            str(r.blocks_added),
            f"{r.seconds:.1f}s",
        )
    console.print(table)
    for r in result.results:
        if r.status is not Status.SUCCESS:
            console.print(f"{_status(r)} {escape(r.dataset)}: {escape(r.message)}", soft_wrap=True)
    console.print(escape(result.summary()))
    console.print(f"Results written to {escape(str(result.workspace / RUN_RESULTS_FILE))}", soft_wrap=True)
