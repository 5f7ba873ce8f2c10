"""``odfproj render DATASET``: the SQL each of a dataset's queries runs on Spark, after translation."""

from __future__ import annotations

import difflib
from pathlib import Path

import typer

from odfproj.cli.options import ProjectOption, TargetOption, VarOption, parse_vars
from odfproj.errors import OdfprojError


def render(
    dataset: str = typer.Argument(..., help="Dataset name, as in its manifest.", metavar="DATASET"),
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
    variables: list[str] | None = VarOption,
) -> None:
    """Print the SQL that runs for DATASET: its transform or preprocess queries, as Spark SQL.

    A query written for another engine (`engine: datafusion`, `flink`, `risingwave`) is shown as the
    Spark SQL it is translated to; `engine: spark` runs as written. Each query is headed by a comment
    naming the dataset, the query (and step) and the engine. A query that cannot be translated is an
    error naming the engine and the construct (exit 1). Reads only the manifest (rendered like plan
    renders it); nothing is fetched or run, and no JVM starts. See docs/guide/engines.md.
    """
    from odfproj.plan.queries import render_queries
    from odfproj.project.config import load_project
    from odfproj.project.manifests import load_manifests

    config = load_project(project)
    manifests = load_manifests(config, vars_override=parse_vars(variables), target=target)
    manifest = manifests.get(dataset)
    if manifest is None:
        close = difflib.get_close_matches(dataset, list(manifests.by_name), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OdfprojError(f"no manifest of the project defines dataset {dataset!r}{hint}")
    if manifest.snapshot is None:
        manifests.raise_for_problems()
        raise OdfprojError(f"{manifest.rel_path}: the manifest of {dataset!r} cannot be read")
    try:
        text = render_queries(manifest.snapshot)
    except OdfprojError as e:
        raise OdfprojError(f"{manifest.rel_path}: dataset {manifest.snapshot.name}: {e}") from None
    typer.echo(text, nl=False)
