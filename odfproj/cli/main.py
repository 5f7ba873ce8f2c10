"""The ``odfproj`` command line: argument parsing and rendering only; the work lives in lower layers."""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from typing import NoReturn

import typer

from odfproj import ODF_SPEC_VERSION, __version__
from odfproj.cli import (
    apply,
    block,
    destroy,
    docs,
    engine,
    fmt,
    ingest,
    init,
    lineage,
    log,
    metavars,
    plan,
    push,
    query,
    redact,
    render,
    retry,
    run,
    show,
    sql,
    test,
    unlock,
    validate,
    verify,
    watch,
)
from odfproj.cli.context import CliState, fail, stderr_console
from odfproj.errors import OdfprojError

app = typer.Typer(
    name="odfproj",
    cls=metavars.Group,
    help="Declarative GitOps projects for Open Data Fabric datasets: validate, plan, apply, run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Docstrings are wrapped at 110 columns in the source: markdown mode re-flows their paragraphs.
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(block.app, name="block")
app.add_typer(docs.app, name="docs")
app.add_typer(engine.app, name="engine")
for _name, _function in (
    ("init", init.init),
    ("validate", validate.validate),
    ("fmt", fmt.fmt),
    ("plan", plan.plan),
    ("apply", apply.apply),
    ("log", log.log),
    ("verify", verify.verify),
    ("lineage", lineage.lineage),
    ("render", render.render),
    ("ingest", ingest.ingest),
    ("run", run.run),
    ("retry", retry.retry),
    ("query", query.query),
    ("sql", sql.sql),
    ("show", show.show),
    ("test", test.test),
    ("watch", watch.watch),
    ("destroy", destroy.destroy),
    ("push", push.push),
    ("pull", push.pull),
    ("unlock", unlock.unlock),
):
    app.command(_name, cls=metavars.Command)(_function)


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
    warm: bool | None = typer.Option(
        None,
        "--warm/--cold",
        help="Run Spark work on the warm engine, a local Spark server kept running between commands "
        "(default: on, off where CI is set; ODFPROJ_WARM_ENGINE=on|off), or in a JVM of this command's "
        "own. See `odfproj engine --help`.",
    ),
) -> None:
    ctx.obj = CliState(debug=debug, verbose=verbose, warm=warm)


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
