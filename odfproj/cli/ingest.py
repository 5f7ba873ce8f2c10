"""``odfproj ingest DATASET FILE... [--source NAME]``: push files (or stdin, ``-``) into a root dataset."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from odfproj.cli.context import CliState, adopt_old_workspace
from odfproj.cli.interrupt import stopped_after
from odfproj.cli.options import PROJECT_HELP, WORKSPACE_HELP, TargetOption, session_holder
from odfproj.errors import OdfprojError

if TYPE_CHECKING:
    from odfproj.project.config import ProjectConfig

STDIN = "-"


def ingest(
    ctx: typer.Context,
    dataset: str = typer.Argument(..., help="The root dataset to push into."),
    files: list[str] = typer.Argument(
        ..., help="Files to ingest, all in the source's format; `-` reads stdin."
    ),
    source: str | None = typer.Option(
        None, "--source", help="The push source (AddPushSource) to use; needed when there are several."
    ),
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
    target: str | None = TargetOption,
) -> None:
    """Read FILEs through the push source's read, preprocess and merge steps and commit them as one block.

    In a project, a dataset whose manifest has changes not yet applied (or was never applied) gets
    them applied first, as `odfproj run` does; a plan that refuses them refuses the ingest.
    """
    from odfproj.engine.spark import SparkEngine
    from odfproj.ingest.push import ingest_push
    from odfproj.plan.engine_checks import query_checker
    from odfproj.project.config import spark_settings
    from odfproj.project.loader import PlanRequest
    from odfproj.run.pending import apply_pending
    from odfproj.storage.workspace import Workspace

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    config = _project(project, required=workspace is None)
    opened = Workspace(workspace) if workspace is not None else Workspace(config.workspace(target))  # type: ignore[union-attr]
    adopt_old_workspace(opened)
    if files.count(STDIN) > 1:
        raise OdfprojError("`-` (stdin) may be given only once")
    holder = session_holder(spark_settings(config, target, verbose=state.verbose), state.warm)
    work = Path(tempfile.mkdtemp(prefix="odfproj-push-"))
    try:
        paths: list[Path] = []  # Ctrl-C: the push is one atomic commit, made entirely or not at all
        names: list[str] = []
        for item in files:
            if item == STDIN:
                path = work / "stdin"
                with open(path, "wb") as out:
                    shutil.copyfileobj(sys.stdin.buffer, out)
                paths.append(path)
                names.append("<stdin>")
            else:
                paths.append(Path(item).absolute())  # the JVM may not share our working folder
                names.append(item)
        # Large files start the JVM with the JIT for long work (engine.session).
        holder.size_work_by(lambda: sum(p.stat().st_size for p in paths if p.is_file()))
        if config is not None and workspace is None:
            applied = apply_pending(
                config, dataset, PlanRequest(target=target), query_checker=query_checker(SparkEngine(holder))
            )
            if applied is not None:
                typer.echo(f"{dataset}: applied its pending definition ({len(applied.steps)} step(s))")
        handle = opened.open(dataset)
        with stopped_after(holder):
            result = ingest_push(
                handle, SparkEngine(holder), paths, source_name=source, display_names=names, work_dir=work
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if result.up_to_date:
        typer.echo(f"{dataset}: nothing to add (source {result.source})")
    else:
        head = result.items[-1].head
        typer.echo(
            f"{dataset}: added {result.records_added} record(s) from source {result.source} -> {head[:20]}…"
        )


def _project(project: Path | None, *, required: bool) -> ProjectConfig | None:
    from odfproj.project.config import load_project

    if required:
        return load_project(project)
    try:
        return load_project(project)
    except OdfprojError:
        return None  # --workspace without a project: default Spark settings
