"""``odfproj run``: apply the definitions, then ingest and transform the selected datasets in order."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from odfproj.cli.context import CliState
from odfproj.cli.interrupt import SECOND_PRESS, graceful_interrupt, say, stopped_after
from odfproj.cli.options import (
    DatasetSelection,
    LockTimeoutOption,
    ValidateQueriesOption,
    selection_options,
    warm_engine,
)
from odfproj.cli.remote_ws import synced

# Spark-free at import (PySpark is imported when a session starts); tests replace it here.
from odfproj.engine.session import SparkSessionHolder

if TYPE_CHECKING:
    from odfproj.plan.model import Plan
    from odfproj.quality.definitions import TestSuite
    from odfproj.run.run import DatasetRun, RunEvent, RunResult

#: Each dataset status's style, by its value (``run.run.Status``).
_STYLE = {"success": "green", "error": "bold red", "skipped": "yellow", "cancelled": "magenta"}

#: Printed on the first Ctrl-C of a run.
FIRST_INTERRUPT = (
    "interrupted: finishing the datasets in progress and starting no more; "
    f"{SECOND_PRESS} (every commit is atomic)"
)


@selection_options()
def run(
    ctx: typer.Context,
    selection: DatasetSelection = DatasetSelection(),
    threads: int = typer.Option(
        1, "--threads", min=1, help="Datasets to process at the same time.", metavar="N"
    ),
    lock_timeout: float | None = LockTimeoutOption,
    validate_queries: bool = ValidateQueriesOption,
    full_refresh: bool = typer.Option(
        False,
        "--full-refresh",
        help="Recompute every selected derivative over its inputs' whole states instead of only their "
        "new records (the stateless, grouped and join paths); the result is the same.",
    ),
) -> None:
    """Apply the manifests, then bring every selected dataset's data up to date, inputs first.

    Roots with a polling source are ingested; derivatives are transformed. A failing dataset is
    reported and its downstream skipped; the others still run. Exits 1 if any dataset failed.
    Results are also written to run_results.json in the workspace.

    Ctrl-C stops starting datasets, lets the ones in progress finish, prints what finished and
    what was cancelled, and exits 130; a second Ctrl-C stops at once (every commit is atomic, so
    each dataset stays valid).
    """
    from odfproj.project.config import spark_settings
    from odfproj.run.run import HandedOff, run_project
    from odfproj.run.warm_run import (
        WarmRunRefused,
        WarmRunRequest,
        plan_needs_spark,
        run_on_warm_engine,
        warm_run_refusal,
    )

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    config = selection.config()
    settings = spark_settings(config, selection.target, verbose=state.verbose)
    holder = SparkSessionHolder(settings)
    request = selection.request()
    warm = warm_run_refusal(state.warm, settings)
    if warm is None and config.remote_workspace() is not None:
        # The server would fetch the store's objects with the credentials it started with, not this command's.
        warm = "the workspace is remote: its objects are fetched with this command's own credentials"
    if warm is not None and state.verbose:
        say(f"warm engine not used ({warm}): this run starts a JVM of its own")

    def hand_off(plan: Plan, suite: TestSuite) -> bool:
        """To the warm engine when the plan needs Spark; a run with nothing to do stays here."""
        if plan_needs_spark(plan, suite):
            return True
        if state.verbose:
            say("warm engine not used (nothing in this run needs Spark): this run starts no JVM")
        return False

    console = Console(highlight=False)
    live = sys.stdout.isatty()
    view = _LiveView()
    on_event = view.update if live else _print_line
    display = Live(view, console=console, refresh_per_second=4, transient=True) if live else nullcontext()
    on_first = (lambda: view.interrupt(FIRST_INTERRUPT)) if live else (lambda: say(FIRST_INTERRUPT))
    remote = synced(config, selection.target, writer="odfproj run", report=say if state.verbose else None)
    # The same options for a warm run and a cold one.
    options: dict[str, Any] = {
        "threads": threads,
        "lock_timeout": lock_timeout,
        "validate_queries": validate_queries,
        "full_refresh": full_refresh,
    }
    with remote, stopped_after(holder), display, graceful_interrupt(on_first) as stop:
        result: RunResult | None = None
        if warm is None:
            try:  # planned here first: a run with nothing to do never reaches the server
                result = run_project(
                    config,
                    request,
                    holder=holder,
                    on_event=on_event,
                    cancel=stop,
                    hand_off=hand_off,
                    **options,
                )
            except HandedOff:  # the whole run in the warm engine's server (run.warm_run)
                answer = run_on_warm_engine(
                    warm_engine(),
                    WarmRunRequest.of(config, request, settings, **options),
                    on_event=on_event,
                    cancel=stop,
                )
                if isinstance(answer, WarmRunRefused):
                    if state.verbose:
                        say(f"warm engine not used ({answer.reason}): this run starts a JVM of its own")
                else:
                    result = answer
        if result is None:
            result = run_project(config, request, holder=holder, on_event=on_event, cancel=stop, **options)
    _summary(console, result)
    if result.interrupted:
        raise typer.Exit(130)
    if not result.ok:
        raise typer.Exit(1)


def _print_line(event: RunEvent) -> None:
    """Off a terminal (CI logs, a pipe): one line per event, names never shortened."""
    line = event.line()
    if line is not None:
        typer.echo(line)


class _LiveView:
    """The per-dataset progress table, updated from worker threads and re-drawn by rich's refresh.

    Rich calls ``__rich__`` on every refresh, so the counter and the running datasets' clocks move
    even while no event arrives (a long ingest, the JVM starting).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: name -> (status, detail, started); ``started`` is set while the dataset runs.
        self._rows: dict[str, tuple[str, str, float | None]] = {}
        self._finished: set[str] = set()
        self._started = time.monotonic()
        self._note = ""

    def update(self, event: RunEvent) -> None:
        now = time.monotonic()
        with self._lock:
            since = self._rows.get(event.dataset, ("", "", now))[2] or now
            if event.phase == "queued":
                self._rows[event.dataset] = ("[dim]queued[/]", "", None)
            elif event.phase == "start":
                self._rows[event.dataset] = (f"[cyan]running[/] ({event.work.value})", "", now)
            elif event.phase == "spark":
                self._rows[event.dataset] = (f"[cyan]starting Spark[/] ({event.work.value})", "", since)
            elif event.result is not None:
                self._rows[event.dataset] = (_status(event.result), _detail(event.result), None)
                self._finished.add(event.dataset)

    def interrupt(self, note: str) -> None:
        """Called from the signal handler: only sets a field that the next refresh shows."""
        self._note = note

    def __rich__(self) -> Group:
        now = time.monotonic()
        table = Table(box=None, show_header=False, pad_edge=False)
        with self._lock:
            done = len(self._finished)
            running = sum(1 for _, _, since in self._rows.values() if since is not None)
            for name, (status, detail, since) in self._rows.items():
                clock = f"{now - since:.0f}s" if since is not None else ""
                table.add_row(escape(name), status, clock, escape(detail))
        head = f"[bold]{done} of {len(self._rows)}[/] done, {running} running, {now - self._started:.0f}s"
        lines: list[Any] = [head, table]
        if self._note:
            lines.append(f"[magenta]{escape(self._note)}[/]")
        return Group(*lines)


