"""The ``odfproj`` command line: argument parsing and rendering only; the work lives in lower layers."""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from typing import NoReturn

import typer

from odfproj import ODF_SPEC_VERSION, __version__
from odfproj.cli import redact
from odfproj.cli.context import CliState, fail, stderr_console
from odfproj.cli.lazy import LazyCommand, LazyGroup
from odfproj.errors import OdfprojError

#: Every command, in the order ``odfproj --help`` lists them. A command's module is imported only when
#: that command runs or shows its own help (``cli/lazy.py``); the summary is the first paragraph of
#: its help, checked against it by tests/cli/test_startup.py.
COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "init",
        "odfproj.cli.init:init",
        "Create a new project: odfproj.yaml, two example manifests, macros/, .gitignore, pre-commit hooks "
        "and a GitHub Actions workflow (plan on pull requests, apply on main).",
    ),
    LazyCommand(
        "validate",
        "odfproj.cli.validate:validate",
        "Validate manifests against the ODF schemas and rules; report ALL problems; exit 1 if any.",
    ),
    LazyCommand(
        "fmt",
        "odfproj.cli.fmt:fmt",
        "Format manifests: envelope, content and each event's keys in schema order, 2-space indentation.",
    ),
    LazyCommand(
        "plan",
        "odfproj.cli.plan:plan",
        "Compare the manifests with the workspace's metadata chains and show what apply would do.",
    ),
    LazyCommand(
        "apply",
        "odfproj.cli.apply:apply",
        "Make the workspace match the manifests: create datasets and append changed definition events.",
    ),
    LazyCommand("log", "odfproj.cli.log:log", "Show a dataset's metadata blocks, newest first."),
    LazyCommand(
        "diff",
        "odfproj.cli.diff:diff",
        "Show how datasets' tables differ between two points: schema changes, row counts, and the rows "
        "added, removed and changed.",
    ),
    LazyCommand(
        "verify",
        "odfproj.cli.verify:verify",
        "Verify block hashes, chain invariants, data files and identities; exit 1 if anything is wrong.",
    ),
    LazyCommand(
        "lineage",
        "odfproj.cli.lineage:lineage",
        "Show which datasets read which: roots and derivatives, input -> output, with query aliases.",
    ),
    LazyCommand(
        "render",
        "odfproj.cli.render:render",
        "Print the SQL that runs for DATASET: its transform or preprocess queries, as Spark SQL.",
    ),
    LazyCommand(
        "ingest",
        "odfproj.cli.ingest:ingest",
        "Read FILEs through the push source's read, preprocess and merge steps and commit them as one block.",
    ),
    LazyCommand(
        "run",
        "odfproj.cli.run:run",
        "Apply the manifests, then bring every selected dataset's data up to date, inputs first.",
    ),
    LazyCommand(
        "retry",
        "odfproj.cli.retry:retry",
        "Re-run the datasets that failed in the last run (run_results.json), those skipped because an "
        "upstream dataset failed, and those cancelled by an interrupt, like dbt retry.",
    ),
    LazyCommand(
        "query",
        "odfproj.cli.query:query",
        "Show a dataset's rows: its current state (datasets with a primary key) or its changelog.",
    ),
    LazyCommand(
        "sql",
        "odfproj.cli.sql:sql",
        "Run a Spark SQL query over the workspace's datasets, each exposed as a view.",
    ),
    LazyCommand(
        "show",
        "odfproj.cli.show:show",
        "Show a dataset as applied: kind, inputs by name, query or sources, schema, head, watermark, records "
        "and current rows, its first rows and its outcome in the last run (run_results.json).",
    ),
    LazyCommand(
        "test",
        "odfproj.cli.test:test",
        "Run data tests (the project's tests/ files) over the datasets' current state; exit 1 on failure.",
    ),
    LazyCommand(
        "env",
        "odfproj.cli.env:app",
        "Preview environments: a change's datasets built beside production's, listed, refreshed and destroyed.",
    ),
    LazyCommand(
        "publish",
        "odfproj.cli.publish:publish",
        "Fast-forward production's chains to environment NAME's heads: the reviewed blocks become production's, "
        "byte for byte, with no recompute (their objects are linked, not copied).",
    ),
    LazyCommand(
        "watch",
        "odfproj.cli.watch:watch",
        "Watch the manifests, macros/ and odfproj.yaml; re-plan after every change until Ctrl-C.",
    ),
    LazyCommand(
        "destroy",
        "odfproj.cli.destroy:destroy",
        "Delete datasets from the workspace: their chain, data, caches, state index, name record and key.",
    ),
    LazyCommand(
        "push",
        "odfproj.cli.push:push",
        "Copy datasets' missing blocks, data and checkpoints to a repository, then move its heads.",
    ),
    LazyCommand(
        "pull",
        "odfproj.cli.push:pull",
        "Copy datasets' missing blocks, data and checkpoints from a repository into the workspace.",
    ),
    LazyCommand(
        "unlock",
        "odfproj.cli.unlock:unlock",
        "Remove a remote workspace's lock, but only if it still has LOCK_ID (never a newer writer's).",
    ),
    LazyCommand(
        "block",
        "odfproj.cli.block:app",
        "Inspect metadata blocks: hash, encode to and decode from the binary manifest form.",
    ),
    LazyCommand(
        "docs",
        "odfproj.cli.docs:app",
        "Build and serve the project's documentation site: datasets, schemas, SQL, lineage, data state.",
    ),
    LazyCommand(
        "engine",
        "odfproj.cli.engine:app",
        "The warm engine: a local Spark server that `run`, `sql`, `ingest`, `test` and the query checks of "
        "`plan`/`apply`/`watch` reuse between commands instead of starting a JVM each. It starts on first "
        "need, stops after ODFPROJ_WARM_IDLE seconds unused (default 900), listens on 127.0.0.1 only, and is "
        "off where CI is set unless asked for (--warm, ODFPROJ_WARM_ENGINE=on).",
    ),
)


