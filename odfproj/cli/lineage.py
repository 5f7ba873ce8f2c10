"""``odfproj lineage``: the project's dataset graph, for people (text), Graphviz, Mermaid or tools."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from odfproj.cli.context import stderr_console


class LineageFormat(enum.StrEnum):
    """``--format``'s choices: ``project.lineage.LineageFormat``'s, without importing the project's
    graph for ``--help`` (tests/cli/test_startup.py keeps the two equal)."""

    text = "text"
    dot = "dot"
    mermaid = "mermaid"
    json = "json"


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
    from odfproj.project import lineage as project_lineage
    from odfproj.project.config import load_project
    from odfproj.project.graph import DatasetGraph
    from odfproj.project.manifests import load_manifests

    config = load_project(project)
    manifests = load_manifests(config, target=target)
    graph = DatasetGraph.build(manifests)
    result = project_lineage.build_lineage(graph, config.name)
    console = stderr_console()
    for problem in (*(str(p) for p in manifests.problems if p.severity == "error"), *result.problems):
        console.print(f"warning: {problem}", markup=False)
    typer.echo(project_lineage.render(result, project_lineage.LineageFormat(output_format.value)), nl=False)
