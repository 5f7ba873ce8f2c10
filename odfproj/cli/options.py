"""Options shared by the commands that work on a project's datasets (plan, apply, run, watch)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import typer
import yaml

from odfproj.engine.session import SparkSessionHolder
from odfproj.engine.settings import analysis_settings
from odfproj.engine.spark import SparkEngine
from odfproj.errors import InvalidValueError, OdfprojError
from odfproj.odf.timestamps import parse_rfc3339
from odfproj.plan.queries import QueryChecker
from odfproj.project.config import ProjectConfig, ProjectError, load_project, spark_settings
from odfproj.project.loader import PlanRequest
from odfproj.storage.workspace import Workspace
from odfproj.transform.validate import query_checker

PROJECT_HELP = "Project folder (default: found by walking up from the current folder)."
WORKSPACE_HELP = "Workspace folder (default: the project's, usually .odf/ in the project)."

ProjectOption = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR")
TargetOption = typer.Option(
    None, "--target", "-t", help="Target from odfproj.yaml (default: its default).", metavar="NAME"
)
SelectOption = typer.Option(
    None,
    "--select",
    "-s",
    help="Datasets to work on: NAME, +NAME (with upstream), NAME+ (with downstream), path:GLOB, "
    "tag:KEYWORD; repeat or separate with spaces. Default: all.",
    metavar="ITEM",
)
ExcludeOption = typer.Option(
    None, "--exclude", help="Datasets to leave out (same grammar as --select).", metavar="ITEM"
)
ChangedSinceOption = typer.Option(
    None,
    "--changed-since",
    help="Only manifests whose rendered text differs from git revision REF, plus their downstream.",
    metavar="REF",
)
ValidateQueriesOption = typer.Option(
    True,
    "--validate-queries/--no-validate-queries",
    help="Check created and changed queries with the Spark engine, in a local sandbox that ignores the "
    "target's spark_master and spark_conf (a JVM starts only when some query changed). Without it they are "
    "shown as not validated and only run finds their errors.",
)
VarOption = typer.Option(
    None,
    "--var",
    help="Override a project var: KEY=VALUE (VALUE is read as YAML). Repeatable.",
    metavar="KEY=VALUE",
)


def parse_vars(items: list[str] | None) -> dict[str, Any]:
    """``--var KEY=VALUE`` pairs; values are YAML so ``--var n=3`` is a number, like dbt's --vars."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OdfprojError(f"--var {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            out[key.strip()] = value
    return out


def plan_request(
    target: str | None,
    select: list[str] | None,
    exclude: list[str] | None,
    changed_since: str | None,
    variables: list[str] | None,
) -> PlanRequest:
    return PlanRequest(
        target=target,
        vars_override=MappingProxyType(parse_vars(variables)),
        select=tuple(select or ()),
        exclude=tuple(exclude or ()),
        changed_since=changed_since,
    )


def resolve_workspace(workspace: Path | None, project: Path | None, target: str | None = None) -> Workspace:
    """``--workspace`` if given, else the project's workspace for ``target``."""
    if workspace is not None:
        return Workspace(workspace)
    return Workspace(load_project(project).workspace(target))


def query_checker_for(
    validate: bool, *, verbose: bool = False
) -> tuple[QueryChecker | None, SparkSessionHolder | None]:
    """The plan's query checker on a lazily started analysis session, or none with --no-validate-queries.

    The session is the sandbox of ``engine.settings.analysis_settings``: plan runs on untrusted pull
    requests, so no target's master or ``spark_conf`` reaches it. The caller stops the returned holder
    when done (it is only started if some query changed).
    """
    if not validate:
        return None, None
    holder = SparkSessionHolder(analysis_settings(verbose=verbose))
    return query_checker(SparkEngine(holder)), holder


def project_engine(project: Path | None, workspace: Path | None, *, verbose: bool = False) -> SparkEngine:
    """An engine configured like `odfproj run`'s: the project's default target, if there is a project.

    The session starts on first use; a bare ``--workspace`` outside any project gets Spark's defaults.
    """
    try:
        config: ProjectConfig | None = load_project(project)
    except ProjectError:
        if workspace is None:
            raise
        config = None
    return SparkEngine(SparkSessionHolder(spark_settings(config, None, verbose=verbose)))


def as_at_time(text: str | None) -> datetime | None:
    """The ``--as-at`` moment of commands that read every dataset at one time (``sql``, ``test``)."""
    if text is None:
        return None
    try:
        return parse_rfc3339(text)
    except InvalidValueError:
        raise OdfprojError(
            f"--as-at {text!r}: expected an RFC 3339 time, e.g. 2024-01-31T00:00:00Z"
        ) from None
