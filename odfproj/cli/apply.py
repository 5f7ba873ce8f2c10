"""``odfproj apply [PLANFILE]``: append the metadata events a plan lists, under the workspace lock."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from odfproj.cli.context import CliState
from odfproj.cli.interrupt import SECOND_PRESS, graceful_interrupt, say
from odfproj.cli.options import (
    DatasetSelection,
    LockTimeoutOption,
    ValidateQueriesOption,
    query_checker_for,
    selection_options,
)
from odfproj.cli.remote_ws import synced
from odfproj.errors import PlanError

if TYPE_CHECKING:
    from odfproj.project.config import ProjectConfig
    from odfproj.run.apply import AppliedStep


@selection_options()
def apply(
    ctx: typer.Context,
    plan_file: Path | None = typer.Argument(
        None, help="A plan saved by `odfproj plan --out FILE`; applied exactly, without a prompt."
    ),
    selection: DatasetSelection = DatasetSelection(),
    auto_approve: bool = typer.Option(
        False, "--auto-approve", "-y", help="Apply without asking (for CI). Needed when stdin is not a TTY."
    ),
    lock_timeout: float | None = LockTimeoutOption,
    validate_queries: bool = ValidateQueriesOption,
) -> None:
    """Make the workspace match the manifests: create datasets and append changed definition events.

    Without PLANFILE, plans first (the same plan `odfproj plan` shows) and asks for confirmation.
    With PLANFILE, applies exactly that plan and refuses it, naming the dataset, if any dataset's head
    moved since it was made. Datasets are handled in dependency order, each in one atomic commit;
    refused changes stop the apply before anything is written. Applying twice changes nothing.
    Ctrl-C while applying stops after the dataset in progress (exit 130); apply again to finish.
    """
    from odfproj.plan.render import render_text
    from odfproj.plan.sources import plan_project
    from odfproj.run.apply import apply_plan, check_plan, read_saved_plan
    from odfproj.storage.workspace import Workspace

    config = selection.config()
    workspace = Workspace(config.workspace(selection.target), odf_version=config.odf_version)
    with (
        synced(config, selection.target, writer="odfproj apply"),
        _environment_made(config, selection.target),  # --env: made on first use, production untouched
        workspace.lock(purpose="odfproj apply", timeout=lock_timeout),
    ):
        if plan_file is not None:
            if selection.narrowed:
                raise PlanError(
                    "a saved plan is applied as it is: drop --select/--exclude/--changed-since/--var"
                )
            plan = read_saved_plan(plan_file, workspace)
        else:
            state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
            checker, holder = query_checker_for(validate_queries, verbose=state.verbose, warm=state.warm)
            try:
                plan, _ = plan_project(config, selection.request(), query_checker=checker)
            finally:
                if holder is not None:
                    holder.stop()
            typer.echo(render_text(plan, data=False), nl=False)
            if plan.has_refusals:
                raise typer.Exit(1)
            if not plan.has_changes:
                return
            if not auto_approve:
                _confirm()
        if not plan.has_changes:
            check_plan(plan, workspace)  # a stale saved plan is refused even when it changes nothing
            typer.echo("No changes. The workspace matches the plan.")
            return
        with graceful_interrupt(lambda: say(f"interrupted: finishing this dataset; {SECOND_PRESS}")) as stop:
            result = apply_plan(plan, workspace, on_step=_report, on_rename=_report_rename, cancel=stop)
    typer.echo(result.summary())
    if result.not_applied:
        raise typer.Exit(130)


@contextmanager
def _environment_made(config: ProjectConfig, target: str | None) -> Iterator[None]:
    """Make ``--env``'s environment if it does not exist, once a remote workspace has been checked out."""
    from odfproj.run.environments import ensure_environment

    ensure_environment(config, target)
    yield


def _confirm() -> None:
    if not sys.stdin.isatty():
        raise PlanError("apply needs confirmation: rerun with --auto-approve (stdin is not a terminal)")
    typer.echo("")
    if not typer.confirm("Apply these changes?", default=False):
        typer.echo("Apply cancelled; nothing was changed.")
        raise typer.Exit(1)


def _report_rename(old: str, new: str) -> None:
    typer.echo(f"~ {old} -> {new}: renamed (same id, chain and data)")


def _report(step: AppliedStep) -> None:
    if step.events:
        typer.echo(f"{step.action.symbol} {step.dataset}: {', '.join(step.events)} -> {step.head[:20]}…")
