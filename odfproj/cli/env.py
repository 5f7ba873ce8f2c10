"""``odfproj env list|refresh|destroy``: the preview environments of a workspace (``run.environments``)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer

from odfproj.cli import metavars
from odfproj.cli.options import LockTimeoutOption, ProjectOption, TargetOption

app = typer.Typer(
    cls=metavars.Group,
    help="Preview environments: a change's datasets built beside production's, listed, refreshed and destroyed."
    "\n\n`--env NAME` on plan, apply, run, watch, query, sql, log, show, test, verify, diff and docs build works in "
    "environment NAME; `odfproj diff --env NAME` compares it with production and `odfproj publish NAME` makes it "
    "production's. Production's files are never written by a command with --env. See docs/guide/environments.md.",
    no_args_is_help=True,
)


@app.command("list", cls=metavars.Command)
def list_(
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
) -> None:
    """List the environments: when each was refreshed, what it changed, the bytes it holds itself, and
    which are stale (not refreshed within odfproj.yaml's environments.ttl, default 7d)."""
    from odfproj.project.config import load_project
    from odfproj.run.environments import summaries

    config = load_project(project)
    found = summaries(config, target)
    if not found:
        typer.echo(f"no environments in workspace {config.production_workspace(target)}")
        return
    now = datetime.now(UTC)
    for summary in found:
        record = summary.record
        age = _age(now - record.refreshed)
        changed = ", ".join(summary.changed) if summary.changed else "nothing changed yet"
        stale = "  STALE" if summary.stale else ""
        size = f", {_size(summary.own_bytes)} of its own" if summary.own_bytes is not None else ""
        typer.echo(f"{record.name}: refreshed {age} ago{size}; changed: {changed}{stale}")


@app.command("refresh", cls=metavars.Command)
def refresh(
    name: str = typer.Argument(..., help="The environment.", metavar="NAME"),
    lock_timeout: float | None = LockTimeoutOption,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
) -> None:
    """Re-pin NAME's unchanged datasets to production's heads now. A changed dataset whose production
    chain moved since it was forked is reset to production's head: apply and run it again in NAME."""
    from odfproj.project.config import load_project
    from odfproj.run.environments import refresh as refresh_environment

    record, reset = refresh_environment(load_project(project), target, name, lock_timeout=lock_timeout)
    typer.echo(
        f"{record.name}: re-pinned {len(record.datasets) - len(record.changed())} dataset(s) to production"
    )
    if reset:
        typer.echo(
            f"reset (production moved since the fork): {', '.join(reset)}; "
            f"run `odfproj run --env {record.name}` to build them again"
        )


@app.command("destroy", cls=metavars.Command)
def destroy(
    names: list[str] = typer.Argument(None, help="The environments to remove.", metavar="NAME..."),
    stale: bool = typer.Option(False, "--stale", help="Remove every stale environment (see `env list`)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed when stdin is not a terminal)."),
    lock_timeout: float | None = LockTimeoutOption,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
) -> None:
    """Remove environments and every object they hold. Only objects nothing else references are removed:
    an environment's folder holds only what it wrote, and what publish gave production is linked there."""
    from odfproj.errors import OdfprojError
    from odfproj.project.config import load_project
    from odfproj.run.environments import destroy as destroy_environment
    from odfproj.run.environments import summaries

    config = load_project(project)
    chosen = list(names or ())
    if stale:
        chosen += [
            s.record.name for s in summaries(config, target) if s.stale and s.record.name not in chosen
        ]
    if not chosen:
        if stale:
            typer.echo("no stale environments")
            return
        raise OdfprojError("env destroy needs NAME or --stale")
    if not yes:
        if not sys.stdin.isatty():
            raise OdfprojError("env destroy needs confirmation: rerun with --yes (stdin is not a terminal)")
        if not typer.confirm(f"Destroy environment(s) {', '.join(chosen)}?", default=False):
            typer.echo("Destroy cancelled; nothing was removed.")
            raise typer.Exit(1)
    for name in chosen:
        destroy_environment(config, target, name, lock_timeout=lock_timeout)
        typer.echo(f"destroyed environment {name}")


def _age(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    size = float(count)
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            break
    return f"{size:.1f} {unit}"
