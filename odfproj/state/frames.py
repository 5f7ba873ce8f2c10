"""A dataset's data as Spark DataFrames: its changelog as of a block, its whole history, its current state.

Ingest (a merge needs the history or the previous state), transforms (a query reads its inputs'
changelogs, a derivative its own) and ``odfproj sql`` read a dataset's records through here; the files
to read come from the one chain walk of :mod:`odfproj.storage.slices`.

A live update and the reproduction of a recorded ExecuteTransform read the same way: the data files
of the data events at or before a block, filtered to offsets up to an offset, under the data schema in
effect at that block (:func:`changelog_as_of`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.engine.columns import column, literal
from odfproj.engine.exchange import exchange_of
from odfproj.engine.s3a import reads_in_place
from odfproj.errors import OdfprojError
from odfproj.odf.arrow_schema import decode_arrow_schema
from odfproj.odf.data_schema import EVENT_TIME, Op, Vocab
from odfproj.odf.multiformats import Multihash
from odfproj.state.compacted import COMPACT_ABOVE, compacted_copy
from odfproj.state.dataset_index import open_state_index
from odfproj.state.errors import DataReadError
from odfproj.state.index import StateIndex
from odfproj.state.projections import renamed
from odfproj.state.read import state_parts
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import ChainProjection
from odfproj.storage.slices import SliceFile, data_as_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ChangelogView",
    "advance_state_index",
    "changelog_as_of",
    "changelog_between",
    "only_appends",
    "read_changelog_frame",
    "read_current_state",
    "read_history",
    "state_from_history",
]


@dataclass(frozen=True)
class ChangelogView:
    """A dataset's records as of one block: the files to read, their schema, the watermark then."""

    dataset: Dataset
    #: The last block considered (``None``: nothing of the dataset is considered).
    block_hash: Multihash | None
    #: The last record offset considered (``None``: no record).
    offset: int | None
    #: The data schema in effect at ``block_hash`` (``None`` before any SetDataSchema).
    schema: pa.Schema | None
    #: The files holding the records: the chain's own data slices, or for a view of many of them, the
    #: parts of the compacted copy (``state.compacted``) that hold them (and maybe other records).
    files: tuple[SliceFile | Path, ...]
    watermark: datetime | None
    #: Only records after this offset (``None``: from the first record): a slice of new records.
    after: int | None = None

    @property
    def data_paths(self) -> tuple[Path, ...]:
        """The files on this machine, for readers in this process (a remote workspace's cache fetches
        the slices it lacks)."""
        return tuple(f.path if isinstance(f, SliceFile) else f for f in self.files)

    def spark_paths(self, session: SparkSession) -> tuple[str, ...]:
        """The files as Spark opens them: in the store itself when the session reads it in place
        (``engine.s3a.reads_in_place``), so a remote workspace's slices never pass through this process.

        Where the executors may not see this machine's disk (``engine.exchange``), every file is opened in
        the store: a slice at its place there, one this run wrote and has not committed yet (and a
        compacted copy's part) through the exchange.
        """
        exchange = exchange_of(session)
        if not exchange.is_local:
            return tuple(
                (f.stored_uri() if isinstance(f, SliceFile) else None)
                or exchange.reads_at(f.path if isinstance(f, SliceFile) else f)
                for f in self.files
            )
        in_place = reads_in_place(session)
        return tuple(f.uri(in_place=in_place) if isinstance(f, SliceFile) else str(f) for f in self.files)


def changelog_as_of(dataset: Dataset, block_hash: Multihash | None, offset: int | None) -> ChangelogView:
    """The data of ``dataset`` at or before ``block_hash`` with offsets up to ``offset``.

    Reading every input's history on every run is the price of batch-independent results for queries
    that are not stateless (see docs/design/transforms.md).
    """
    return changelog_between(dataset, block_hash, None, offset)


