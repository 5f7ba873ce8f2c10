"""``odfproj docs build`` and ``odfproj docs serve``: the project's documentation site (like dbt docs)."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli import metavars
from odfproj.cli.context import stderr_console
from odfproj.cli.options import EnvReadOption, ProjectOption, TargetOption
from odfproj.errors import OdfprojError

app = typer.Typer(
    cls=metavars.Group,
    help="Build and serve the project's documentation site: datasets, schemas, SQL, lineage, data state.",
    no_args_is_help=True,
)

#: Where the site goes by default, inside the target's workspace (never committed).
SITE_FOLDER = "site"

OutOption = typer.Option(
    None,
    "--out",
    "-o",
    help="Folder to write the site into (default: site/ in the workspace).",
    metavar="DIR",
)


def _build(project: Path | None, target: str | None, out: Path | None, env: str | None = None) -> Path:
    # Imported here, like the server below: `odfproj docs --help` loads this module, and only
    # building needs the site builder.
    from odfproj.docsite.collect import collect_site
    from odfproj.docsite.html import write_site
    from odfproj.project.config import load_project
    from odfproj.run.environments import require_environment

    config = load_project(project).in_environment(env)
    require_environment(config, target)
    site = collect_site(config, target)
    for warning in site.warnings:
        stderr_console().print(f"warning: {warning}", markup=False)
    folder = out if out is not None else config.workspace(target) / SITE_FOLDER
    try:
        return write_site(site, folder)
    except OSError as e:
        raise OdfprojError(f"cannot write the docs site into {folder}: {e.strerror or e}") from None


@app.command("build", cls=metavars.Command)
def build(
    out: Path | None = OutOption,
    env: str | None = EnvReadOption,
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
) -> None:
    """Write the docs site: one folder with an index.html that opens from disk, no server needed.

    Shows every dataset's description, keywords, license, schema, inputs and outputs, its SQL as
    Spark runs it, a lineage graph to click through, and, once the project has run, its last
    blocks, watermark, row counts, last run and data-test results (from run_results.json). Reads
    only: nothing a manifest names is fetched or run.
    """
    page = _build(project, target, out, env)
    typer.echo(f"Docs site written: {page}")


@app.command("serve", cls=metavars.Command)
def serve(
    port: int = typer.Option(
        8080, "--port", "-p", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).", metavar="N"
    ),
    out: Path | None = OutOption,
    build_first: bool = typer.Option(True, "--build/--no-build", help="Build the site before serving it."),
    project: Path | None = ProjectOption,
    target: str | None = TargetOption,
) -> None:
    """Build the docs site and serve it on 127.0.0.1 (only this machine can connect); Ctrl-C stops."""
    if build_first:
        folder = _build(project, target, out).parent
    else:
        from odfproj.project.config import load_project

        folder = out if out is not None else load_project(project).workspace(target) / SITE_FOLDER
        if not (folder / "index.html").is_file():
            raise OdfprojError(
                f"no docs site in {folder}: run `odfproj docs build` first, or drop --no-build"
            )
    from odfproj.docsite.serve import HOST, site_server

    try:
        server = site_server(folder, port)
    except OSError as e:
        raise OdfprojError(f"cannot serve on {HOST}:{port}: {e.strerror or e}") from None
    with server:
        typer.echo(
            f"Serving {folder} at http://{HOST}:{server.server_address[1]}/ (Ctrl-C to stop)", err=False
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            typer.echo("Stopped.")
