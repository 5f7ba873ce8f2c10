"""One grid cell's data file made from the pieces Spark's tasks wrote of it: pyarrow only, no Spark.

:mod:`odfproj.engine.slices` cuts a batch into files on a fixed grid of offsets; a cell that two read
partitions share was written by both tasks, one piece each, and the pieces are joined here in offset
order. The same function runs in the driver and in a Spark task (:mod:`odfproj.engine.slice_tasks`),
which is why it lives apart from the Spark side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

__all__ = ["JOIN_ROWS", "join_pieces"]

#: The records of one cell's piece in memory at a time. Cells are joined one after the other in the
#: driver: two joins at once (pyarrow's reader and writer release the GIL) raised the driver's peak RSS
#: by 230 MB at 20M rows (memory the allocator keeps per thread), past the 500 MB a large ingest may take.
JOIN_ROWS = 1 << 18


def join_pieces(pieces: Sequence[Path], out: Path, codec: str | None) -> None:
    """Write ``pieces`` (Parquet files of one schema, in offset order) one after the other into ``out``.

    :data:`JOIN_ROWS` records in memory at a time, each its own row group, with the schema Spark gave
    the pieces. Only the columns Spark's writer kept dictionary-encoded are written so: for the others
    (nearly every value distinct, such as the offset) pyarrow would build a dictionary only to drop it,
    which was a third of the join's time. The encoding is the file's business; the logical hash sees
    the values only.
    """
    if codec is None:
        raise ValueError("joining pieces needs a codec pyarrow writes")
    schema = pq.read_schema(pieces[0])
    dictionary = _dictionary_columns(pieces[0])
    with pq.ParquetWriter(str(out), schema, compression=codec, use_dictionary=dictionary) as writer:
        for piece in pieces:
            with pq.ParquetFile(piece) as parquet:
                for batch in parquet.iter_batches(batch_size=JOIN_ROWS):
                    writer.write_batch(batch)


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
