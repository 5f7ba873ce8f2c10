"""Options shared by the commands that work on a project's datasets (plan, apply, run, watch, ...).

Every command's module imports this one when the command is resolved, for ``--help`` too, so the
layers below are imported inside the functions that use them (see ``cli/lazy.py``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import typer

# Spark-free at import (PySpark is imported when a session starts); tests replace it here.
from odfproj.engine.session import SparkSessionHolder, SparkSettings, connect_client_problem
from odfproj.errors import InvalidValueError, OdfprojError

if TYPE_CHECKING:
    from odfproj.engine.spark import SparkEngine
    from odfproj.engine.warm.lifecycle import WarmEngine
    from odfproj.plan.queries import QueryChecker
    from odfproj.project.config import ProjectConfig
    from odfproj.project.loader import PlanRequest
    from odfproj.storage.workspace import Workspace

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
LockTimeoutOption = typer.Option(
    None,
    "--lock-timeout",
    metavar="SECONDS",
    help="Seconds to wait for the workspace lock while another apply, run or destroy holds it "
    "(default: fail at once, naming it).",
)
EnvOption = typer.Option(
    None,
    "--env",
    help="Work in preview environment NAME: changed datasets and their downstream get chains of their own "
    "beside production's, the rest are read from production at pinned heads, and production's files are "
    "never written. apply and run make it on first use. See `odfproj env --help`.",
    metavar="NAME",
)
EnvReadOption = typer.Option(
    None,
    "--env",
    help="Read preview environment NAME instead of production (`odfproj env list` lists them).",
    metavar="NAME",
)
VarOption = typer.Option(
    None,
    "--var",
    help="Override a project var: KEY=VALUE (VALUE is read as YAML). Repeatable.",
    metavar="KEY=VALUE",
)


def parse_vars(items: list[str] | None) -> dict[str, Any]:
    """``--var KEY=VALUE`` pairs; values are YAML so ``--var n=3`` is a number, like dbt's --vars."""
    import yaml

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


@dataclass(frozen=True)
class DatasetSelection:
    """The project, target and datasets a command works on, as its options gave them.

    ``plan``, ``apply``, ``run`` and ``watch`` take the same seven options; :func:`selection_options`
    declares them once and hands the command this one value instead of six parameters.
    """

    project: Path | None = None
    target: str | None = None
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    changed_since: str | None = None
    variables: tuple[str, ...] = ()
    env: str | None = None

    @property
    def narrowed(self) -> bool:
        """Whether any of --select, --exclude, --changed-since or --var was given."""
        return bool(self.select or self.exclude or self.changed_since or self.variables)

    def request(self) -> PlanRequest:
        from odfproj.project.loader import PlanRequest

        return PlanRequest(
            target=self.target,
            vars_override=MappingProxyType(parse_vars(list(self.variables))),
            select=self.select,
            exclude=self.exclude,
            changed_since=self.changed_since,
        )

    def config(self) -> ProjectConfig:
        """The project, working in ``--env``'s environment when one is given."""
        from odfproj.project.config import load_project

        return load_project(self.project).in_environment(self.env)


#: The options behind a ``DatasetSelection``, in the order ``--help`` lists them.
_SELECTION_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("project", Path | None, ProjectOption),
    ("target", str | None, TargetOption),
    ("select", list[str] | None, SelectOption),
    ("exclude", list[str] | None, ExcludeOption),
    ("changed_since", str | None, ChangedSinceOption),
    ("variables", list[str] | None, VarOption),
    ("env", str | None, EnvOption),
)

_Command = TypeVar("_Command", bound=Callable[..., Any])


def selection_options(*, changed_since: bool = True) -> Callable[[_Command], _Command]:
    """Give a command the selection options in place of its ``selection: DatasetSelection`` parameter.

    Typer reads a command's options from its signature, so the decorated function shows typer the six
    options (``--changed-since`` only where it makes sense) and receives them as one value.
    """
    names = [name for name, _, _ in _SELECTION_OPTIONS if changed_since or name != "changed_since"]

    def decorate(command: _Command) -> _Command:
        signature = inspect.signature(command, eval_str=True)
        options = [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=hint)
            for name, hint, default in _SELECTION_OPTIONS
            if name in names
        ]
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            parameters.extend(options if parameter.name == "selection" else [parameter])

        @functools.wraps(command)
        def with_selection(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name, None) for name in names}
            kwargs["selection"] = DatasetSelection(
                project=given["project"],
                target=given["target"],
                select=tuple(given["select"] or ()),
                exclude=tuple(given["exclude"] or ()),
                changed_since=given.get("changed_since"),
                variables=tuple(given["variables"] or ()),
                env=given["env"],
            )
            return command(*args, **kwargs)

        with_selection.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_selection.__annotations__ = {p.name: p.annotation for p in parameters} | {
            "return": signature.return_annotation
        }
        return cast(_Command, with_selection)

    return decorate


