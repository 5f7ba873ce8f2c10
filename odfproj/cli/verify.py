"""``odfproj verify``: check datasets' chains and files; print each problem as ``path: message``."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from odfproj.cli.context import CliState, adopt_old_workspace, stderr_console
from odfproj.cli.interrupt import stopped_after
from odfproj.cli.options import PROJECT_HELP, WORKSPACE_HELP, EnvReadOption, project_engine, resolve_workspace
from odfproj.errors import OdfprojError

if TYPE_CHECKING:
    from odfproj.run.verify import DatasetVerification


def verify(
    ctx: typer.Context,
    datasets: list[str] | None = typer.Argument(None, help="Dataset names. Default: every dataset."),
    integrity: bool = typer.Option(
        False,
        "--integrity",
        help="Also re-hash every data file and checkpoint (physical and logical hash): reads all data.",
    ),
    reproduce: bool = typer.Option(
        False,
        "--reproduce",
        help="Also re-execute every recorded transform of each derivative and compare logical hashes "
        "(starts Spark); implies --integrity and --full.",
    ),
    full: bool = typer.Option(
        False,
        "--full",
        help="Check every block and file again, not only what is new since the last successful check "
        "(a workspace others could have written needs it: see docs/design/storage.md).",
    ),
    env: str | None = EnvReadOption,
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Verify block hashes, chain invariants, data files and identities; exit 1 if anything is wrong.

    Each dataset's Seed id must be the one the workspace recorded when it created that name, with its
    private key under keys/; each input block a derivative recorded as consumed must still be in the
    input's chain (a rolled-back refs/head is reported naming both datasets and the block).

    After a check that found nothing wrong, the next one checks only what is new: the blocks after the
    head it recorded (info/odfproj-verified.json), their files and the inputs' new blocks, continuing
    the chain's rules from where they stood. --full checks everything again.

    With --reproduce, every ExecuteTransform is re-run from the input data it recorded, and a result
    whose logical hash differs from the recorded one is reported naming the block; data files are then
    also re-hashed (as with --integrity), so stored data that differs from what the chain records is
    reported naming the file.
    """
    from odfproj.run.verify import verify_datasets

    if workspace is None and not reproduce and _verify_remote(project, datasets or [], integrity):
        return
    opened = resolve_workspace(workspace, project, env=env)
    adopt_old_workspace(opened)
    names = datasets or opened.list_datasets()
    bad = 0
    count = 0
    engine = _engine(project, workspace, ctx) if reproduce else None
    results = []
    # The engine's session (a JVM, or a lease on the warm engine) is stopped when the check ends: one
    # left to the interpreter's exit can hang it (a Connect client's channel closed at finalisation).
    with stopped_after(engine.holder) if engine is not None else nullcontext():
        for result in verify_datasets(opened, names, integrity=integrity, engine=engine, full=full):
            if result.reproduced is not None:
                typer.echo(f"{result.dataset}: {result.reproduced} transform(s) reproduced")
            count += len(result.problems)
            bad += bool(result.problems)
            for problem in result.problems:
                typer.echo(problem)
            results.append(result)
    noun = "dataset" if len(names) == 1 else "datasets"
    if bad:
        stderr_console().print(f"{count} problem(s) in {bad} of {len(names)} {noun}", markup=False)
        raise typer.Exit(1)
    typer.echo(f"{len(names)} {noun} verified{_since_last_check(results)}")


def _since_last_check(results: list[DatasetVerification]) -> str:
    """What a check that continued from the last one left out, or ``""`` when every dataset was checked in full:
    ``: 3 new blocks since the last check (use --full to re-check all 10,003 blocks)``."""
    if all(r.full for r in results):
        return ""
    new = sum(r.checked for r in results if not r.full)
    in_full = sum(r.full for r in results)
    text = f": {new:,} new block{'s' if new != 1 else ''}" if new else ": no new block"
    text += " since the last check"
    if in_full:
        text += f", {in_full} dataset{'s' if in_full != 1 else ''} in full"
    blocks = sum(r.blocks for r in results)
    return text + f" (use --full to re-check all {blocks:,} block{'s' if blocks != 1 else ''})"


def _engine(project: Path | None, workspace: Path | None, ctx: typer.Context) -> Any:
    verbose = isinstance(ctx.obj, CliState) and ctx.obj.verbose
    return project_engine(project, workspace, verbose=verbose)


def _verify_remote(project: Path | None, names: list[str], integrity: bool) -> bool:
    """For a remote workspace, verify what is stored remotely (not the cache); False for a local one."""
    from odfproj.project.config import load_project
    from odfproj.remote.workspace import verify_remote
    from odfproj.storage.object_store import open_store

    try:
        url = load_project(project).remote_workspace()
    except OdfprojError:
        return False  # no project: a bare workspace folder
    if url is None:
        return False
    problems = verify_remote(open_store(url), names, integrity=integrity)
    for problem in problems:
        typer.echo(problem)
    if problems:
        stderr_console().print(f"{len(problems)} problem(s) in remote workspace {url}", markup=False)
        raise typer.Exit(1)
    typer.echo(f"remote workspace {url} verified")
    return True
