"""``odfproj fmt``: rewrite manifests in their canonical layout (comments kept), or ``--check`` them."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.context import stderr_console


def fmt(
    paths: list[Path] | None = typer.Argument(
        None, help="Manifest files or folders. Default: every manifest of the project."
    ),
    check: bool = typer.Option(
        False, "--check", help="Write nothing; list the files that would change and exit 1 if any."
    ),
    project: Path | None = typer.Option(
        None, "--project", help="Project folder (default: discovered upwards).", metavar="DIR"
    ),
) -> None:
    """Format manifests: envelope, content and each event's keys in schema order, 2-space indentation.

    Comments, values and quoting are kept. Jinja manifests are formatted only when they are YAML on their
    own; others are skipped with a warning. Running fmt twice changes nothing the second time.
    """
    from odfproj.project.config import load_project
    from odfproj.project.fmt import FormatStatus
    from odfproj.project.validate import expand_paths
    from odfproj.run.fmt import format_files

    if paths:
        files, root = expand_paths(paths), Path.cwd()
    else:
        config = load_project(project)
        files, root = config.manifest_files(), config.root
    report = format_files(files, check=check, display_root=root)
    console = stderr_console()
    for result in report.with_status(FormatStatus.SKIPPED):
        console.print(f"warning: {result.shown}: skipped: {result.message}", markup=False)
    for result in report.with_status(FormatStatus.FAILED):
        console.print(f"error: {result.shown}: {result.message}", markup=False)
    changed = report.with_status(FormatStatus.REFORMATTED)
    for result in changed:
        typer.echo(f"{'would reformat' if check else 'reformatted'} {result.shown}")
    unchanged = len(report.with_status(FormatStatus.UNCHANGED))
    summary = [
        f"{len(changed)} file(s) {'would be reformatted' if check else 'reformatted'}",
        f"{unchanged} unchanged",
    ]
    for status in (FormatStatus.SKIPPED, FormatStatus.FAILED):
        count = len(report.with_status(status))
        if count:
            summary.append(f"{count} {status.value}")
    console.print(", ".join(summary), markup=False)
    if not report.ok:
        raise typer.Exit(1)
