"""``odfproj engine status|start|stop``: see, warm up and stop the warm engine (``engine.warm``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import typer

from odfproj.cli import metavars
from odfproj.cli.context import CliState
from odfproj.cli.options import warm_engine

if TYPE_CHECKING:
    from odfproj.engine.warm.lifecycle import ServerStatus

app = typer.Typer(
    cls=metavars.Group,
    help="The warm engine: a local Spark server that `run`, `sql`, `ingest`, `test` and the query checks of "
    "`plan`/`apply`/`watch` reuse between commands instead of starting a JVM each. It starts on first need, "
    "stops after ODFPROJ_WARM_IDLE seconds unused (default 900), listens on 127.0.0.1 only, and is off "
    "where CI is set unless asked for (--warm, ODFPROJ_WARM_ENGINE=on).",
    no_args_is_help=True,
)


def _describe(status: ServerStatus) -> str:
    info = status.info
    use = "in use by a command" if status.in_use else f"idle for {status.idle_for:.0f} s"
    return (
        f"running: pid {info.pid}, Spark Connect on 127.0.0.1:{info.port}, {use}, stops after "
        f"{info.idle_timeout:.0f} s unused; folder {status.directory}"
    )


@app.command("status", cls=metavars.Command)
def status(ctx: typer.Context) -> None:
    """Whether the warm engine runs, where, for how long it has been idle, and whether commands use it."""
    from odfproj.engine.warm.choice import warm_choice

    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    choice = warm_choice(state.warm)
    engine = warm_engine()
    found = engine.status()
    typer.echo(_describe(found) if found is not None else f"not running (folder {engine.directory})")
    typer.echo(f"commands use it: {'yes' if choice.enabled else 'no'} ({choice.reason})")


@app.command("start", cls=metavars.Command)
def start() -> None:
    """Start the warm engine now (if it is not running), so that the next command finds it warm."""
    engine = warm_engine()
    began = time.monotonic()
    with engine.lease():
        pass
    found = engine.status()
    if found is not None:
        typer.echo(f"{_describe(found)} (ready in {time.monotonic() - began:.1f} s)")


@app.command("stop", cls=metavars.Command)
def stop() -> None:
    """Stop the warm engine now; a command using it at that moment fails (run it again, or with --cold)."""
    stopped = warm_engine().stop()
    typer.echo("not running" if stopped is None else f"stopped (pid {stopped.pid})")
