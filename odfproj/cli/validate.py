"""``odfproj validate``: every problem of every manifest, as ``file:line:col: message``."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.context import stderr_console
from odfproj.project.config import load_project
from odfproj.project.validate import expand_paths, validate_files


def validate(
    paths: list[Path] | None = typer.Argument(
        None, help="Manifest files or folders. Default: every manifest of the project."
    ),
    project: Path | None = typer.Option(
        None, "--project", help="Project folder (default: discovered upwards).", metavar="DIR"
    ),
) -> None:
    """Validate manifests against the ODF schemas and rules; report ALL problems; exit 1 if any.

    Nothing a manifest names is fetched or executed: safe on untrusted pull requests.
    """
    if paths:
        files, root = expand_paths(paths), Path.cwd()
    else:
        config = load_project(project)
        files, root = config.manifest_files(), config.root
    report = validate_files(files, display_root=root)
    console = stderr_console()
    for problem in report.problems:
        console.print(str(problem), markup=False, highlight=False)
    bad_files = len({p.file for p in report.problems})
    if report.ok:
        typer.echo(f"{len(report.files)} manifest(s) valid")
        return
    console.print(
        f"{len(report.problems)} problem(s) in {bad_files} of {len(report.files)} manifest(s)", markup=False
    )
    raise typer.Exit(1)
