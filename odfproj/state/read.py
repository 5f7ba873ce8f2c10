"""Reading a dataset's state - current or as at a point in history - through the state index.

Reads skip rows whose bit is 0, as in Opal: no sort-merge of the changelog. Each data file covers a
known closed offset interval, so a file without a valid row in its interval is not opened at all, and
in the others the valid rows are picked by ``offset - start`` (a numpy boolean mask), not by a join.

Returned columns: ``offset`` (the row id; stable, and what links a row to its changelog record),
``event_time``, then the user columns (all of them by default, else the requested ones in the given
order). ``op`` is dropped (every valid row is a ``+A`` or ``+C``, the difference is history, not state)
and so is ``system_time`` (when the row was written; ask for it by name in ``columns`` if needed).
Rows come in offset order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64, FrozenBitMap64

from odfproj.odf.data_schema import Vocab
from odfproj.state.dataset_index import open_state_index, primary_key_of
from odfproj.state.errors import StateIndexError
from odfproj.state.index import AsAt, StateIndex, bitmap_to_numpy
from odfproj.storage.dataset import Dataset
from odfproj.storage.objects import read_data_file
from odfproj.storage.slices import data_as_of


def read_state(
    dataset: Dataset,
    columns: Sequence[str] | None = None,
    as_at: AsAt | None = None,
    *,
    key_columns: Sequence[str] | None = None,
    index: StateIndex | None = None,
    limit: int | None = None,
) -> pa.Table:
    """The rows valid at the head (``as_at=None``), after a block (hash) or as known at a system time.

    ``key_columns`` default to the primary key of the dataset's merge strategy; ``index`` may be
    passed by a caller that already holds one at the dataset's head. With ``limit``, only the first
    rows (in offset order), and only the files that hold them are read.
    """
    schema, parts = state_parts(dataset, columns, as_at, key_columns=key_columns, index=index)
    tables: list[pa.Table] = []
    rows = 0
    for part in parts if limit != 0 else ():
        tables.append(part)
        rows += part.num_rows
        if limit is not None and rows >= limit:
            break  # before the next file is opened
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.slice(0, limit) if limit is not None else table


def state_parts(
    dataset: Dataset,
    columns: Sequence[str] | None = None,
    as_at: AsAt | None = None,
    *,
    key_columns: Sequence[str] | None = None,
    index: StateIndex | None = None,
) -> tuple[pa.Schema, Iterator[pa.Table]]:
    """Like :func:`read_state`, one data file's valid rows at a time (a large state never whole in memory).

    Returns the rows' schema and the (lazy) parts; files without a valid row give no part.
    """
    projection = dataset.projection()
    if index is None:
        keys = tuple(key_columns) if key_columns is not None else primary_key_of(projection)
        if not keys:
            raise StateIndexError(
                f"dataset {dataset.name} declares no primary key; pass key_columns to read its state"
            )
        index = open_state_index(dataset, keys)
    elif index.head != projection.head:
        raise StateIndexError(f"dataset {dataset.name}: the given state index is not at the dataset's head")
    valid = index.current_offsets() if as_at is None else index.offsets_as_at(as_at)
    schema = projection.arrow_schema
    if schema is None:
        raise StateIndexError(f"dataset {dataset.name} has no data schema yet")
    vocab = Vocab.of(projection.set_vocab)
    system = set(vocab.to_file().values())
    user = [f.name for f in schema if f.name not in system]
    selected = list(columns) if columns is not None else user
    unknown = [c for c in selected if c not in schema.names or c in (vocab.offset, vocab.op)]
    if unknown:
        raise StateIndexError(f"dataset {dataset.name} has no data column {', '.join(map(repr, unknown))}")
    wanted = [vocab.offset, vocab.event_time, *(c for c in selected if c != vocab.event_time)]
    out_schema = pa.schema([schema.field(c) for c in wanted])
    data = data_as_of(dataset)
    # Only the files holding a valid row, found by offset in the data index (no chain walk).
    slices = data.holding(bitmap_to_numpy(valid)) if data is not None else ()

    def parts() -> Iterator[pa.Table]:
        for data_slice in slices:
            part = read_valid_rows(data_slice.path, out_schema, valid, data_slice.start, data_slice.end)
            if part is not None:
                yield part

    return out_schema, parts()


def read_valid_rows(
    path: Path, columns: pa.Schema, valid: BitMap64 | FrozenBitMap64, start: int, end: int
) -> pa.Table | None:
    """The rows of one data file (offsets ``start..end``) whose offset is in ``valid``; ``None`` if none.

    ``columns`` (the offset column first) are read under their types in the current data schema;
    columns the file predates read as nulls. The file is not opened when the bitmap has no offset in
    its interval.
    """
    if valid.range_cardinality(start, end + 1) == 0:
        return None  # no valid row in this file: never opened
    in_file = BitMap64()
    in_file.add_range(start, end + 1)
    member = np.zeros(end - start + 1, bool)
    member[bitmap_to_numpy(valid & in_file) - start] = True
    table = read_data_file(path, columns)
    offsets = table.column(0).to_numpy()
    if offsets.size and (offsets.min() < start or offsets.max() > end):
        raise StateIndexError(f"{path}: holds offsets outside its block's interval {start}..{end}")
    return table.filter(pa.array(member[offsets - start]))


def read_changelog(dataset: Dataset, *, limit: int | None = None, newest: bool = False) -> pa.Table:
    """The dataset's records as stored: every ``+A/-R/-C/+C`` row in offset order (or newest first).

    Reads only as many data files as ``limit`` needs: the chain says which offsets each file holds.
    """
    projection = dataset.projection()
    schema = projection.arrow_schema
    if schema is None:
        return pa.table({})
    data = data_as_of(dataset)
    parts: list[pa.Table] = []
    rows = 0
    for data_slice in data.iter_slices(newest=newest) if data is not None else ():
        if limit is not None and rows >= limit:
            break
        table = read_data_file(data_slice.path, schema)
        if newest:
            table = table.take(pa.array(range(table.num_rows - 1, -1, -1)))
        parts.append(table)
        rows += table.num_rows
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    return table.slice(0, limit) if limit is not None else table
