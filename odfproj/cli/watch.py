"""``odfproj watch``: re-plan on every save of a manifest, macro or odfproj.yaml; ``--apply`` also runs."""

from __future__ import annotations

import typer

from odfproj.cli.context import CliState
from odfproj.cli.interrupt import SECOND_PRESS, graceful_interrupt, say, stopped_after
from odfproj.cli.options import DatasetSelection, selection_options
from odfproj.engine.session import SparkSessionHolder
from odfproj.plan.model import Action
from odfproj.plan.render import render_text
from odfproj.project.config import spark_settings
from odfproj.run.run import RunEvent
from odfproj.run.watch import WatchCycle, Watcher
from odfproj.run.watch import watch as watch_loop

#: Changed files named in a cycle's header before the rest are counted.
_SHOWN_FILES = 3


@selection_options(changed_since=False)
def watch(
    ctx: typer.Context,
    selection: DatasetSelection = DatasetSelection(),
    apply: bool = typer.Option(
        False,
        "--apply",
        help="Also apply each plan and run the changed datasets and their downstream (starts Spark "
        "on the first data work and keeps it warm). A plan with refused changes is shown, not applied.",
    ),
    threads: int = typer.Option(
        1, "--threads", min=1, help="With --apply: datasets to run at the same time.", metavar="N"
    ),
    show_unchanged: bool = typer.Option(False, "--show-unchanged", help="List unchanged datasets too."),
) -> None:
    """Watch the manifests, macros/ and odfproj.yaml; re-plan after every change until Ctrl-C.

    Prints the plan at start, then after each save a header with the time and the changed files,
    followed by the same plan `odfproj plan` would print (or "no changes"). A broken manifest is
    reported as one error line and watching goes on; the next good save plans again. Without
    --apply nothing is written and no JVM is started. The workspace and .git are not watched;
    bursts of events (an editor's save, a git checkout) are coalesced into one plan.
    """
    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    config = selection.config()
    request = selection.request()
    holder = (
        SparkSessionHolder(spark_settings(config, selection.target, verbose=state.verbose)) if apply else None
    )
    printer = _CyclePrinter(show_unchanged=show_unchanged, apply=apply)
    # The first Ctrl-C ends the loop and a run in progress (between datasets) alike; the second
    # stops at once.
    first_press = f"stopping: finishing the datasets in progress; {SECOND_PRESS}"
    with graceful_interrupt((lambda: say(first_press)) if apply else None) as stop:
        watcher = Watcher(
            config,
            request,
            apply=apply,
            holder=holder,
            threads=threads,
            on_run_event=_print_run_event,
            on_planned=printer.planned,
            debug=state.debug,
            cancel=stop,
        )
        typer.echo(f"watching {watcher.manifest_count()} manifests in {config.root}; Ctrl-C to stop")
        if holder is None:
            watch_loop(watcher, on_cycle=printer.finished, stop_event=stop)
        else:
            with stopped_after(holder):
                watch_loop(watcher, on_cycle=printer.finished, stop_event=stop)
    typer.echo("stopped watching")


class _CyclePrinter:
    """Prints each cycle once: with --apply the plan goes out before the run's progress lines."""

    def __init__(self, *, show_unchanged: bool, apply: bool) -> None:
        self.show_unchanged = show_unchanged
        self.apply = apply
        self._shown: int | None = None

    def planned(self, cycle: WatchCycle) -> None:
        self._shown = cycle.number
        self._header_and_plan(cycle)

    def finished(self, cycle: WatchCycle) -> None:
        if cycle.number != self._shown:
            self._header_and_plan(cycle)
        if cycle.error is not None:
            typer.echo(typer.style("error: ", fg="red", bold=True) + cycle.error)
            return
        if cycle.refused and self.apply:
            typer.echo("the plan has refused changes: nothing was applied")
        run = cycle.run
        if run is not None:
            if run.apply is not None and run.apply.changed:
                typer.echo(run.apply.summary())
            typer.echo(run.summary())

    def _header_and_plan(self, cycle: WatchCycle) -> None:
        typer.echo(typer.style(_header(cycle), bold=True))
        plan = cycle.plan
        if plan is None:
            return
        visible = [s for s in plan.definitions if self.show_unchanged or s.action is not Action.UNCHANGED]
        if not visible and not plan.warnings:
            typer.echo(f"no changes ({plan.count(Action.UNCHANGED)} unchanged)")
        else:
            typer.echo(render_text(plan, show_unchanged=self.show_unchanged), nl=False)


def _header(cycle: WatchCycle) -> str:
    when = cycle.at.strftime("%H:%M:%S")
    if cycle.initial:
        what = "initial plan"
    elif cycle.changed:
        shown = ", ".join(cycle.changed[:_SHOWN_FILES])
        more = len(cycle.changed) - _SHOWN_FILES
        what = f"changed: {shown}" + (f" and {more} more" if more > 0 else "")
    else:
        what = "watch"
    return f"[{when}] {what} ({cycle.seconds:.2f}s)"


def _print_run_event(event: RunEvent) -> None:
    line = event.line()
    if line is not None:
        typer.echo(f"  {line}")