def _status(r: DatasetRun) -> str:
    return f"[{_STYLE[r.status]}]{r.status.value}[/]"


def _detail(r: DatasetRun) -> str:
    from odfproj.run.run import Status

    if r.status is Status.SUCCESS:
        return f"{r.records_added} record(s)" + (f", {r.message}" if r.message else "")
    return r.message


def _summary(console: Console, result: RunResult) -> None:
    """A table of every dataset, then the full message of each failure and skip (tables wrap badly).

    Off a terminal (CI logs, a pipe) rich would squeeze the table into 80 columns and cut dataset
    names; the console is made as wide as the longest name needs instead.
    """
    from odfproj.run.run import RUN_RESULTS_FILE, Status

    if not console.is_terminal:
        longest = max((len(r.dataset) for r in result.results), default=0)
        console = Console(highlight=False, width=max(100, longest + 60))
    for warning in result.warnings:
        console.print(f"[yellow]warning[/]: {escape(warning)}", soft_wrap=True)
    if result.apply is not None and (result.apply.changed or result.apply.not_applied):
        console.print(escape(result.apply.summary()))
    table = Table()
    for column in ("Dataset", "Work", "Status", "Path", "Records", "Blocks", "Time"):
        table.add_column(column, justify="right" if column in ("Records", "Blocks", "Time") else "left")
    for r in result.results:
        table.add_row(
            escape(r.dataset),
            r.work.value,
            _status(r),
            escape(r.path),
            str(r.records_added),
            str(r.blocks_added),
            f"{r.seconds:.1f}s",
        )
    console.print(table)
    for r in result.results:
        if r.status is not Status.SUCCESS:
            console.print(f"{_status(r)} {escape(r.dataset)}: {escape(r.message)}", soft_wrap=True)
        elif r.mode.startswith(
            "full"
        ):  # a query that reads whole histories on every update: why, the way out
            hint = f"; hint: {r.hint}" if r.hint else ""
            console.print(f"{escape(r.dataset)}: path {escape(r.mode)}{escape(hint)}", soft_wrap=True)
    console.print(escape(result.summary()))
    console.print(f"Results written to {escape(str(result.workspace / RUN_RESULTS_FILE))}", soft_wrap=True)
    if result.log_file is not None:
        console.print(
            f"Log (with the warnings not shown here): {escape(str(result.log_file))}", soft_wrap=True
        )
