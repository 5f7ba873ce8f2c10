"""``odfproj watch``: re-plan on every save of a manifest, macro or odfproj.yaml; ``--apply`` also runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from odfproj.cli.context import CliState
from odfproj.cli.interrupt import SECOND_PRESS, graceful_interrupt, say, stopped_after
from odfproj.cli.options import DatasetSelection, query_checker_for, selection_options
from odfproj.engine.session import SparkSessionHolder
from odfproj.plan.model import Action, Plan

if TYPE_CHECKING:
    from odfproj.run.run import RunEvent
    from odfproj.run.watch import WarmQueryChecks, WatchCycle

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
        "on the first data work and keeps it warm; queries are checked on that session, not on the warm "
        "engine). A plan with refused changes is shown, not applied.",
    ),
    threads: int = typer.Option(
        1, "--threads", min=1, help="With --apply: datasets to run at the same time.", metavar="N"
    ),
    show_unchanged: bool = typer.Option(False, "--show-unchanged", help="List unchanged datasets too."),
) -> None:
    """Watch the manifests, macros/ and odfproj.yaml; re-plan after every change until Ctrl-C.

    Prints the plan at start, then after each save a header with the time and the changed files,
    followed by the same plan `odfproj plan` would print (or "no changes"). A broken manifest is
    reported as one error line and watching goes on; the next good save plans again. The workspace
    and .git are not watched; bursts of events (an editor's save, a git checkout) are coalesced into
    one plan.

    Without --apply nothing is written and this command starts no JVM of its own: created and changed
    queries are checked on the warm engine (see `odfproj engine`), as `plan` checks them (the output
    schema, or one `error:` line naming the file, the dataset and the cause), about a second after
    the save. Watching starts the warm engine in the background if it is not running and keeps it up
    until Ctrl-C; plans made while it starts are checked again once it is up. Where the warm engine is
    off (--cold, ODFPROJ_WARM_ENGINE=off, CI set), watch says so once and queries are shown as not
    validated (run checks them).
    """
    from odfproj.project.config import spark_settings
    from odfproj.run.watch import Watcher
    from odfproj.run.watch import watch as watch_loop

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    config = selection.config()
    request = selection.request()
    holder = (
        SparkSessionHolder(spark_settings(config, selection.target, verbose=state.verbose)) if apply else None
    )
    checks, unchecked = (None, None) if apply else _query_checks(state)
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
            query_checks=checks,
        )
        typer.echo(f"watching {watcher.manifest_count()} manifests in {config.root}; Ctrl-C to stop")
        if unchecked is not None:
            typer.echo(unchecked)
        if holder is not None:
            with stopped_after(holder):
                watch_loop(watcher, on_cycle=printer.finished, on_notice=typer.echo, stop_event=stop)
        elif checks is not None:
            checks.start()
            try:
                watch_loop(watcher, on_cycle=printer.finished, on_notice=typer.echo, stop_event=stop)
            finally:
                checks.close()
        else:
            watch_loop(watcher, on_cycle=printer.finished, on_notice=typer.echo, stop_event=stop)
    typer.echo("stopped watching")


def _query_checks(state: CliState) -> tuple[WarmQueryChecks | None, str | None]:
    """Without --apply: plan's query checks on the warm engine, or why there are none (said once).

    The checks run with the analysis sandbox's settings, never the target's, so every target gets
    them, as in `plan`; only the warm engine's switches (--warm/--cold, ODFPROJ_WARM_ENGINE, CI) decide.
    """
    from odfproj.engine.warm.choice import warm_choice
    from odfproj.engine.warm.client import WarmSessionHolder
    from odfproj.run.watch import WarmQueryChecks

    choice = warm_choice(state.warm)
    if not choice.enabled:
        return (
            None,
            f"queries are not checked while watching: the warm engine is off ({choice.reason}); run checks them",
        )
    checker, holder = query_checker_for(True, verbose=state.verbose, warm=True)
    assert checker is not None and isinstance(holder, WarmSessionHolder), "the warm engine was chosen"
    return WarmQueryChecks(checker, holder), None


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
        if cycle.plan is not None:
            for line in _refusal_lines(cycle.plan):
                typer.echo(typer.style("error: ", fg="red", bold=True) + line)
        if cycle.notice is not None:
            typer.echo(cycle.notice)
        if cycle.refused and self.apply:
            typer.echo("the plan has refused changes: nothing was applied")
        run = cycle.run
        if run is not None:
            if run.apply is not None and run.apply.changed:
                typer.echo(run.apply.summary())
            typer.echo(run.summary())

    def _header_and_plan(self, cycle: WatchCycle) -> None:
        from odfproj.plan.render import render_text

        typer.echo(typer.style(_header(cycle), bold=True))
        plan = cycle.plan
        if plan is None:
            return
        visible = [s for s in plan.definitions if self.show_unchanged or s.action is not Action.UNCHANGED]
        if not visible and not plan.warnings:
            typer.echo(f"no changes ({plan.count(Action.UNCHANGED)} unchanged)")
        else:
            typer.echo(render_text(plan, show_unchanged=self.show_unchanged), nl=False)


def _refusal_lines(plan: Plan) -> list[str]:
    """One line per refused dataset, under the plan that shows it: its file, its name and the plan's first
    reason (an invalid query's engine message, a removed column, ...), with how many more there are."""
    lines = []
    for step in plan.definitions:
        if step.action is not Action.REFUSED or not step.reasons:
            continue
        first = " ".join(step.reasons[0].split())
        more = len(step.reasons) - 1
        where = f"{step.manifest}: " if step.manifest else ""
        tail = f" (and {more} more reason{'s' if more > 1 else ''})" if more else ""
        lines.append(f"{where}{step.dataset}: {first}{tail}")
    return lines


def _header(cycle: WatchCycle) -> str:
    when = cycle.at.strftime("%H:%M:%S")
    if cycle.initial:
        what = "initial plan"
    elif cycle.changed:
        shown = ", ".join(cycle.changed[:_SHOWN_FILES])
        more = len(cycle.changed) - _SHOWN_FILES
        what = f"changed: {shown}" + (f" and {more} more" if more > 0 else "")
    elif cycle.reason is not None:
        what = cycle.reason
    else:
        what = "watch"
    return f"[{when}] {what} ({cycle.seconds:.2f}s)"


def _print_run_event(event: RunEvent) -> None:
    line = event.line()
    if line is not None:
        typer.echo(f"  {line}")