def changelog_between(
    dataset: Dataset, block_hash: Multihash | None, after: int | None, offset: int | None
) -> ChangelogView:
    """The records of ``dataset`` with offsets in ``(after, offset]`` (``after`` None: from the first),
    at or before ``block_hash``, under the data schema in effect there.

    What a stateless update reads of an input: only the files holding such records are listed, so
    the input's history up to ``after`` is never opened.
    """
    if block_hash is None:
        return ChangelogView(dataset, None, None, None, (), None)
    data = data_as_of(dataset, block_hash)
    if data is None:
        raise DataReadError(f"dataset {dataset.name}: block {block_hash} is not in its metadata chain")
    schema = decode_arrow_schema(data.schema) if data.schema is not None else None
    paths = _compacted_paths(dataset, len(data.positions(after, offset)), after, offset)
    files: tuple[SliceFile | Path, ...] = paths if paths is not None else tuple(data.between(after, offset))
    return ChangelogView(dataset, block_hash, offset, schema, files, data.watermark, after)


def _compacted_paths(
    dataset: Dataset, files: int, after: int | None, offset: int | None
) -> tuple[Path, ...] | None:
    """The compacted copy's parts holding the records in ``(after, offset]``, when the chain has more
    than :data:`COMPACT_ABOVE` files of them and the copy can be brought to the head; else ``None``.

    The parts may hold records outside the interval (a part is read whole): every reader of a view
    filters by offset (:func:`read_changelog_frame`), under the view's schema, so it reads the same
    records either way.
    """
    if files <= COMPACT_ABOVE or offset is None:
        return None
    copy = compacted_copy(dataset)
    if copy is None or copy.last_offset is None or copy.last_offset < offset:
        return None
    return copy.paths(after, offset)


def only_appends(view: ChangelogView) -> bool:
    """Whether every record in the view's files is an append (``+A``), judged from the files' footers.

    The ``op`` column's statistics say it without reading a record: a maximum of ``+A`` (0) in every
    row group means that nothing in the file withdraws a row (``-R``, ``-C``), so neither do the
    view's records. Any doubt (no statistics, an unreadable footer) says no. Each file's answer is
    kept (:func:`_file_only_appends`): a full update asks it of every file of its inputs' history.
    """
    op = Vocab.of(view.dataset.projection().set_vocab).op
    return all(_file_only_appends(path, op) for path in _local_files(view))


#: :func:`_file_only_appends`'s answers by file, ``op`` column name, size and modification time. A data
#: file is named by its content's hash and never rewritten; the size and time only guard against a file
#: replaced by hand. At most ``_APPENDS_KEPT`` entries, forgotten all at once when full.
_APPENDS: dict[tuple[str, str, int, int], bool] = {}
_APPENDS_KEPT = 65536


def _local_files(view: ChangelogView) -> Iterator[Path | None]:
    """The view's files where this machine holds them, ``None`` for one only the store holds: the
    footers' answer is a shortcut, not worth fetching a whole file for."""
    for f in view.files:
        yield f.held if isinstance(f, SliceFile) else f


def _file_only_appends(path: Path | None, op: str) -> bool:
    if path is None:
        return False
    try:
        stat = path.stat()
    except OSError:
        return False
    key = (str(path), op, stat.st_size, stat.st_mtime_ns)
    known = _APPENDS.get(key)
    if known is not None:
        return known
    try:
        metadata = pq.read_metadata(path)
    except (OSError, pa.ArrowException):
        return False
    answer = True
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        if group.num_rows == 0:
            continue
        chunks = [group.column(i) for i in range(group.num_columns)]
        stats = next((c.statistics for c in chunks if c.path_in_schema == op), None)
        if stats is None or not stats.has_min_max or stats.max != int(Op.APPEND):
            answer = False
            break
    if len(_APPENDS) >= _APPENDS_KEPT:
        _APPENDS.clear()
    _APPENDS[key] = answer
    return answer