def resolve_workspace(
    workspace: Path | None, project: Path | None, target: str | None = None, env: str | None = None
) -> Workspace:
    """``--workspace`` if given, else the project's workspace for ``target``; with ``--env`` that
    workspace's environment, which must exist (a reader never makes one)."""
    from odfproj.project.config import load_project
    from odfproj.run.environments import existing_environment
    from odfproj.storage.workspace import Workspace

    if workspace is not None:
        production = Path(workspace)
    else:
        production = load_project(project).in_environment(env).production_workspace(target)
    if env is None:
        return Workspace(production)
    return existing_environment(production, env)


def warm_engine() -> WarmEngine:
    """The warm engine of this installation (its folder and idle timeout from the environment)."""
    from odfproj.engine.warm.choice import engine_dir, idle_timeout
    from odfproj.engine.warm.lifecycle import WarmEngine
    from odfproj.run.warm_server import ENTRY as WARM_ENTRY

    return WarmEngine(engine_dir(), entry=WARM_ENTRY, idle=idle_timeout())


def session_holder(settings: SparkSettings, warm: bool | None = None) -> SparkSessionHolder:
    """The session for trusted work on ``settings``' target: on the warm engine when it is chosen
    (``--warm``/``--cold``, ``ODFPROJ_WARM_ENGINE``, ``CI``) and can serve that target (a local master
    without JVM settings, a Connect client installed), else a JVM of this command's own."""
    from odfproj.engine.warm.choice import warm_choice, warm_eligible
    from odfproj.engine.warm.client import WarmSessionHolder

    if warm_choice(warm).enabled and warm_eligible(settings) and connect_client_problem() is None:
        return WarmSessionHolder(settings, warm_engine())
    return SparkSessionHolder(settings)


def query_checker_for(
    validate: bool, *, verbose: bool = False, warm: bool | None = None
) -> tuple[QueryChecker | None, SparkSessionHolder | None]:
    """The plan's query checker on a lazily started analysis session, or none with --no-validate-queries.

    The session is the sandbox of ``engine.settings.analysis_settings``: plan runs on untrusted pull
    requests, so no target's master or ``spark_conf`` reaches it. On the warm engine the same checks
    run in its server, with those settings (``plan.served_checks``). The caller stops the returned
    holder when done (it is only started, or the server only found, if some query changed).
    """
    from odfproj.engine.settings import analysis_settings
    from odfproj.engine.spark import SparkEngine
    from odfproj.engine.warm.choice import warm_choice
    from odfproj.engine.warm.client import WarmSessionHolder
    from odfproj.plan.engine_checks import query_checker
    from odfproj.plan.served_checks import WarmChecks

    if not validate:
        return None, None
    if warm_choice(warm).enabled:
        warm_holder = WarmSessionHolder(analysis_settings(verbose=verbose), warm_engine())
        return WarmChecks(warm_holder), warm_holder
    holder = SparkSessionHolder(analysis_settings(verbose=verbose))
    return query_checker(SparkEngine(holder)), holder


def project_engine(
    project: Path | None, workspace: Path | None, *, verbose: bool = False, warm: bool | None = None
) -> SparkEngine:
    """An engine configured like `odfproj run`'s: the project's default target, if there is a project.

    The session starts on first use; a bare ``--workspace`` outside any project gets Spark's defaults.
    """
    from odfproj.engine.spark import SparkEngine
    from odfproj.project.config import ProjectError, load_project, spark_settings

    try:
        config: ProjectConfig | None = load_project(project)
    except ProjectError:
        if workspace is None:
            raise
        config = None
    return SparkEngine(session_holder(spark_settings(config, None, verbose=verbose), warm))


def as_at_time(text: str | None) -> datetime | None:
    """The ``--as-at`` moment of commands that read every dataset at one time (``sql``, ``test``)."""
    from odfproj.odf.timestamps import parse_rfc3339

    if text is None:
        return None
    try:
        return parse_rfc3339(text)
    except InvalidValueError:
        raise OdfprojError(
            f"--as-at {text!r}: expected an RFC 3339 time, e.g. 2024-01-31T00:00:00Z"
        ) from None
