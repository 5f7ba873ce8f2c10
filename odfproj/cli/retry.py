"""``odfproj retry``: run again what the last run left failed, skipped by a failure, or cancelled."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli import run as run_command
from odfproj.cli.options import ProjectOption, TargetOption, VarOption


def retry(
    ctx: typer.Context,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
    variables: list[str] | None = VarOption,
    threads: int = typer.Option(
        1, "--threads", min=1, help="Datasets to process at the same time.", metavar="N"
    ),
) -> None:
    """Re-run the datasets that failed in the last run (run_results.json), those skipped because an
    upstream dataset failed, and those cancelled by an interrupt, like dbt retry.

    Exactly `odfproj run --select` with those names: the plan is applied first, results are written
    again. Nothing to retry exits 0.
    """
    from odfproj.project.config import load_project
    from odfproj.run.retry import retry_selection

    names = retry_selection(load_project(project).workspace(target))
    if not names:
        typer.echo("nothing to retry: the last run left no dataset failed, skipped by a failure or cancelled")
        return
    typer.echo(f"retrying {len(names)} dataset(s): {', '.join(names)}")
    run_command.run(
        ctx,
        project=project,
        target=target,
        select=list(names),
        exclude=None,
        changed_since=None,
        variables=variables,
        threads=threads,
        lock_timeout=None,
        validate_queries=True,
    )