class Odfproj(LazyGroup):
    lazy_commands = COMMANDS


app = typer.Typer(
    name="odfproj",
    cls=Odfproj,
    help="Declarative GitOps projects for Open Data Fabric datasets: validate, plan, apply, run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Docstrings are wrapped at 110 columns in the source: markdown mode re-flows their paragraphs.
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"odfproj {__version__} (Open Data Fabric {ODF_SPEC_VERSION})")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors (for bug reports)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="More output, including Spark's own logs."),
    # A plain flag whose default counts as not given: typer coerces a `bool | None` value with
    # pydantic, which `odfproj COMMAND --help` would then import for this option alone (cli/metavars.py).
    warm: bool = typer.Option(
        False,
        "--warm/--cold",
        show_default=False,
        help="Run Spark work on the warm engine, a local Spark server kept running between commands "
        "(default: on, off where CI is set; ODFPROJ_WARM_ENGINE=on|off), or in a JVM of this command's "
        "own. See `odfproj engine --help`.",
    ),
) -> None:
    given = _given(ctx, "warm")
    ctx.obj = CliState(debug=debug, verbose=verbose, warm=warm if given else None)


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the command line gave the parameter ``name`` (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def main() -> None:
    """Console entry point: every user-caused error becomes one line on stderr and a non-zero exit."""
    debug = "--debug" in sys.argv[1:]
    redact.install(redact.command_redactor(sys.argv[1:]))
    try:
        # Without standalone mode click returns the code of a typer.Exit instead of exiting.
        code = app(standalone_mode=False)
    except OdfprojError as e:
        if debug:
            raise
        fail(str(e), e.exit_code)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        fail("aborted", 1)
    except KeyboardInterrupt:
        _interrupted()
    except BrokenPipeError:
        # `odfproj log X | head`: the reader left; Python would complain again when flushing stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except Exception as e:
        show = getattr(e, "show", None)
        if callable(show) and isinstance(getattr(e, "exit_code", None), int):  # a usage error
            show()
            sys.exit(e.exit_code)
        if debug:
            raise
        fail(
            f"internal error: {type(e).__name__}: {e} (this is a bug; rerun with --debug for a traceback)", 70
        )
    if code == 130:  # typer turns a KeyboardInterrupt into this code, silently
        _interrupted()
    sys.exit(code if isinstance(code, int) else 0)


def _interrupted() -> NoReturn:
    """Ctrl-C that reached the top: one line, then exit 130 at once.

    ``os._exit`` because a run's worker threads cannot be stopped and Python would wait for them
    at exit (the graceful path, waiting for the datasets in progress, is the first Ctrl-C's; see
    :mod:`odfproj.cli.interrupt`). Every commit is atomic, so each dataset stays valid; the JVM,
    if one started, exits when its stdin pipe closes.
    """
    with suppress(OSError, ValueError):
        sys.stdout.flush()
    stderr_console().print("[bold]interrupted[/]", markup=True)
    os._exit(130)


if __name__ == "__main__":
    main()
