"""``odfproj verify``: check datasets' chains and files; print each problem as ``path: message``."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.context import stderr_console
from odfproj.cli.options import PROJECT_HELP, WORKSPACE_HELP, resolve_workspace
from odfproj.storage.verify import verify_dataset


def verify(
    datasets: list[str] | None = typer.Argument(None, help="Dataset names. Default: every dataset."),
    integrity: bool = typer.Option(
        False,
        "--integrity",
        help="Also re-hash every data file and checkpoint (physical and logical hash): reads all data.",
    ),
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP),
) -> None:
    """Verify block hashes, chain invariants and data files; exit 1 if anything is wrong."""
    opened = resolve_workspace(workspace, project)
    names = datasets or opened.list_datasets()
    bad = 0
    count = 0
    for name in names:
        problems = verify_dataset(opened.open(name), integrity=integrity)
        count += len(problems)
        bad += bool(problems)
        for problem in problems:
            typer.echo(str(problem))
    noun = "dataset" if len(names) == 1 else "datasets"
    if bad:
        stderr_console().print(f"{count} problem(s) in {bad} of {len(names)} {noun}", markup=False)
        raise typer.Exit(1)
    typer.echo(f"{len(names)} {noun} verified")
