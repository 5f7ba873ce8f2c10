"""``odfproj query DATASET``: a dataset's rows, read straight from its Parquet files (no JVM).

By default a dataset with a primary key shows its current state (latest valid row per key, from
the state index) and any other dataset its changelog; ``--changelog`` and ``--state`` choose.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from odfproj.cli.options import PROJECT_HELP, WORKSPACE_HELP, EnvReadOption, resolve_workspace
from odfproj.cli.tables import QueryFormat, print_table
from odfproj.errors import InvalidValueError, OdfprojError

if TYPE_CHECKING:
    from odfproj.odf.multiformats import Multihash
    from odfproj.storage.dataset import Dataset


def query(
    dataset: str = typer.Argument(..., help="Dataset name (case-insensitive)."),
    limit: int = typer.Option(
        20, "--limit", "-n", min=0, help="At most this many rows (0: all).", metavar="N"
    ),
    output_format: QueryFormat = typer.Option(
        QueryFormat.table, "--format", help="table, csv or json lines."
    ),
    changelog: bool = typer.Option(False, "--changelog", help="Every record as stored, with offset and op."),
    state: bool = typer.Option(False, "--state", help="The latest valid row per primary key."),
    as_at: str | None = typer.Option(
        None,
        "--as-at",
        metavar="TIME|HASH",
        help="With --state: the state as known at an RFC 3339 system time, or after a block (its hash, or the short hash that log --oneline prints).",
    ),
    env: str | None = EnvReadOption,
    workspace: Path | None = typer.Option(None, "--workspace", help=WORKSPACE_HELP, metavar="DIR"),
    project: Path | None = typer.Option(None, "--project", help=PROJECT_HELP, metavar="DIR"),
) -> None:
    """Show a dataset's rows: its current state (datasets with a primary key) or its changelog."""
    from odfproj.odf.vocab import Vocab
    from odfproj.state.dataset_index import primary_key_of
    from odfproj.state.read import read_changelog, read_state
    from odfproj.storage.errors import IntegrityError

    if changelog and (state or as_at):
        raise OdfprojError("--changelog shows every record; it cannot be combined with --state or --as-at")
    opened = resolve_workspace(workspace, project, env=env).open(dataset)
    keyed = bool(primary_key_of(opened.projection()))
    if (state or as_at) and not keyed:
        raise OdfprojError(
            f"dataset {opened.name} declares no primary key, so it has no per-key state; use --changelog, "
            f'or odfproj sql "SELECT * FROM `{opened.name}`" for the rows not retracted'
        )
    try:
        if changelog or not keyed:
            table = read_changelog(opened, limit=limit or None)
        else:
            table = read_state(opened, as_at=_as_at(opened, as_at) if as_at else None, limit=limit or None)
    except IntegrityError as e:  # a damaged data file: name the dataset as well as the file
        raise IntegrityError(f"dataset {opened.name}: {e}") from None
    print_table(table, output_format, op_column=Vocab.of(opened.projection().set_vocab).op)


def _as_at(dataset: Dataset, text: str) -> datetime | Multihash:
    """A system time, a full block hash, or the short hash ``log --oneline`` prints (any unique
    beginning or end of a block's hash)."""
    from odfproj.odf.multiformats import Multihash
    from odfproj.odf.timestamps import parse_rfc3339

    try:
        return Multihash.from_multibase(text)
    except InvalidValueError:  # not a full hash: try a time, then an abbreviation
        pass
    try:
        return parse_rfc3339(text)
    except InvalidValueError:
        pass
    if len(text) >= _SHORTEST_ABBREVIATION and all(c in "0123456789abcdef" for c in text.lower()):
        return _abbreviated_block(dataset, text.lower())
    raise OdfprojError(
        f"--as-at {text!r}: expected an RFC 3339 time or a block hash (as `odfproj log` prints it)"
    ) from None


#: Fewer hex digits than this are too likely to match more than one block.
_SHORTEST_ABBREVIATION = 4


def _abbreviated_block(dataset: Dataset, text: str) -> Multihash:
    from odfproj.storage.data_index import data_index

    matches = data_index(dataset).blocks_like(text)  # every block's hash, without a walk of the chain
    if not matches:
        raise OdfprojError(f"--as-at {text!r}: no block of dataset {dataset.name} has a hash like that")
    if len(matches) > 1:
        raise OdfprojError(
            f"--as-at {text!r}: {len(matches)} blocks of dataset {dataset.name} match; give more characters"
        )
    return matches[0]
