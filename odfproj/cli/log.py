"""``odfproj log DATASET``: a dataset's metadata chain, newest block first, like ``git log``."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.options import PROJECT_HELP, WORKSPACE_HELP, EnvReadOption, resolve_workspace


def log(
    dataset: str = typer.Argument(..., help="Dataset name (case-insensitive)."),
    oneline: bool = typer.Option(
        False, "--oneline", help="One line per block: hash, sequence, kind, summary."
    ),
    limit: int = typer.Option(
        20,
        "--limit",
        "-n",
        min=0,
        help="Show the newest N blocks (0: all); only the blocks shown are read.",
        metavar="N",
    ),
    env: str | None = EnvReadOption,
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Show a dataset's metadata blocks, newest first."""
    from odfproj.odf.summary import summarize
    from odfproj.odf.timestamps import format_rfc3339
    from odfproj.storage.projection import event_kind

    opened = resolve_workspace(workspace, project, env=env).open(dataset)
    first = True
    shown = 0
    for block_hash, block in opened.iter_blocks():
        if limit and shown == limit:
            older = block.sequence_number + 1
            typer.echo(f"... {older} older block(s); --limit 0 shows all, -n N the newest N")
            break
        shown += 1
        kind = event_kind(block.event)
        summary = summarize(block.event)
        if oneline:
            typer.echo(f"{block_hash.short()} {block.sequence_number} {kind} {summary}".rstrip())
            continue
        if not first:
            typer.echo("")
        first = False
        typer.echo(f"block {block_hash}")
        typer.echo(f"Sequence:    {block.sequence_number}")
        typer.echo(f"System time: {format_rfc3339(block.system_time)}")
        typer.echo(f"Event:       {kind}")
        if summary:
            typer.echo(f"    {summary}")
