"""``odfproj push`` / ``odfproj pull``: sync datasets with an ODF repository (folder, s3://, http(s)://)."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.options import PROJECT_HELP, WORKSPACE_HELP, resolve_workspace

REPO_HELP = "The repository: a folder, file://PATH, s3://BUCKET/PREFIX, or (pull only) http(s)://URL."


def push(
    datasets: list[str] | None = typer.Argument(None, help="Dataset names. Default: every dataset."),
    to: str = typer.Option(..., "--to", help=REPO_HELP, metavar="REPO"),
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Copy datasets' missing blocks, data and checkpoints to a repository, then move its heads.

    Only what the repository lacks is copied (content addressing). Data and blocks are written before
    each dataset's refs/head, which moves by compare-and-swap, so an interrupted push leaves the
    repository at the old head and a rerun completes it. A repository whose chain has blocks this
    workspace lacks is refused (pull first); a divergent history is refused. S3 credentials, region
    and endpoint come from the standard AWS variables and config files (AWS_ENDPOINT_URL, AWS_PROFILE, ...).
    """
    from odfproj.remote.repository import push as push_datasets
    from odfproj.storage.object_store import open_store

    opened = resolve_workspace(workspace, project)
    for outcome in push_datasets(opened, datasets or [], open_store(to)):
        typer.echo(outcome.describe())


def pull(
    datasets: list[str] | None = typer.Argument(
        None, help="Dataset names. Default: every dataset in the repository (not for http(s))."
    ),
    from_: str = typer.Option(..., "--from", help=REPO_HELP, metavar="REPO"),
    metadata_only: bool = typer.Option(
        False,
        "--metadata-only",
        help="Copy blocks and heads only, no data or checkpoints: enough for `odfproj plan`.",
    ),
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Copy datasets' missing blocks, data and checkpoints from a repository into the workspace.

    Every block is checked against its hash, every data file and checkpoint against its hash and size,
    and the new blocks against the chain's rules before the local head moves. A local chain that has
    blocks the repository lacks stays as it is; a divergent history is refused. Reads http(s)
    repositories by ODF's Simple Transfer Protocol (plain GETs of the repository layout).
    """
    from odfproj.remote.repository import pull as pull_datasets
    from odfproj.storage.object_store import open_store

    opened = resolve_workspace(workspace, project)
    for outcome in pull_datasets(opened, datasets or [], open_store(from_), objects=not metadata_only):
        typer.echo(outcome.describe())
