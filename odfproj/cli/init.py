"""``odfproj init``: scaffold a project (manifests, macros, .gitignore, pre-commit and CI config)."""

from __future__ import annotations

from pathlib import Path

import typer


def init(
    directory: Path = typer.Argument(Path("."), help="Folder of the new project (created if missing)."),
    name: str | None = typer.Option(None, "--name", help="Project name (default: the folder's name)."),
) -> None:
    """Create a new project: odfproj.yaml, two example manifests, macros/, .gitignore, pre-commit hooks
    and a GitHub Actions workflow (plan on pull requests, apply on main).

    Never overwrites: if any of these files exists, nothing is written.
    """
    from odfproj.project.scaffold import scaffold_project

    result = scaffold_project(directory, name)
    typer.echo(f"Created project {result.name!r} in {result.root}:")
    for path in result.files:
        typer.echo(f"  {path}")
    where = "" if directory.resolve() == Path.cwd().resolve() else f"cd {directory} && "
    typer.echo(f"Next: {where}git init && odfproj validate && odfproj plan")
