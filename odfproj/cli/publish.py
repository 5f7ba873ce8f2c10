"""``odfproj publish NAME``: make an environment's reviewed blocks production's, without recomputing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from odfproj.cli.context import CliState
from odfproj.cli.options import LockTimeoutOption, ProjectOption, TargetOption

if TYPE_CHECKING:
    from odfproj.project.config import ProjectConfig
    from odfproj.run.run import RunEvent
    from odfproj.storage.publish import PublishOutcome


def publish(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The environment to publish.", metavar="NAME"),
    only: list[str] | None = typer.Option(
        None,
        "--only",
        help="Publish only these datasets (repeatable); the rest stay in the environment.",
        metavar="DATASET",
    ),
    recompute: bool = typer.Option(
        False,
        "--recompute",
        help="Where publish refuses a dataset (production moved), apply and run it on production instead.",
    ),
    lock_timeout: float | None = LockTimeoutOption,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
) -> None:
    """Fast-forward production's chains to environment NAME's heads: the reviewed blocks become production's,
    byte for byte, with no recompute (their objects are linked, not copied).

    Each dataset NAME changed is published when production's head is still where NAME forked it and every
    input head its new blocks consumed is still production's; otherwise it is refused in one line (refresh
    NAME and run it again, or use --recompute), and so is its downstream. Runs under production's workspace
    lock; a killed publish leaves each dataset at its old head or the published one, and running it again
    finishes. Exits 1 when a dataset was refused and not recomputed.
    """
    from odfproj.project.config import load_project
    from odfproj.run.environments import publish as publish_environment

    config = load_project(project)
    outcomes = publish_environment(
        config,
        target,
        name,
        only=tuple(only) if only else None,
        lock_timeout=lock_timeout,
        on_outcome=_report,
    )
    refused = [o.dataset for o in outcomes if o.status == "refused"]
    published = sum(1 for o in outcomes if o.status in ("published", "created"))
    typer.echo(f"published {published} dataset(s) of environment {name}; {len(refused)} refused")
    if not refused:
        return
    if not recompute:
        raise typer.Exit(1)
    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    if not _recompute(config, target, refused, verbose=state.verbose):
        raise typer.Exit(1)


def _report(outcome: PublishOutcome) -> None:
    typer.echo(("! " if outcome.status == "refused" else "> ") + outcome.line())


def _recompute(config: ProjectConfig, target: str | None, names: list[str], *, verbose: bool) -> bool:
    """Apply and run the refused datasets on production (``odfproj run --select`` them); True if all ran."""
    from odfproj.engine.session import SparkSessionHolder
    from odfproj.project.config import spark_settings
    from odfproj.run.recompute import recompute_on_production

    typer.echo(f"recomputing on production: {', '.join(names)}")
    holder = SparkSessionHolder(spark_settings(config, target, verbose=verbose))
    try:
        result = recompute_on_production(config, target, names, holder=holder, on_event=_line)
    finally:
        holder.stop()
    done = sum(1 for r in result.results if r.status.value == "success")
    typer.echo(f"recomputed {done} of {len(result.results)} dataset(s) on production")
    return result.ok


def _line(event: RunEvent) -> None:
    line = event.line()
    if line is not None:
        typer.echo(line)
