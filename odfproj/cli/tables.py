"""Printing query results (``query``, ``sql``): a rich table for people, CSV or JSON lines for tools."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    import pyarrow as pa


class QueryFormat(enum.StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


#: Printed under a table that shows operation types as codes.
OP_LEGEND = "op: +A append, -R retract, -C correction (old values), +C correction (new values)"


def print_table(table: pa.Table, output_format: QueryFormat, *, op_column: str | None = None) -> None:
    """Print ``table``; in the table format, ``op_column``'s 0-3 show as ``+A -R -C +C`` with a legend.

    CSV and JSON keep the numbers the files store, for tools.
    """
    if output_format is QueryFormat.csv:
        import pyarrow as pa
        import pyarrow.csv as pacsv

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
    coded = op_column in table.column_names
    for row in rows:
        out.add_row(*(_op(v) if coded and k == op_column else _cell(v) for k, v in row.items()))
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # piped or in CI: do not squeeze columns into 80 characters
    console.print(out)
    typer.echo(f"({table.num_rows} row(s))")
    if coded:
        typer.echo(OP_LEGEND)


def _op(value: object) -> str:
    from odfproj.odf.vocab import Op

    try:
        return Op(value).code  # type: ignore[arg-type]
    except ValueError:
        return _cell(value)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.isoformat(sep=" ", timespec="milliseconds" if value.microsecond else "seconds")
        return text.replace("+00:00", "Z")
    return str(value)
