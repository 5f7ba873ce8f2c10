"""Numbering records and writing them as data slices, all in Spark tasks: nothing passes through the driver.

Ingest and transforms both end with records in *offset order* (partitions in order, rows in order
within each) that need dense offsets from ``first`` on and must land in Parquet files of at most
``rows_per_file`` records each, every file holding consecutive offsets (one data slice per block).

Why it is done this way:

- **No single-partition window.** ``row_number()`` over an unpartitioned window moves every row into
  one task. Instead the ordered records are pinned with ``localCheckpoint`` (so a recomputation cannot
  re-split them: a range partitioning's bounds come from sampling), one small job counts the rows of
  each partition, the driver takes the prefix sums of those few numbers, and every row's offset is
  ``monotonically_increasing_id()`` (partition id << 33 plus its row number in the partition) shifted by
  its partition's base. The offsets depend only on the order, never on how Spark split the rows.
- **No checkpoint for a scan.** Records that a recomputation gives back in the same partitions and
  order (a file scan, as the read phase makes it) are not pinned: the count job scans them (a CSV
  count parses no value) and the write scans them again, which costs less than storing and re-reading
  every row (``number_rows(deterministic=True)``; measured in bench/README.md, issue 36). Should a scan
  ever come back otherwise, the file checks below refuse the batch: nothing is committed.
- **No count job where the caller knows the counts.** A CSV read line by line is counted, split by
  split, on the driver's scan of its bytes (``ingest.csv_lines``, ``engine.file_splits``):
  :func:`number_counted` numbers from those counts, which are a prediction. So the checks are stricter
  for them: pieces and files must follow each other exactly, and a file one task wrote from several
  partitions (the one-file and older ways) is read back to see its offsets in a row, since its footer
  shows only the ends. A miss is :class:`OffsetsMismatch`, and nothing is written.
- **Files cut on a fixed grid.** File ``k`` holds offsets ``first + k*rows_per_file`` onwards, whatever
  the partitioning: each task writes its rows of cell ``k`` to a file of its own (a partitioned write
  on ``k`` with concurrent writers, so no shuffle and no sort: a task's rows are in offset order), and
  the cells that two tasks share (at most one per partition boundary) are joined by the driver in
  offset order, with the writer of :mod:`odfproj.engine.driver_slices`. Only the last file is short and
  every cut falls on the grid. Columns the driver does not write as Spark does (nested types, a codec
  pyarrow lacks) take the older way: records range-partitioned on ``k`` and written with
  ``maxRecordsPerFile = rows_per_file``. A batch that fits one file is written by one task (no shuffle).
- **Declared types.** Columns are cast in Spark to the types the caller declares before writing; the
  system columns are non-null and every other column is nullable (see :func:`nullable`).

Only the DataFrame API is used (no RDDs, no py4j), so the same code runs on Spark Connect.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq

from odfproj.engine.columns import column
from odfproj.engine.driver_slices import driver_codec, driver_writable
from odfproj.engine.exchange import exchange_of
from odfproj.engine.types import arrow_schema_from_spark
from odfproj.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "DEFAULT_ROWS_PER_FILE",
    "PARTITION_SHIFT",
    "ROWS_PER_FILE_KEY",
    "Numbered",
    "OffsetsMismatch",
    "WrittenSlice",
    "nullable",
    "number_counted",
    "number_rows",
    "rows_per_file",
    "write_slices",
]

#: The ``spark_conf`` key that caps the records of one data file (Spark's own name for the same limit).
ROWS_PER_FILE_KEY = "spark.sql.files.maxRecordsPerFile"
#: Records per data file when a target does not say: big enough that everyday batches are one block,
#: small enough that a large batch is written by several tasks at once.
DEFAULT_ROWS_PER_FILE = 1_000_000

_PARTITION = "__odfproj_partition"
_FILE = "__odfproj_file"
_COUNT = "__odfproj_count"
#: ``monotonically_increasing_id()`` puts the partition index above bit 33.
PARTITION_SHIFT = 33
#: Spark's setting for the files one task of a partitioned write keeps open without sorting its rows;
#: past it Spark sorts the rest (slower, same files). A task's rows meet a handful of cells at the default
#: records-per-file limit, so a few writers are enough.
CONCURRENT_WRITERS_KEY = "spark.sql.maxConcurrentOutputFileWriters"
_CONCURRENT_WRITERS = 16
#: The records of one cell's piece in memory at a time. Cells are joined one after the other: two joins
#: at once (pyarrow's reader and writer release the GIL) raised the driver's peak RSS by 230 MB at 20M
#: rows (memory the allocator keeps per thread), past the 500 MB a large ingest may take.
_JOIN_ROWS = 1 << 18


def rows_per_file(conf: Mapping[str, str]) -> int:
    """The records-per-file limit a Spark conf asks for (0 or less: no limit); the default if unset."""
    value = conf.get(ROWS_PER_FILE_KEY)
    if value is None or not str(value).strip():
        return DEFAULT_ROWS_PER_FILE
    try:
        return int(str(value).strip())
    except ValueError:
        raise EngineError(f"{ROWS_PER_FILE_KEY}: {value!r} is not a whole number of records") from None


@dataclass(frozen=True)
class Numbered:
    """Records with their ``offset`` column, pinned in a checkpoint; ``count`` of them from ``first``.

    ``per_partition`` holds, for each non-empty partition, the values of the aggregates the caller
    asked :func:`number_rows` for (combining them is the caller's business: a max of maxes, a sum).
    """

    frame: DataFrame
    offset_column: str
    first: int
    count: int
    per_partition: tuple[Mapping[str, Any], ...] = ()
    #: The counts were the caller's (:func:`number_counted`), not Spark's: the files may disagree.
    predicted: bool = False


class OffsetsMismatch(EngineError):
    """The files Spark wrote do not hold the offsets they should: nothing of them may be committed.

    With counts Spark gave (:func:`number_rows`) this means Spark did not do as told; with counts the
    caller predicted (:func:`number_counted`), that the prediction was wrong, and counting is the way.
    """


def _offset_deltas(counts: Mapping[int, int], first: int) -> dict[int, int]:
    """Per partition: what to add to ``monotonically_increasing_id()`` to get the row's offset."""
    deltas = {}
    base = first
    for partition in sorted(counts):
        deltas[partition] = base - (partition << PARTITION_SHIFT)
        base += counts[partition]
    return deltas


def number_rows(
    records: DataFrame,
    offset_column: str,
    first: int,
    aggregates: Mapping[str, Column] | None = None,
    *,
    deterministic: bool = False,
) -> Numbered:
    """``records`` (in offset order) with a dense ``offset_column`` from ``first`` as the first column.

    One Spark job (plus the stages of ``records``' own shuffles): the per-partition count, which also
    computes ``aggregates`` (name -> aggregate expression) per partition; the driver receives one
    row per non-empty partition. The checkpoint is lazy, so that same job computes the records and
    pins them (every partition, since the count reads all of them): an eager checkpoint would be a
    job of its own that only computes what the count then reads again (measured on bench_dag's
    50-dataset run: one job less per numbered batch, 130 jobs in all).

    ``deterministic``: every computation of ``records`` gives the same rows in the same partitions and
    order (a file scan with no shuffle above it), so they are not pinned at all; the count then reads
    only the columns the aggregates need.
    """
    from pyspark.sql import functions as F

    aggregates = dict(aggregates or {})
    stable = records if deterministic else records.localCheckpoint(eager=False)
    rows = (
        stable.groupBy(F.spark_partition_id().alias(_PARTITION))
        .agg(F.count(F.lit(1)).alias(_COUNT), *(value.alias(name) for name, value in aggregates.items()))
        .collect()
    )
    counts = {int(row[_PARTITION]): int(row[_COUNT]) for row in rows}
    values = tuple({name: row[name] for name in aggregates} for row in rows)
    return _numbered(stable, offset_column, first, counts, values)


def number_counted(
    records: DataFrame,
    offset_column: str,
    first: int,
    counts: Sequence[int],
    per_partition: tuple[Mapping[str, Any], ...] = (),
) -> Numbered:
    """``records`` numbered as :func:`number_rows` numbers them, from the records of each partition the
    caller already knows (``counts``, by partition index): no Spark job.

    For a scan whose every computation gives the same partitions (a file scan): nothing is pinned.
    ``per_partition``: the aggregates' values, which the caller must know as well. If Spark's rows do
    not match ``counts``, :func:`write_slices` raises :class:`OffsetsMismatch` and writes nothing.
    """
    known = {partition: count for partition, count in enumerate(counts) if count}
    return replace(_numbered(records, offset_column, first, known, per_partition), predicted=True)


def _numbered(
    stable: DataFrame,
    offset_column: str,
    first: int,
    counts: Mapping[int, int],
    values: tuple[Mapping[str, Any], ...],
) -> Numbered:
    """``stable`` with its offset column first: each partition's rows from its base on (``counts``)."""
    from pyspark.sql import functions as F

    total = sum(counts.values())
    deltas = _offset_deltas(counts, first)
    if deltas:
        table = F.create_map(*[F.lit(v) for pair in sorted(deltas.items()) for v in pair])
        delta = F.element_at(table, F.spark_partition_id())
    else:
        delta = F.lit(0)
    # coalesce: element_at may be null to Spark's eyes; an offset column is NOT NULL.
    offset = F.coalesce(F.monotonically_increasing_id() + delta, F.lit(-1)).cast("long").alias(offset_column)
    return Numbered(stable.select(offset, "*"), offset_column, first, total, values)


def nullable(value: Column, numbered: Numbered) -> Column:
    """``value`` as a nullable column (Spark keeps a literal's NOT NULL into the file otherwise).

    The condition is always true, but Spark cannot prove it, so the column's type allows nulls.
    """
    from pyspark.sql import functions as F

    return F.when(F.col(numbered.offset_column) >= F.lit(numbered.first), value)


@dataclass(frozen=True)
class WrittenSlice:
    """One Parquet file Spark wrote: ``count`` records with offsets ``first`` .. ``first + count - 1``."""

    path: Path
    first: int
    count: int

    @property
    def last(self) -> int:
        return self.first + self.count - 1


def write_slices(
    numbered: Numbered, out: DataFrame, folder: Path, limit: int, *, offset_column: str | None = None
) -> list[WrittenSlice]:
    """Write ``out`` (``numbered``'s frame, columns as they are to be stored) as files of <= ``limit`` records.

    ``offset_column`` is the offset's name in ``out`` (default: as numbered). ``limit <= 0`` means one file. The files are left in a new folder under ``folder`` and returned in
    offset order; an empty batch writes nothing. The caller removes the files. Where the session's
    executors may not see the driver's disk, Spark writes them into the workspace's store and the
    driver takes them from there (``engine.exchange``).
    """
    from pyspark.sql import functions as F

    if numbered.count == 0:
        return []
    target = Path(tempfile.mkdtemp(prefix="slices-", dir=folder))
    written = target / "out"
    exchange = exchange_of(out.sparkSession)  # executors on other hosts write into the store
    spark_at = exchange.writes_at(written)
    name = offset_column or numbered.offset_column
    offset = column(name)
    pieces_checked = False
    try:
        grid = F.floor((offset - F.lit(numbered.first)) / F.lit(limit)).cast("long")
        codec = driver_codec(out)
        if limit <= 0 or numbered.count <= limit:
            # The option always, so a session-wide maxRecordsPerFile cannot cut the one file.
            out.coalesce(1).write.mode("overwrite").option("maxRecordsPerFile", "0").parquet(spark_at)
            taken = exchange.take(written, keep=True)
            slices = _slices_of(sorted(written.glob("part-*.parquet")), name)
        elif codec is not None and driver_writable(arrow_schema_from_spark(out.schema)):
            _allow_concurrent_writers(out)
            cells = out.withColumn(_FILE, grid).write.mode("overwrite").partitionBy(_FILE)
            cells.option("maxRecordsPerFile", "0").parquet(spark_at)
            taken = exchange.take(written, keep=True)
            joins = [_joined(cell, name, codec) for cell in sorted(written.glob(f"{_FILE}=*"))]
            slices = sorted((s for s in joins if s is not None), key=lambda s: s.first)
            pieces_checked = True  # each task's piece of a cell is in a row; the pieces were checked
        else:
            files = -(-numbered.count // limit)
            cut = out.withColumn(_FILE, grid).repartitionByRange(files, F.col(_FILE))
            cut = cut.sortWithinPartitions(offset).drop(_FILE)
            cut.write.mode("overwrite").option("maxRecordsPerFile", str(limit)).parquet(spark_at)
            taken = exchange.take(written, keep=True)
            slices = _slices_of(sorted(written.glob("part-*.parquet")), name)
        _check_grid(slices, numbered, limit)
        if numbered.predicted and not pieces_checked:
            for piece in slices:  # one task may have written two partitions' rows: a miscount is inside
                _check_in_a_row(piece, name)
        named = []
        for i, piece in enumerate(slices):
            path = target / f"slice-{i:06d}-{uuid.uuid4().hex[:8]}.parquet"
            piece.path.replace(path)
            named.append(WrittenSlice(path, piece.first, piece.count))
            key = taken.pop(piece.path, None)
            if key is not None:  # its bytes move within the store at the commit (storage.copies_in_store)
                exchange.remember_copy(path, key)
        exchange.release(taken.values())  # pieces joined into one file, Spark's markers
        shutil.rmtree(written, ignore_errors=True)
        return named
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        exchange.drop(written)
        raise


def _allow_concurrent_writers(out: DataFrame) -> None:
    """Let a task of a partitioned write keep its cells' files open instead of sorting its rows by cell.

    A session setting (Spark reads it when planning a write): set once, never unset, since a
    concurrent thread's write may be planning with it. It only changes partitioned writes, which
    odfproj makes nowhere else; a target that set its own value keeps it.
    """
    conf = out.sparkSession.conf
    if int(str(conf.get(CONCURRENT_WRITERS_KEY, "0") or "0")) <= 0:
        conf.set(CONCURRENT_WRITERS_KEY, str(_CONCURRENT_WRITERS))


def _joined(cell: Path, offset_column: str, codec: str) -> WrittenSlice | None:
    """One grid cell's file: the one piece a task wrote, or the pieces of the tasks that shared it, joined.

    The pieces must follow each other (each holds consecutive offsets, and the next starts right after);
    they are joined in offset order into one file with the schema Spark gave them, :data:`_JOIN_ROWS`
    records in memory at a time (each its own row group). Only the columns Spark's writer kept
    dictionary-encoded are written so: for the others (nearly every value distinct, such as the offset)
    pyarrow would build a dictionary only to drop it, which was a third of the join's time. The
    encoding is the file's business; the logical hash sees the values only.
    """
    pieces = _slices_of(sorted(cell.glob("part-*.parquet")), offset_column)
    if len(pieces) <= 1:
        return pieces[0] if pieces else None
    for before, after in pairwise(pieces):
        if after.first != before.last + 1:
            raise OffsetsMismatch(
                f"Spark wrote offsets {before.first}..{before.last} and {after.first}..{after.last} for one "
                "data file; nothing was committed"
            )
    joined = cell / "joined.parquet"
    schema = pq.read_schema(pieces[0].path)
    dictionary = _dictionary_columns(pieces[0].path)
    with pq.ParquetWriter(str(joined), schema, compression=codec, use_dictionary=dictionary) as writer:
        for piece in pieces:
            with pq.ParquetFile(piece.path) as parquet:
                for batch in parquet.iter_batches(batch_size=_JOIN_ROWS):
                    writer.write_batch(batch)
    return WrittenSlice(joined, pieces[0].first, sum(p.count for p in pieces))


def _dictionary_columns(path: Path) -> list[str]:
    """The columns whose chunks in ``path`` (its first row group) have a dictionary page."""
    with pq.ParquetFile(path) as parquet:
        metadata = parquet.metadata
    if metadata.num_row_groups == 0:
        return []
    group = metadata.row_group(0)
    return [
        group.column(i).path_in_schema
        for i in range(group.num_columns)
        if group.column(i).has_dictionary_page
    ]


def _slices_of(parts: list[Path], offset_column: str) -> list[WrittenSlice]:
    """The non-empty part files with their first offset (the column's minimum, from the footer)."""
    slices = []
    for part in parts:
        metadata = pq.ParquetFile(part).metadata
        if metadata.num_rows == 0:
            continue
        index = metadata.schema.names.index(offset_column)
        stats = [
            metadata.row_group(g).column(index).statistics
            for g in range(metadata.num_row_groups)
            if metadata.row_group(g).num_rows
        ]
        first = min(int(s.min) for s in stats)
        last = max(int(s.max) for s in stats)
        if last - first + 1 != metadata.num_rows:
            raise OffsetsMismatch(
                f"Spark wrote a data file with offsets {first}..{last} but {metadata.num_rows} records; "
                "nothing was committed"
            )
        slices.append(WrittenSlice(part, first, metadata.num_rows))
    return sorted(slices, key=lambda s: s.first)


def _check_in_a_row(piece: WrittenSlice, offset_column: str) -> None:
    """Every offset of ``piece`` one more than the record's before it (the footer checks only the ends)."""
    offsets = pq.read_table(piece.path, columns=[offset_column]).column(0).to_numpy()
    if offsets.size > 1 and not (np.diff(offsets) == 1).all():
        raise OffsetsMismatch(
            f"Spark wrote a data file with offsets {piece.first}..{piece.last} not in a row; nothing was committed"
        )


def _check_grid(slices: list[WrittenSlice], numbered: Numbered, limit: int) -> None:
    """Every offset exactly once, files in a row, none over the limit: else Spark did not do as told."""
    expected = numbered.first
    for piece in slices:
        if piece.first != expected or (limit > 0 and piece.count > limit):
            raise OffsetsMismatch(
                f"Spark wrote a data file with offsets {piece.first}..{piece.last} where offset {expected} "
                f"was due (at most {limit} records per file); nothing was committed"
            )
        expected = piece.last + 1
    if expected != numbered.first + numbered.count:
        raise OffsetsMismatch(
            f"Spark wrote offsets {numbered.first}..{expected - 1} of {numbered.first}.."
            f"{numbered.first + numbered.count - 1}; nothing was committed"
        )