def read_changelog_frame(
    session: SparkSession, view: ChangelogView, schema: pa.Schema | None = None
) -> DataFrame:
    """The view's records as a DataFrame with ``schema`` (default: the view's), offsets up to the view's."""
    from odfproj.engine.types import spark_schema_from_arrow

    schema = schema if schema is not None else view.schema
    if schema is None:
        raise DataReadError(f"dataset {view.dataset.name} has no data schema yet")
    spark_schema = spark_schema_from_arrow(schema)
    if not view.files or view.offset is None:
        return session.createDataFrame([], spark_schema)
    df = session.read.schema(spark_schema).parquet(*view.spark_paths(session))
    offset = column(Vocab.of(view.dataset.projection().set_vocab).offset)
    df = df.where(offset <= literal(view.offset))
    return df if view.after is None else df.where(offset > literal(view.after))


def read_history(
    session: SparkSession, dataset: Dataset, projection: ChainProjection, vocab: Vocab
) -> DataFrame | None:
    """Every record of ``dataset`` (standard system column names), or ``None`` before any data."""
    if not projection.has_data or projection.last_offset is None:
        return None
    view = changelog_as_of(dataset, projection.head, projection.last_offset)
    if not view.files:
        return None
    history = session.read.option("mergeSchema", "true").parquet(*view.spark_paths(session))
    history = history.where(column(vocab.offset) <= literal(projection.last_offset))  # a copy may hold more
    return renamed(history, vocab.to_standard())


def state_from_history(session: SparkSession, dataset: Dataset) -> bool:
    """Whether a merge's previous state is for Spark to compute from the history where the store holds
    it (``projections.current_state``) rather than to read through the state index in this process.

    Yes when the dataset's data lives in a store this machine does not open as files (S3) and the
    session opens it in place (the S3A connector) or its executors cannot see this disk: the index's
    route would fetch the data files holding a current row and the index itself (about the size of
    the table on a fresh runner) and hold its key store in the driver, while the executors read the
    history at its place and nothing of it passes through this process. The state index is then not
    maintained by the commit either: a reader that wants it (``query``) catches it up from the blocks
    since the head it reflects, as it does after any writer that did not.
    """
    origin = dataset.objects.origin
    if origin is None or origin.store.local_path("data") is not None:  # local, or a shared mount
        return False
    return reads_in_place(session) or not exchange_of(session).is_local


def read_current_state(
    session: SparkSession, dataset: Dataset, key: Sequence[str], vocab: Vocab, work_dir: Path
) -> tuple[StateIndex, DataFrame]:
    """The latest valid row per key, read through the state index (Opal) rather than from all history.

    The index picks the valid rows of each data file by bitmap, so the cost follows the size of the
    state, not of the history; files without a valid row are not opened. The rows reach Spark as one
    Parquet file in ``work_dir`` (which must outlive the DataFrame), written one data file's rows at a
    time: the Python process never holds the whole state.
    Returns the index too (at the current head), so the commit can advance it by its own blocks only.
    Columns: ``event_time`` (standard name) and the user columns, like ``projections.current_state``.
    """
    from odfproj.engine.types import spark_schema_from_arrow

    index = open_state_index(dataset, key)
    schema, parts = state_parts(dataset, index=index)
    names = [EVENT_TIME if c == vocab.event_time else c for c in schema.names[1:]]
    out_schema = pa.schema([f.with_name(n) for f, n in zip(list(schema)[1:], names, strict=True)])
    path = work_dir / f"state-{uuid.uuid4().hex}.parquet"
    rows = 0
    with pq.ParquetWriter(path, out_schema) as writer:  # one data file's valid rows in memory at a time
        for part in parts:
            writer.write_table(part.drop_columns([vocab.offset]).rename_columns(names))
            rows += part.num_rows
    spark_schema = spark_schema_from_arrow(out_schema)
    if not rows:
        return index, session.createDataFrame([], spark_schema)
    return index, session.read.schema(spark_schema).parquet(exchange_of(session).reads_at(path))


def advance_state_index(dataset: Dataset, key: Sequence[str], index: StateIndex | None) -> None:
    """Bring the stored state index to the head just committed, reading only the new blocks' files.

    Best effort by design: the commit is already durable, and an index that lags the chain is
    detected by its head stamp and caught up by the next reader (it is never trusted blindly), so a
    failure here costs time later, never correctness.
    """
    with suppress(OdfprojError, OSError):
        open_state_index(dataset, key, known=index)
