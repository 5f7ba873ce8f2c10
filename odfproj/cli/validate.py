"""``odfproj validate``: every problem of every manifest, as ``file:line:col: message``."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.context import stderr_console
from odfproj.cli.options import TargetOption, VarOption, parse_vars


def validate(
    paths: list[Path] | None = typer.Argument(
        None, help="Manifest files or folders. Default: every manifest of the project."
    ),
    project: Path | None = typer.Option(
        None, "--project", help="Project folder (default: discovered upwards).", metavar="DIR"
    ),
    target: str | None = TargetOption,
    variables: list[str] | None = VarOption,
) -> None:
    """Validate manifests against the ODF schemas and rules; report ALL problems; exit 1 if any.

    Manifests are rendered first, exactly as `plan` renders them. Without PATHs the whole project is
    also checked as a graph: every input has a manifest (a typo gets a suggestion) and there is no
    cycle, and its data test files are checked against the manifests (known kinds, datasets and
    columns, durations). Files outside any project are validated as plain YAML.

    Nothing a manifest names is fetched or executed, and nothing outside the project folder is read:
    safe on untrusted pull requests. On projects of 100 or more manifests, those that load without
    problems are remembered in ~/.cache/odfproj (never in the project) and not parsed again while
    unchanged; ODFPROJ_CACHE=off turns that off.
    """
    from odfproj.project.config import ProjectError, load_project
    from odfproj.project.validate import expand_paths, validate_files, validate_project
    from odfproj.quality.definitions import validate_tests

    config = None
    test_files = 0
    try:
        config = load_project(project)
    except ProjectError:
        if project is not None or not paths:
            raise
    files = [path.absolute() for path in expand_paths(paths)] if paths else None
    if config is None or (files is not None and not all(f.is_relative_to(config.root) for f in files)):
        report = validate_files(files or [], display_root=Path.cwd())  # files of no project: plain YAML
    else:
        report = validate_project(config, files=files, vars_override=parse_vars(variables), target=target)
    problems = list(report.problems)
    if config is not None and files is None:  # the whole project: its data test files too
        suite = validate_tests(config, vars_override=parse_vars(variables), target=target)
        problems.extend(suite.problems)
        test_files = len(suite.files)
    console = stderr_console()
    for problem in problems:
        console.print(str(problem), markup=False, highlight=False)
    bad_files = len({p.file for p in problems})
    checked = f"{len(report.files)} manifest(s)" + (f" and {test_files} test file(s)" if test_files else "")
    if not problems:
        typer.echo(f"{checked} valid")
        return
    console.print(f"{len(problems)} problem(s) in {bad_files} of {checked}", markup=False)
    raise typer.Exit(1)
