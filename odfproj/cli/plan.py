"""``odfproj plan``: what apply would change, in terraform's idiom. Executes nothing a manifest names."""

from __future__ import annotations

import enum
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from odfproj.cli.context import CliState, stderr_console
from odfproj.cli.options import (
    DatasetSelection,
    ValidateQueriesOption,
    query_checker_for,
    selection_options,
)
from odfproj.cli.remote_ws import synced

if TYPE_CHECKING:
    from odfproj.plan.model import Plan
    from odfproj.plan.queries import DerivativeCheck, QueryChecker
    from odfproj.transform.modes import CheckedQuery


class _DeferredChecker:
    """The plan's query checker (``cli.options.query_checker_for``), made at its first call.

    Making it imports the Spark engine's modules and the warm engine's client (about a third of a
    second); a plan in which no query is created or changed never calls it.
    """

    def __init__(self, *, verbose: bool, warm: bool | None) -> None:
        self._verbose = verbose
        self._warm = warm
        self._checker: QueryChecker | None = None
        self._holder: Any = None

    def _made(self) -> QueryChecker:
        if self._checker is None:
            self._checker, self._holder = query_checker_for(True, verbose=self._verbose, warm=self._warm)
            assert self._checker is not None
        return self._checker

    def __call__(self, check: DerivativeCheck) -> CheckedQuery:
        return self._made()(check)

    def source_schema(self, *arguments: Any) -> Any:
        return self._made().source_schema(*arguments)

    def stop(self) -> None:
        """Stop the session or the warm engine's client, if a check started one."""
        if self._holder is not None:
            self._holder.stop()


class PlanFormat(enum.StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def render(plan: Plan, output_format: PlanFormat, show_unchanged: bool) -> str:
    from odfproj.plan.render import render_json, render_markdown, render_text

    if output_format is PlanFormat.json:
        return render_json(plan)
    if output_format is PlanFormat.markdown:
        return render_markdown(plan, show_unchanged=show_unchanged)
    return render_text(plan, show_unchanged=show_unchanged)


@selection_options()
def plan(
    ctx: typer.Context,
    selection: DatasetSelection = DatasetSelection(),
    output_format: PlanFormat = typer.Option(
        PlanFormat.text,
        "--format",
        help="text for people, json for tools (schemas/plan.schema.json, format version 2), markdown for a PR "
        "comment.",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="FILE",
        help="Also save the plan to FILE (JSON, pinned to every dataset's head) for `odfproj apply FILE`.",
    ),
    detailed_exitcode: bool = typer.Option(
        False,
        "--detailed-exitcode",
        help="Exit 0 when there are no changes, 1 on error, 2 when there are changes (a dataset whose "
        "manifest was deleted counts as one).",
    ),
    show_unchanged: bool = typer.Option(False, "--show-unchanged", help="List unchanged datasets too."),
    validate_queries: bool = ValidateQueriesOption,
) -> None:
    """Compare the manifests with the workspace's metadata chains and show what apply would do.

    Each dataset is classified as create (+), update (~), unchanged, drift (~, changed outside the
    project), orphan (?, in the workspace but without a manifest; never deleted) or refused (!, a change
    that ODF's evolution rules forbid; exit code 1). A rename declared in odfproj.yaml's moved list comes
    first (~ OLD -> NEW: same id, chain and data). A changed event shows one line per changed field
    (~ SetInfo.description: "a" -> "b"; a query as a diff of its lines), a new one a one-line summary;
    inputs are named, not given by id; a changed query says how many downstream datasets run will
    recompute. The markdown form stays under GitHub's comment size limit (it summarises large plans).

    Then the data work `odfproj run` does after applying, in its order: each root's ingest (for a
    FilesGlob source, the files it will read inside the project folder, and a warning for files it will
    never read) and each derivative's transform with its inputs' new records. Run executes exactly these
    steps. Nothing is fetched to list them.

    A created or changed query is validated by the Spark engine over empty inputs that have the inputs'
    schemas: the plan shows its output schema and refuses an invalid query or one that removes or
    retypes a column. Safe on untrusted pull requests: nothing a manifest names is fetched or executed
    (queries are checked against an allowlist of functions, then analysed in a local Spark sandbox
    that ignores the target's spark_master and spark_conf; never run), and templates run in a sandbox.
    """
    from odfproj.plan.render import colourize
    from odfproj.plan.sources import plan_project
    from odfproj.run.environments import planned_config

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    config = selection.config()
    checker = _DeferredChecker(verbose=state.verbose, warm=state.warm) if validate_queries else None
    try:
        with synced(config, selection.target, writer=None):  # a remote environment comes down with it
            config, note = planned_config(config, selection.target)
            if note is not None:
                stderr_console().print(f"note: {note}", markup=False, emoji=False)
            result, _ = plan_project(config, selection.request(), query_checker=checker)
    finally:
        if checker is not None:
            checker.stop()
    if out is not None:
        from odfproj.plan.planfile import write_plan_file
        from odfproj.project.env import Redactor

        write_plan_file(result, out, redact=Redactor(config.env.secret_values(os.environ)).redact)
    text = render(result, output_format, show_unchanged)
    colour = output_format is PlanFormat.text and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    typer.echo(colourize(text) if colour else text, nl=False)
    if out is not None and output_format is PlanFormat.text:
        typer.echo(f"\nSaved the plan to {out}. Apply exactly this plan with: odfproj apply {out}")
    if result.has_refusals:
        raise typer.Exit(1)
    if detailed_exitcode and result.needs_action:
        raise typer.Exit(2)
