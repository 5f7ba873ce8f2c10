"""``odfproj unlock LOCK_ID``: break a remote workspace's stale lock, left by a runner that died."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from odfproj.cli.options import PROJECT_HELP
from odfproj.storage.errors import RemoteError


def unlock(
    lock_id: str = typer.Argument(..., help="The lock id the refused command printed."),
    workspace: str | None = typer.Option(
        None,
        "--workspace",
        metavar="URL",
        # $ODFPROJ_WORKSPACE is project.config.WORKSPACE_ENV (tests/cli/test_startup.py checks it).
        help="The remote workspace (default: $ODFPROJ_WORKSPACE, else the project's `workspace:`).",
    ),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Remove a remote workspace's lock, but only if it still has LOCK_ID (never a newer writer's).

    Only for a lock whose holder is known to be dead (a cancelled CI job): breaking a live writer's
    lock lets a second writer start, though refs/head's compare-and-swap still keeps each dataset's
    history linear.
    """
    from odfproj.project.config import WORKSPACE_ENV, load_project
    from odfproj.remote.location import is_remote_workspace
    from odfproj.remote.workspace import break_lock
    from odfproj.storage.object_store import open_store

    url = workspace or os.environ.get(WORKSPACE_ENV) or load_project(project).workspace_setting
    if not is_remote_workspace(url):
        raise RemoteError(
            f"{url}: not a remote workspace (s3://... or file://...); a local lock is released by its process"
        )
    held = break_lock(open_store(url), lock_id)
    typer.echo(f"unlocked {url}: removed the lock of {held.describe()}")
