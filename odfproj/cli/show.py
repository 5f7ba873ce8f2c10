"""``odfproj show DATASET``: a dataset's definition, schema, numbers, first rows and last run."""

from __future__ import annotations

from pathlib import Path

import typer

from odfproj.cli.options import PROJECT_HELP, WORKSPACE_HELP, EnvReadOption, resolve_workspace
from odfproj.cli.tables import QueryFormat, print_table


def show(
    dataset: str = typer.Argument(..., help="Dataset name (case-insensitive)."),
    rows: int = typer.Option(5, "--rows", "-n", min=0, help="How many rows to show.", metavar="N"),
    env: str | None = EnvReadOption,
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Show a dataset as applied: kind, inputs by name, query or sources, schema, head, watermark,
    records and current rows, its first rows and its outcome in the last run (run_results.json).

    Reads the workspace only; starts no JVM.
    """
    from odfproj.odf.timestamps import format_rfc3339
    from odfproj.run.show import describe_dataset

    s = describe_dataset(resolve_workspace(workspace, project, env=env), dataset, rows=rows)
    echo = typer.echo
    chain = s.chain
    echo(f"{s.name} ({s.kind}) {chain.dataset_id}")
    if s.inputs:
        echo(f"inputs: {', '.join(s.inputs)}")
    for line in s.definition:
        echo(("query: " if s.kind == "Derivative" else "source: ") + line.replace("\n", "\n  "))
    echo(f"schema: {', '.join(s.schema) if s.schema else '(no data yet)'}")
    if chain.primary_key:
        echo(f"primary key: {', '.join(chain.primary_key)}")
    echo(f"head: {chain.head} ({chain.blocks} block(s))")
    echo(f"watermark: {format_rfc3339(chain.watermark) if chain.watermark else '(none)'}")
    current = f", {s.current_rows} current row(s)" if s.current_rows is not None else ""
    echo(f"records: {chain.records}{current}")
    if s.last_run is None:
        echo("last run: (none recorded)")
    else:
        r = s.last_run
        tests = r.get("tests") or []
        passed = sum(1 for t in tests if t.get("status") == "pass")
        detail = f": {r['message']}" if r.get("message") else ""
        tested = f", data tests {passed}/{len(tests)} passed" if tests else ""
        echo(
            f"last run: {r.get('status')} at {r.get('run_started_at')}, {r.get('records_added', 0)} record(s){tested}{detail}"
        )
    if s.sample.num_rows:
        print_table(s.sample, QueryFormat.table, op_column=s.op_column)
