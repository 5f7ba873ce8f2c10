"""Printing query results (``query``, ``sql``): a rich table for people, CSV or JSON lines for tools."""

from __future__ import annotations

import enum
import json
from datetime import datetime

import pyarrow as pa
import pyarrow.csv as pacsv
import typer
from rich.console import Console
from rich.table import Table


class QueryFormat(enum.StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def print_table(table: pa.Table, output_format: QueryFormat) -> None:
    if output_format is QueryFormat.csv:
        sink = pa.BufferOutputStream()
        pacsv.write_csv(table, sink)
        typer.echo(sink.getvalue().to_pybytes().decode(), nl=False)
        return
    rows = table.to_pylist()
    if output_format is QueryFormat.json:
        for row in rows:
            typer.echo(json.dumps(row, default=str))
        return
    out = Table(show_header=True, header_style="bold")
    for name in table.column_names:
        out.add_column(name)
    for row in rows:
        out.add_row(*(_cell(v) for v in row.values()))
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # piped or in CI: do not squeeze columns into 80 characters
    console.print(out)
    typer.echo(f"({table.num_rows} row(s))")


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.isoformat(sep=" ", timespec="milliseconds" if value.microsecond else "seconds")
        return text.replace("+00:00", "Z")
    return str(value)
