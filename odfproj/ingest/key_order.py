"""A first snapshot's records numbered in key order, without pinning the sorted rows.

A first snapshot (a Snapshot merge into a dataset with no records) is every row of the batch as ``+A``,
in primary-key order (:mod:`odfproj.ingest.merge`'s ordering contract), cut into files of
``rows_per_file`` records. The general way (:func:`odfproj.engine.slices.number_rows` over a
range-sorted frame) pins the sorted rows in a checkpoint so that the count and the write see the same
partitions, and the files two tasks share are joined by the driver. Here the sort is made
deterministic instead, so nothing is pinned but the key columns:

1. **The key columns alone** are sorted and numbered (``number_rows``: a checkpoint of the keys, a
   count per partition, the batch's aggregates); the keys at every ``rows_per_file``-th rank are the
   bounds of the files (the *cells*). Few bytes per record, against every column's.
2. **Every record's cell** is a comparison with those bounds (a binary search written as nested
   ``CASE``), and the records are hash-partitioned by it, cell ``c`` into partition ``c`` (a fixed
   function of the key, unlike a range partitioning's sampled bounds), and sorted by key within each
   partition. Keys are unique, so every computation gives the same rows in the same partitions and
   order.
3. **The offset** is ``monotonically_increasing_id()`` plus a per-cell constant, since the cells' sizes
   are known (``rows_per_file`` each but the last). Every file is one partition, written by one task:
   none is joined.

It applies when the batch is deterministic (the read phase's pinned scan), the keys' values can be
written back as literals exactly (integers, text, dates, decimals, booleans, bytes; not floats, whose
NaN Spark orders its own way, nor timestamps, which pass through the session's time zone), and the
cells are few. A key repeated across a bound makes it give up (``None``) before any record moves: the
general way then finds and names the repeated keys. The output is the general way's, row for row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from odfproj.engine.columns import column
from odfproj.engine.slices import PARTITION_SHIFT, Numbered, number_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["MAX_CELLS", "number_in_key_order"]

#: At most this many files (cells) are cut by comparison with their bounds; more take the general way.
MAX_CELLS = 1024

_RANK = "__odfproj_rank"
_CELL = "__odfproj_cell"
_PARTITION = "__odfproj_partition"
#: Numbers tried per cell to find each partition a tag (:func:`_partition_tags`).
_TAG_TRIES = 64
#: Spark's simple type names whose values come back from ``collect`` and go into ``lit`` unchanged.
_EXACT_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "date", "boolean", "binary")


def number_in_key_order(
    records: DataFrame,
    key: Sequence[str],
    offset_column: str,
    first: int,
    limit: int,
    aggregates: Mapping[str, Column] | None = None,
    *,
    carried: Sequence[str] = (),
) -> Numbered | None:
    """``records`` sorted by ``key`` (ascending, nulls first) with dense offsets from ``first``.

    ``records`` must give the same rows whenever computed (pinned, or a scan of pinned data) and
    hold every key once. ``limit`` is the records-per-file limit the files will be cut by.
    ``aggregates`` are computed per partition as :func:`~odfproj.engine.slices.number_rows` does,
    over the key columns and ``carried`` (the columns they read). ``None`` when this way does not
    apply (see the module): the caller numbers the sorted records the general way.
    """
    from pyspark.sql import functions as F

    fields = {f.name: f.dataType for f in records.schema.fields}
    if limit <= 0 or not all(_exact(fields[k]) for k in key):
        return None
    ascending = [column(k).asc_nulls_first() for k in key]
    kept = [*key, *(c for c in carried if c not in key)]
    ranked = number_rows(records.select(*(column(c) for c in kept)).orderBy(*ascending), _RANK, 0, aggregates)
    cells = -(-ranked.count // limit)
    if ranked.count == 0 or cells > MAX_CELLS:
        return None
    # The key at every bound's rank and the one just before it: a key on both sides has no one cell.
    near = (column(_RANK) % limit == 0) | ((column(_RANK) + 1) % limit == 0)
    rows = ranked.frame.where(near).collect()  # 2 per file: no sort
    at = {int(row[_RANK]): tuple(row[k] for k in key) for row in rows}
    bounds = [at[c * limit] for c in range(1, cells)]
    if any(at[c * limit - 1] == at[c * limit] for c in range(1, cells)):
        return None
    tags = _partition_tags(records, cells)
    if tags is None:
        return None
    tag = _cell_of(bounds, tags, key, fields, 0, len(bounds)).cast("long")
    # Cell c is partition c: its records' offsets are first + c * limit onwards.
    deltas = {tags[c]: first + c * limit - (c << PARTITION_SHIFT) for c in range(cells)}
    table = F.create_map(*[F.lit(v) for pair in sorted(deltas.items()) for v in pair])
    placed = records.withColumn(_CELL, tag).repartition(cells, column(_CELL)).sortWithinPartitions(*ascending)
    # coalesce: element_at may be null to Spark's eyes; an offset column is NOT NULL.
    offset = F.coalesce(F.monotonically_increasing_id() + F.element_at(table, column(_CELL)), F.lit(-1))
    frame = placed.select(offset.cast("long").alias(offset_column), *(column(c) for c in records.columns))
    return Numbered(frame, offset_column, first, ranked.count, ranked.per_partition)


def _exact(data_type: DataType) -> bool:
    return data_type.simpleString() in _EXACT_TYPES or data_type.simpleString().startswith("decimal(")


def _cell_of(
    bounds: Sequence[tuple[Any, ...]],
    tags: Sequence[int],
    key: Sequence[str],
    fields: Mapping[str, DataType],
    lo: int,
    hi: int,
) -> Column:
    """The tag of the record's cell: the number of ``bounds`` at or below its key, given that between
    ``lo`` and ``hi`` of them are (a binary search). Keys compare as structs, field by field with nulls
    first: the order of the sort.
    """
    from pyspark.sql import functions as F

    if lo == hi:
        return F.lit(tags[lo])
    mid = (lo + hi) // 2
    values = [F.lit(v).cast(fields[k]).alias(k) for k, v in zip(key, bounds[mid], strict=True)]
    above = F.struct(*[column(k) for k in key]) >= F.struct(*values)
    higher = _cell_of(bounds, tags, key, fields, mid + 1, hi)
    return F.when(above, higher).otherwise(_cell_of(bounds, tags, key, fields, lo, mid))


def _partition_tags(records: DataFrame, cells: int) -> list[int] | None:
    """Per cell ``c``, a number that Spark's hash partitioning into ``cells`` partitions sends to partition ``c``.

    Partitioning by the cell number itself would put some cells together (``pmod(hash(c), cells)``
    collides) and leave tasks idle; a tag per cell gives every cell a partition, and so a task, of
    its own. Asked of Spark, on a few numbers per cell; ``None`` in the unlikely case they miss one.
    """
    from pyspark.sql import functions as F

    numbers = records.sparkSession.range(cells * _TAG_TRIES).select(
        column("id").alias(_CELL), F.pmod(F.hash(column("id")), F.lit(cells)).alias(_PARTITION)
    )
    found = numbers.groupBy(_PARTITION).agg(F.min(_CELL).alias(_CELL)).collect()
    tags = {int(row[_PARTITION]): int(row[_CELL]) for row in found}
    return [tags[c] for c in range(cells)] if len(tags) == cells else None
