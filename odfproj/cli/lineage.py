"""``odfproj lineage``: the project's dataset graph, for people (text), Graphviz, Mermaid or tools."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.context import stderr_console
from odfproj.project.config import load_project
from odfproj.project.graph import DatasetGraph
from odfproj.project.lineage import LineageFormat, build_lineage, render
from odfproj.project.manifests import load_manifests


def lineage(
    output_format: LineageFormat = typer.Option(
        LineageFormat.text, "--format", help="text, dot (Graphviz), mermaid (renders on GitHub) or json."
    ),
    project: Path | None = typer.Option(
        None, "--project", help="Project folder (default: discovered upwards).", metavar="DIR"
    ),
    target: str | None = typer.Option(
        None, "--target", "-t", help="Target used to render templated manifests (default: the project's)."
    ),
) -> None:
    """Show which datasets read which: roots and derivatives, input -> output, with query aliases.

    Problems (an unknown input, a cycle, an invalid manifest) are warnings on stderr; the graph is
    still shown as far as it is known. Reads only manifests: nothing is fetched or run.
    """
    config = load_project(project)
    manifests = load_manifests(config, target=target)
    graph = DatasetGraph.build(manifests)
    result = build_lineage(graph, config.name)
    console = stderr_console()
    for problem in (*(str(p) for p in manifests.problems if p.severity == "error"), *result.problems):
        console.print(f"warning: {problem}", markup=False)
    typer.echo(render(result, output_format), nl=False)
