"""``odfproj destroy``: delete datasets from the workspace (orphans, or selected ones) after asking."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from odfproj.cli.options import LockTimeoutOption, ProjectOption, TargetOption


def destroy(
    selectors: list[str] | None = typer.Argument(
        None,
        help="Datasets to destroy: NAME, +NAME, NAME+, path:GLOB, tag:KEYWORD (as --select); a plain NAME may be an orphan.",
    ),
    orphans: bool = typer.Option(
        False, "--orphans", help="Also destroy every dataset of the workspace that no manifest defines."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed when stdin is not a terminal)."),
    lock_timeout: float | None = LockTimeoutOption,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
) -> None:
    """Delete datasets from the workspace: their chain, data, caches, state index, name record and key.

    Shows each dataset and the datasets that read it, then asks; --yes skips the question, and
    without a terminal to ask on destroy refuses unless --yes is given. Runs under the workspace
    lock. Cannot be undone: a dataset a manifest still defines is created anew, with a new id, by
    the next run.
    """
    from odfproj.project.config import load_project
    from odfproj.run.destroy import DestroyError, destroy_plan
    from odfproj.run.destroy import destroy as destroy_datasets

    plan = destroy_plan(load_project(project), selectors or (), orphans=orphans, target=target)
    typer.echo(f"odfproj destroy will delete {len(plan.datasets)} dataset(s) from {plan.workspace}:")
    for line in plan.describe():
        typer.echo(line)
    if not yes:
        if not sys.stdin.isatty():
            raise DestroyError("destroy needs confirmation: rerun with --yes (stdin is not a terminal)")
        if not typer.confirm("Destroy these datasets? This cannot be undone.", default=False):
            typer.echo("Destroy cancelled; nothing was deleted.")
            raise typer.Exit(1)
    deleted = destroy_datasets(plan, lock_timeout=lock_timeout)
    typer.echo(f"Destroyed {len(deleted)} dataset(s).")
