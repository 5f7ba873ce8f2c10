"""``odfproj plan``: what apply would change, in terraform's idiom. Executes nothing a manifest names."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from odfproj.plan.planner import make_plan
from odfproj.plan.render import render_json, render_text
from odfproj.plan.sources import load_desired, load_workspace_state
from odfproj.project.config import load_project


class PlanFormat(enum.StrEnum):
    text = "text"
    json = "json"


def plan(
    project: Path | None = typer.Option(
        None, "--project", help="Project folder (default: discovered upwards)."
    ),
    target: str | None = typer.Option(
        None, "--target", "-t", help="Target from odfproj.yaml (default: its default)."
    ),
    output_format: PlanFormat = typer.Option(
        PlanFormat.text, "--format", help="text for people, json for tools."
    ),
    detailed_exitcode: bool = typer.Option(
        False,
        "--detailed-exitcode",
        help="Exit 0 when there are no changes, 1 on error, 2 when there are changes.",
    ),
    show_unchanged: bool = typer.Option(False, "--show-unchanged", help="List unchanged datasets too."),
) -> None:
    """Compare the manifests with the workspace's metadata chains and show what apply would do.

    Each dataset is classified as create (+), update (~), unchanged, drift (~, changed outside the
    project), orphan (?, in the workspace but without a manifest; never deleted) or refused (!, a change
    that ODF's evolution rules forbid). Safe on untrusted pull requests: nothing is fetched or executed.
    """
    config = load_project(project)
    workspace = config.workspace(target)
    desired = load_desired(config)
    state = load_workspace_state(workspace)
    wanted = {d.snapshot.name.lower() for d in desired}
    orphans = [n for n in state.names if n.lower() not in wanted]
    result = make_plan(
        project=config.name, workspace=str(workspace), desired=desired, views=state.views, orphans=orphans
    )
    if output_format is PlanFormat.json:
        typer.echo(render_json(result), nl=False)
    else:
        typer.echo(render_text(result, show_unchanged=show_unchanged), nl=False)
    if result.has_refusals:
        raise typer.Exit(1)
    if detailed_exitcode and result.has_changes:
        raise typer.Exit(2)
