"""The ingest coordinator of a root dataset: fetch -> prepare -> read -> preprocess -> merge -> commit.

:func:`ingest_polling` runs a dataset's ``SetPollingSource``; :func:`commit_batch` is the part it
shares with push ingestion (:mod:`odfproj.ingest.push`): event time, merge with the history, offsets,
one Parquet file with the common data schema, and one atomic ``dataset.append``.

Decisions, and why:

- **One AddData per fetched item.** A FilesGlob of three dated snapshots gives three blocks, each
  carrying the source state of its file, so an interrupted run resumes after the last committed file
  and a Snapshot root sees one snapshot per file.
- **No engine when up to date.** The fetch runs first and Spark is asked for a session only when
  there is an item to read: a run with nothing new starts no JVM and commits nothing.
- **Event time.** From the data's event-time column (``SetVocab.eventTimeColumn``, default
  ``event_time``) when the data has it, else the fetched item's event time (``eventTime`` of the
  fetch step), else the system time of the ingest. A ``DATE`` stays a ``DATE`` (as in the reference
  implementation; the watermark is then its midnight UTC); anything else becomes
  ``timestamp(ms, UTC)``: text is parsed as an ISO timestamp, sub-millisecond digits are truncated.
  When the event time comes from the data, a Snapshot merge compares it like any other column (it
  is row data then, not the snapshot's time).
- **Vocabulary.** The files hold the system columns under the ``SetVocab`` names; merge keys name
  columns as the files do. Internally everything runs on the standard names (``Vocab`` maps both
  ways), so ``primaryKey: [id, reported]`` with ``eventTimeColumn: reported`` is a key on the event
  time.
- **The commit** is :func:`odfproj.storage.data_commit.commit_data`, shared with transforms.
- **Offsets** are assigned in the merge output's order (the merge's ordering contract) by
  :func:`odfproj.engine.slices.number_rows`: per-partition counts and a prefix sum, no record
  reaches the driver. ``last_offset + 1`` onwards, dense. Records kept in a CSV scan's order are
  numbered from the counts the read phase took on its pass over the file
  (:func:`odfproj.engine.slices.number_counted`: no count job) when no aggregate needs their values;
  should Spark's read not match them, nothing is written and the batch is committed again, counted.
  ``system_time`` of every record is the system time of the block that commits it (millisecond
  precision).
- **Columns** are written as ``offset, op, system_time, event_time``, then the user columns, with the
  common data schema's exact types (``int64``, ``int32``, ``timestamp(ms, UTC)``); a ``SetVocab``
  renames the system columns in the file as it says. Against an existing schema the user columns are
  put in the schema's order; a column the new data lacks is written as nulls; new columns are added
  at the end with a ``SetDataSchema`` before the ``AddData``. A type change is an error. The schema is
  decided on schemas alone (``_fit_schema``) and applied by casts in Spark; Spark tasks write the files.
- **Data files** hold at most ``SparkEngine.rows_per_file`` records (``spark.sql.files.maxRecordsPerFile``);
  a bigger batch is committed as several ``AddData`` blocks in one atomic append, each carrying the
  batch's source state and watermark (``storage.data_commit.commit_data``'s ``slices``).
- **Empty merges.** When the merge yields no records (an unchanged snapshot, a ledger of known rows)
  the ``AddData`` has no ``newData`` and records only the new source state (the spec makes ``newData``
  optional and says the source state must be carried). If neither the source state nor the watermark
  would change, nothing is committed.
- **Watermark** = max(previous watermark, max event time of the new records, computed per partition
  in the counting job); it never goes back.
- **History** (for Ledger and Snapshot only) is every data file of the dataset read with Spark.
- **Errors** from any phase become one line starting with ``dataset 'x', source 'y'`` and naming the
  URL or file; the failing item commits nothing (items committed before it stay committed).
- **Temporary files** (downloads, prepared files, the Parquet file before it is copied in) are
  deleted whether the item succeeds or fails; the folder of a killed ingest is removed by the next
  one (:mod:`odfproj.ingest.scratch`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from odfproj.engine.columns import cast, column
from odfproj.engine.driver_slices import collect_small, driver_codec, driver_writable, write_driver_slice
from odfproj.engine.exchange import driver_spelling
from odfproj.engine.slices import (
    Numbered,
    OffsetsMismatch,
    WrittenSlice,
    nullable,
    number_counted,
    number_rows,
    write_slices,
)
from odfproj.engine.spark import SMALL_WORK_RECORDS, SparkEngine, describe_spark_error, is_spark_error
from odfproj.engine.types import arrow_schema_from_spark, spark_type_from_arrow
from odfproj.errors import EngineError, OdfprojError
from odfproj.ingest.cdc import RECORD_FILE, RecordOrigin
from odfproj.ingest.errors import IngestError, UnsupportedSourceError, source_label
from odfproj.ingest.fetch import POLLING_SOURCE_NAME, FetchedItem, fetch, glob_history
from odfproj.ingest.key_order import number_in_key_order
from odfproj.ingest.ledger_keys import keys_may_repeat
from odfproj.ingest.merge import (
    check_unique_keys,
    first_snapshot_records,
    ledger_in_batch_order,
    sorted_keys_repeat,
)
from odfproj.ingest.prepare import prepare
from odfproj.ingest.read import ReadError, describe_bad_rows, file_of_uri, scan_ahead, scan_files
from odfproj.ingest.record_lines import record_line
from odfproj.ingest.scratch import scratch_folder
from odfproj.ingest.strategies import merge
from odfproj.odf import model
from odfproj.odf.data_schema import (
    EVENT_TIME,
    OFFSET,
    OP,
    SYSTEM_TIME,
    TIMESTAMP_TYPE,
    Op,
    Vocab,
    event_time_column,
    watermark_of,
)
from odfproj.odf.schema_diff import DropColumn, RetypeColumn, diff_columns, nullable_throughout
from odfproj.odf.timestamps import to_utc
from odfproj.state.frames import advance_state_index, read_current_state, read_history, state_from_history
from odfproj.storage.data_commit import SliceFile, commit_data, next_offset
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import ChainProjection

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "POLLING_SOURCE_NAME",
    "SMALL_INGEST_BYTES",
    "CommittedItem",
    "IngestResult",
    "Vocab",
    "block_system_time",
    "commit_batch",
    "errors_named",
    "ingest_polling",
    "materialize_read",
    "preprocess_batch",
    "record_origin",
    "small_ingest",
]

#: How many fetch rounds a source reporting "more data" may take in one ingest.
MAX_FETCH_ROUNDS = 1000

_ONE_MS = timedelta(milliseconds=1)
_LOG = logging.getLogger(__name__)

#: Spark error classes that mean "the input file does not parse" (raised late by a lazy read).
_PARSE_FAILURES = ("MALFORMED_RECORD", "FAILFAST", "MALFORMED_CSV_RECORD", "CANNOT_PARSE")


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedItem:
    """What one committed item added."""

    display_name: str
    records: int
    #: Multibase head of the dataset after the commit.
    head: str
    #: Whether a SetDataSchema was committed before the AddData.
    schema_changed: bool = False
    #: AddData blocks committed: one per data slice (a batch over the records-per-file limit has several).
    data_blocks: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestResult:
    """The outcome of one ingest of one dataset."""

    dataset: str
    source: str
    items: tuple[CommittedItem, ...] = ()
    #: Not errors, but worth telling (also logged): files a FilesGlob will never ingest.
    warnings: tuple[str, ...] = ()

    @property
    def records_added(self) -> int:
        return sum(i.records for i in self.items)

    @property
    def blocks_added(self) -> int:
        return sum(i.data_blocks + (1 if i.schema_changed else 0) for i in self.items)

    @property
    def up_to_date(self) -> bool:
        return not self.items


# --- polling ingest ------------------------------------------------------------------------------


def ingest_polling(
    dataset: Dataset,
    engine: SparkEngine,
    *,
    project_root: Path,
    system_time: datetime | None = None,
    environ: Mapping[str, str] | None = None,
    work_dir: Path | None = None,
    on_item: Callable[[CommittedItem], None] | None = None,
    ingested: Collection[str] | None = None,
) -> IngestResult:
    """Ingest what is new at ``dataset``'s polling source; one commit per fetched item.

    ``system_time`` (default: now) stamps the blocks and records; ``project_root`` anchors relative
    paths of the fetch step; ``environ`` (default ``os.environ``) feeds ``${{ env.X }}`` templates.
    ``engine`` is used (and its session started) only when there is something to read.
    ``ingested``: the files the chain records as ingested (:func:`glob_history`), when the caller has
    already walked the chain at its current head (``run`` passes the plan's); otherwise walked here.
    """
    projection = dataset.projection()
    source = projection.set_polling_source
    label = source_label(dataset.name, POLLING_SOURCE_NAME)
    if source is None:
        raise IngestError(f"{label}: the dataset has no polling source (SetPollingSource)")
    environ = dict(os.environ) if environ is None else environ
    committed: list[CommittedItem] = []
    warnings: list[str] = []
    if ingested is None and isinstance(source.fetch, model.FetchStepFilesGlob):
        ingested = glob_history(dataset)
    with _work_dir(work_dir) as work:
        for _ in range(MAX_FETCH_ROUNDS):
            projection = dataset.projection()
            stamp = block_system_time(projection, system_time)
            result = fetch(
                source.fetch,
                dataset=dataset.name,
                source=POLLING_SOURCE_NAME,
                prev_state=projection.source_states.get(POLLING_SOURCE_NAME),
                project_root=project_root,
                work_dir=work,
                system_time=stamp,
                environ=environ,
                ingested=ingested,
            )
            for warning in result.warnings:
                _LOG.warning("%s", warning)
            warnings += result.warnings
            try:
                for item in result.items:
                    done = _ingest_item(dataset, engine, source, item, system_time, environ, work, label)
                    if done is not None:
                        committed.append(done)
                        if on_item is not None:
                            on_item(done)
                    _unlink_temporary(item)
            finally:
                for item in result.items:
                    _unlink_temporary(item)
            if not result.has_more:
                break
    return IngestResult(
        dataset=dataset.name, source=POLLING_SOURCE_NAME, items=tuple(committed), warnings=tuple(warnings)
    )


def _ingest_item(
    dataset: Dataset,
    engine: SparkEngine,
    source: model.SetPollingSource,
    item: FetchedItem,
    system_time: datetime | None,
    environ: Mapping[str, str],
    work: Path,
    label: str,
) -> CommittedItem | None:
    prepared = prepare(
        source.prepare,
        item.path,
        dataset=dataset.name,
        source=POLLING_SOURCE_NAME,
        display_name=item.display_name,
        work_dir=work,
        environ=environ,
    )
    try:
        where = f"{label}: {item.display_name}"
        paths = {
            str(p): item.display_name
            for p in (prepared.path.absolute(), prepared.path, item.path.absolute(), item.path)
        }
        with engine.small_work(small_ingest(dataset, [prepared.path])):
            with errors_named(where, paths):
                first_snapshot_scan = source.preprocess is None and not dataset.projection().has_data
                # A CSV file's pass on the driver runs while the session starts (if it is not up yet).
                ahead = scan_ahead(source.read, prepared.path, engine.split_bytes_before_start)
                try:
                    scan = scan_files(
                        engine.session,
                        source.read,
                        [prepared.path],
                        materialize=materialize_read(source.merge, first_snapshot_scan=first_snapshot_scan),
                        lines_ahead=ahead,
                    )
                finally:
                    if ahead is not None:
                        ahead.cancel()
                batch = preprocess_batch(engine, scan.frame, source.preprocess, where)
            with errors_named(where, paths), bad_rows_described(engine, source.read, prepared.path, where):
                return commit_batch(
                    dataset,
                    engine,
                    batch,
                    merge_strategy=source.merge,
                    display_name=item.display_name,
                    source=POLLING_SOURCE_NAME,
                    event_time=item.event_time,
                    source_state=item.source_state,
                    system_time=system_time,
                    work_dir=work,
                    paths=paths,
                    scanned=source.preprocess is None,
                    partition_records=scan.partition_records if source.preprocess is None else None,
                    origin=record_origin(source, [prepared.path], [item.display_name]),
                )
    finally:
        if prepared.temporary:
            prepared.path.unlink(missing_ok=True)


#: Files of at most this many bytes in all hold few records (about 50,000 CSV rows of 80 bytes): with a
#: dataset of few records (:data:`~odfproj.engine.spark.SMALL_WORK_RECORDS`; a Ledger or Snapshot merge
#: reads its history or state), their ingest is small work for the engine (no code generated).
SMALL_INGEST_BYTES = 4 * 1024 * 1024


def small_ingest(dataset: Dataset, files: Sequence[Path]) -> bool:
    """Whether ingesting ``files`` into ``dataset`` is small work (:data:`SMALL_INGEST_BYTES`)."""
    last = dataset.projection().last_offset
    held = 0 if last is None else last + 1
    return held <= SMALL_WORK_RECORDS and sum(_bytes(Path(f)) for f in files) <= SMALL_INGEST_BYTES


def _bytes(path: Path) -> int:
    """A file's size, or a folder's files' (a Parquet dataset can be a folder)."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0


@contextmanager
def bad_rows_described(engine: SparkEngine, read: model.ReadStep, path: Path, where: str) -> Iterator[None]:
    """A lazily read file that fails to parse while merging is reported by its first bad rows' lines."""
    try:
        yield
    except ReadError:
        bad = describe_bad_rows(engine.session, read, [str(path.absolute())])
        if bad is None:
            raise
        raise ReadError(f"{where}: {bad}") from None


def materialize_read(strategy: model.MergeStrategy, *, first_snapshot_scan: bool = False) -> bool:
    """Whether to materialise the read: yes for Snapshot and the CDC merges, not for Append and Ledger,
    nor for ``first_snapshot_scan`` (a Snapshot's first data, read with no preprocess).

    A lazily read batch is parsed when used, and a checkpoint costs more than a parse (measured: about a
    quarter of the time of an Append ingest was the extra pass): Append numbers the scan itself, and a
    Ledger of one event time reads only its key columns before that (``ledger_in_batch_order``); a first
    snapshot is numbered in key order from the scan (``ingest.key_order``: only its keys are pinned,
    and the scan is read again to be written). Read errors then surface in the commit, still naming the
    dataset, source and file.
    """
    if first_snapshot_scan and isinstance(strategy, model.MergeStrategySnapshot):
        return False
    return not isinstance(strategy, model.MergeStrategyAppend | model.MergeStrategyLedger)


def record_origin(
    source: model.SetPollingSource | model.AddPushSource, files: Sequence[Path], names: Sequence[str]
) -> RecordOrigin | None:
    """Where the records of a batch read from ``files`` (shown as ``names``) come from, for a CDC merge's
    refusal to name a record by its file and line (:class:`~odfproj.ingest.cdc.RecordOrigin`).

    ``None`` where the batch's records are not the files' (a preprocess query made them) or the merge
    refuses no record. Read several files with ``file_column=``:func:`origin_column` so the merge can
    tell each record's file. The lines are found only when a refusal asks.
    """
    if source.preprocess is not None or not isinstance(source.merge, _CDC_STRATEGIES):
        return None
    read = source.read
    local = [os.path.normpath(Path(f).absolute()) for f in files]
    shown = dict(zip(local, names, strict=True))

    def locate(file: str | None, number: int) -> str:
        path = local[0] if file is None else file_of_uri(file)
        if path not in shown:
            return f"record {number} of {file}"
        line = record_line(read, path, number) if Path(path).is_file() else None
        return f"{shown[path]} line {line}" if line is not None else f"{shown[path]} record {number}"

    return RecordOrigin(locate, RECORD_FILE if len(local) > 1 else None)


def origin_column(source: model.SetPollingSource | model.AddPushSource, files: Sequence[Path]) -> str | None:
    """The column a read of ``files`` for ``source`` gives each record's file in (:func:`record_origin`)."""
    origin = record_origin(source, files, [str(f) for f in files])
    return origin.file_column if origin is not None else None


def preprocess_batch(
    engine: SparkEngine, batch: DataFrame, preprocess: model.Transform | None, where: str
) -> DataFrame:
    if preprocess is None:
        return batch
    if not isinstance(preprocess, model.TransformSql):
        raise UnsupportedSourceError(
            f"{where}: preprocess kind {type(preprocess).__name__} is not supported (use Sql)"
        )
    return engine.preprocess(batch, preprocess)


# --- the shared commit ---------------------------------------------------------------------------


def commit_batch(
    dataset: Dataset,
    engine: SparkEngine,
    batch: DataFrame,
    *,
    merge_strategy: model.MergeStrategy,
    display_name: str,
    source: str,
    event_time: datetime | None,
    source_state: model.SourceState | None,
    system_time: datetime | None,
    work_dir: Path,
    paths: Mapping[str, str] | None = None,
    scanned: bool = False,
    partition_records: Sequence[int] | None = None,
    origin: RecordOrigin | None = None,
    exact_ledger: bool = False,
) -> CommittedItem | None:
    """Merge ``batch`` (read and preprocessed) into ``dataset`` and commit it; ``None`` if nothing changed.

    ``event_time`` is the fallback event time when the data has no event-time column (``None``: the
    system time). Every error names the dataset, ``source`` and ``display_name``; ``paths`` maps
    local (temporary) file paths to the names to show instead, for errors of a lazily read batch.
    ``scanned``: ``batch`` is the read phase's file scan itself (no preprocess), so every computation
    of it gives the same rows in the same order and records kept in its order need no checkpoint.
    ``partition_records``: that scan's records in each partition, as the read phase counted them
    (:class:`odfproj.ingest.read.Scan`): records kept in the scan's order are numbered from them, with
    no count job, when no aggregate needs the data (the event time is not a column and no NOT NULL
    column needs checking). Should Spark's scan not match, the batch is committed again, counted.
    ``origin``: where the batch's records come from (:func:`record_origin`), for a CDC merge's refusal.
    ``exact_ledger``: find the rows a Ledger drops before writing, not by checking the written keys (the
    redo when that check found a key twice).
    """
    from pyspark.sql import functions as F

    where = f"{source_label(dataset.name, source)}: {display_name}"
    given = batch
    projection = dataset.projection()
    stamp = block_system_time(projection, system_time)
    vocab = Vocab.of(projection.set_vocab)
    scratch = Path(tempfile.mkdtemp(prefix="merge-", dir=work_dir))  # the state file of a Snapshot merge
    with errors_named(where, paths or {}), _removed(scratch):
        clash = vocab.clash(batch.columns)
        if clash is not None:
            raise IngestError(
                f"the new data has a column {clash!r}, which the dataset's SetVocab gives to a system "
                "column under another name; rename it in the preprocess step"
            )
        batch, from_data = with_event_time(batch, vocab, event_time or stamp)
        history = state = index = None
        key = primary_key(merge_strategy)  # as the files name it: the state index reads the files
        if isinstance(merge_strategy, _CDC_STRATEGIES) and vocab.op != OP and vocab.op in batch.columns:
            batch = batch.withColumnRenamed(vocab.op, OP)  # the rows' own operation types
        in_store = state_from_history(engine.session, dataset)
        if isinstance(merge_strategy, _STATEFUL_STRATEGIES) and projection.has_data and not in_store:
            index, state = read_current_state(engine.session, dataset, key, vocab, scratch)
        elif key:
            history = read_history(engine.session, dataset, projection, vocab)
        columns = batch.columns
        plain = len(set(columns)) == len(columns) and not {OFFSET, OP, SYSTEM_TIME} & set(columns)
        in_batch_order = isinstance(merge_strategy, model.MergeStrategyAppend) and not from_data and plain
        # A first snapshot's records are the batch sorted by key: its keys are checked in the files.
        first_snapshot = (
            isinstance(merge_strategy, model.MergeStrategySnapshot) and state is None and history is None
        )
        unchecked_ledger = False  # a Ledger batch written whole, its keys to be checked in the files
        if scanned and isinstance(merge_strategy, model.MergeStrategyLedger) and not from_data and plain:
            # One event time: the Ledger's order is the scan's, so drop rows instead of sorting them.
            strategy = in_standard_names(merge_strategy, vocab)
            assert isinstance(strategy, model.MergeStrategyLedger)
            if history is None and not exact_ledger:  # nothing seen before: usually nothing to drop
                in_batch_order = unchecked_ledger = True
            else:
                kept = ledger_in_batch_order(batch, history, strategy.primary_key)
                if kept is not None:
                    batch, in_batch_order = kept, True
        if in_batch_order:
            # Every row has the same event time, so Append's stable sort by event time keeps the
            # batch's own order: skip the single-partition sort (same rows, same offsets).
            records = batch.select(
                F.lit(int(Op.APPEND)).cast("int").alias(OP), *(column(c) for c in batch.columns)
            )
        else:
            records = merge(
                in_standard_names(merge_strategy, vocab),
                batch,
                history,
                compare_event_time=from_data,
                state=state,
                check_unique=not first_snapshot,
                origin=origin,
            )
        final, new_schema = _fit_schema(_new_data_schema(records, vocab), projection.arrow_schema, where)
        first = next_offset(projection)
        # Small work: the records come to the driver once and are written there (one Spark job, not three).
        codec = driver_codec(records) if engine.is_small_work else None  # None: only Spark writes it
        collected = _collected(records, final, vocab, stamp, engine) if codec is not None else None
        numbered: Numbered | None = None
        if collected is not None:
            count, per_partition = collected.num_rows, (_driver_aggregates(collected),)
        else:
            if first_snapshot and scanned:  # the pinned read, sorted without pinning its rows sorted
                numbered = number_in_key_order(
                    first_snapshot_records(batch),
                    primary_key(in_standard_names(merge_strategy, vocab)),
                    OFFSET,
                    first,
                    engine.rows_per_file,
                    _batch_aggregates(records, final, vocab),
                    carried=[EVENT_TIME, *_checked_not_null(records, final, vocab)],
                )
            # The scan's own rows in its order: an Append's, or a Ledger's written whole (none dropped).
            as_scanned = in_batch_order and (
                unchecked_ledger or isinstance(merge_strategy, model.MergeStrategyAppend)
            )
            if numbered is None and partition_records and as_scanned and not from_data:
                numbered = _numbered_as_read(records, final, vocab, first, partition_records)
            if numbered is None:
                numbered = number_rows(
                    records,
                    OFFSET,
                    first,
                    _batch_aggregates(records, final, vocab),
                    deterministic=scanned and in_batch_order,
                )
            count, per_partition = numbered.count, numbered.per_partition
        _check_not_null(per_partition, final, where)
        watermark = _new_watermark(projection.watermark, per_partition, records)
        prev_state = projection.source_states.get(source)
        if count == 0 and source_state in (None, prev_state) and watermark == projection.watermark:
            return None
        if numbered is None:
            assert collected is not None and codec is not None
            written = _write_collected(collected, final, vocab, first, work_dir, codec)
        else:
            out = _laid_out(numbered, final, vocab, stamp)
            try:
                written = write_slices(
                    numbered, out, work_dir, engine.rows_per_file, offset_column=vocab.offset
                )
            except OffsetsMismatch as e:
                if not numbered.predicted:
                    raise
                _LOG.warning(
                    "%s: Spark's read did not match the records counted before it (%s); recounting", where, e
                )
                written = None
    if written is None or (unchecked_ledger and _ledger_keys_repeat(written, key, work_dir)):
        return commit_batch(
            dataset,
            engine,
            given,
            merge_strategy=merge_strategy,
            display_name=display_name,
            source=source,
            event_time=event_time,
            source_state=source_state,
            system_time=system_time,
            work_dir=work_dir,
            paths=paths,
            scanned=scanned,
            origin=origin,
            exact_ledger=exact_ledger or written is not None,
        )
    try:
        if first_snapshot and written:
            with errors_named(where, paths or {}):
                _check_keys_written_once(batch, written, key, in_standard_names(merge_strategy, vocab))
        add_data = model.AddData(
            new_checkpoint=projection.last_checkpoint,
            new_watermark=watermark,
            new_source_state=source_state if source_state is not None else prev_state,
        )
        head = commit_data(
            dataset,
            projection,
            add_data,
            system_time=stamp,
            schema=new_schema,
            slices=[SliceFile(w.path, w.count) for w in written],
        )
    finally:
        _remove_written(written)
    if key and not in_store:
        advance_state_index(dataset, key, index)
    return CommittedItem(
        display_name=display_name,
        records=count,
        head=head.to_multibase(),
        schema_changed=new_schema is not None,
        data_blocks=max(1, len(written)),
    )


def _ledger_keys_repeat(written: Sequence[WrittenSlice], key: Sequence[str], work_dir: Path) -> bool:
    """Whether a Ledger batch written whole may hold a key twice (:mod:`odfproj.ingest.ledger_keys`);
    if so its files are removed, for the redo that finds the rows to drop first."""
    if not written:
        return False
    try:
        repeats = keys_may_repeat([w.path for w in written], key, work_dir)
    except BaseException:
        _remove_written(written)
        raise
    if repeats:
        _remove_written(written)
    return repeats


def _remove_written(written: Sequence[WrittenSlice]) -> None:
    """Remove the files Spark wrote for a batch (each in its own folder) once they are committed or dropped."""
    for w in written:
        shutil.rmtree(w.path.parent, ignore_errors=True)


def _check_keys_written_once(
    batch: DataFrame, written: Sequence[WrittenSlice], key: Sequence[str], strategy: model.MergeStrategy
) -> None:
    """A first snapshot's keys, checked in its files (sorted by key); Spark names the repeated ones."""
    if sorted_keys_repeat([w.path for w in written], key) is False:
        return
    check_unique_keys(batch, primary_key(strategy))  # raises, naming the first repeated keys
    raise IngestError("the snapshot holds a primary key more than once")  # pyarrow saw what Spark did not


def block_system_time(projection: ChainProjection, requested: datetime | None) -> datetime:
    """The system time of the next block: ``requested`` or now, in whole milliseconds, never before the head's."""
    if requested is not None:
        return _whole_milliseconds(to_utc(requested))
    truncated = _whole_milliseconds(max(datetime.now(UTC), to_utc(projection.system_time)))
    return truncated if truncated >= projection.system_time else truncated + _ONE_MS


def _whole_milliseconds(moment: datetime) -> datetime:
    """``moment`` truncated to whole milliseconds (towards the past), as ODF's timestamps hold it."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def fallback_event_time(fallback: datetime) -> datetime:
    """The event time of records that carry none: ``fallback`` in UTC, in whole milliseconds."""
    return _whole_milliseconds(fallback.astimezone(UTC))


def with_event_time(batch: DataFrame, vocab: Vocab, fallback: datetime) -> tuple[DataFrame, bool]:
    """``batch`` with an ``event_time`` column; whether it came from the data.

    A ``DATE`` column stays a date (as the reference implementation keeps it); a timestamp or
    ISO-8601 text becomes a timestamp truncated to milliseconds; without the column, the fallback.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    name = vocab.event_time
    if name in batch.columns:
        data_type = batch.schema[name].dataType
        if not isinstance(data_type, T.TimestampType | T.TimestampNTZType | T.DateType | T.StringType):
            raise IngestError(
                f"the event time column {name!r} has type {data_type.simpleString()}; "
                "it must be a timestamp, a date or ISO-8601 text"
            )
        from_data = True
        if isinstance(data_type, T.DateType):
            value = column(name).alias(EVENT_TIME)
        else:
            value = F.date_trunc("millisecond", column(name).cast("timestamp")).alias(EVENT_TIME)
    else:
        # With its zone: PySpark reads a naive datetime as the process's local time, not UTC.
        value = F.lit(fallback_event_time(fallback)).cast("timestamp").alias(EVENT_TIME)
        from_data = False
    if name in batch.columns:
        columns = [value if c == name else column(c) for c in batch.columns]
    else:
        columns = [value, *(column(c) for c in batch.columns)]
    return batch.select(*columns), from_data


def in_standard_names(strategy: model.MergeStrategy, vocab: Vocab) -> model.MergeStrategy:
    """``strategy`` with its key and compared columns under the standard names the merge works on.

    A manifest names columns as the files do, so a key may contain the vocabulary's event-time
    column (``primaryKey: [PID, REPORT_YEAR]`` with ``eventTimeColumn: REPORT_YEAR``).
    """
    if isinstance(strategy, model.MergeStrategyLedger | _CDC_STRATEGIES):
        return replace(strategy, primary_key=vocab.standard_names(strategy.primary_key))
    if isinstance(strategy, model.MergeStrategySnapshot):
        compared = strategy.compare_columns
        return replace(
            strategy,
            primary_key=vocab.standard_names(strategy.primary_key),
            compare_columns=vocab.standard_names(compared) if compared is not None else None,
        )
    return strategy


def primary_key(strategy: model.MergeStrategy) -> tuple[str, ...]:
    """The key of a Ledger, Snapshot, ChangelogStream or UpsertStream merge; empty for Append."""
    if isinstance(strategy, model.MergeStrategyLedger | model.MergeStrategySnapshot | _CDC_STRATEGIES):
        return tuple(strategy.primary_key)
    return ()


#: The merges whose rows carry their own operation type (ODF 0.37), read from the vocabulary's op column.
_CDC_STRATEGIES = model.MergeStrategyChangelogStream | model.MergeStrategyUpsertStream
#: The merges that compare the new data with the current state, which the state index serves.
_STATEFUL_STRATEGIES = model.MergeStrategySnapshot | _CDC_STRATEGIES


# --- the records' layout: decided on schemas, applied in Spark ---------------------------------------


def _new_data_schema(records: DataFrame, vocab: Vocab) -> pa.Schema:
    """``offset, op, system_time, event_time`` then the user columns, with the exact ODF types.

    System columns are NOT NULL (event time excepted); user columns are nullable whatever Spark infers,
    so a later batch with nulls fits the same schema.
    """
    user_types = arrow_schema_from_spark(records.schema)
    event_time = event_time_column(pa.array([], user_types.field(EVENT_TIME).type)).type
    fields = [
        pa.field(vocab.offset, pa.int64(), nullable=False),
        pa.field(vocab.op, pa.int32(), nullable=False),
        pa.field(vocab.system_time, TIMESTAMP_TYPE, nullable=False),
        pa.field(vocab.event_time, event_time),
    ]
    fields += [f.with_nullable(True) for f in user_types if f.name not in (OP, EVENT_TIME)]
    return pa.schema(fields)


def _fit_schema(new: pa.Schema, existing: pa.Schema | None, where: str) -> tuple[pa.Schema, pa.Schema | None]:
    """The schema to write new data with: the dataset's (plus new columns); the schema to commit if it is new.

    What the new data may change is :func:`odfproj.odf.schema_diff.diff_columns`'s rule; a column it
    lacks is written as nulls when the schema allows them (:func:`_laid_out`).
    """
    if existing is None:
        return new, new
    for op in diff_columns(existing, new).breaking:
        if isinstance(op, RetypeColumn):
            raise IngestError(
                f"{where}: column {op.name!r} is {op.new} in the new data but {op.old} in the dataset's "
                "schema; cast it in the read schema or the preprocess query"
            )
        if not isinstance(op, DropColumn):
            raise IngestError(
                f"{where}: the new data {op.describe()}; rename it in the read schema or preprocess"
            )
    names = new.names
    for f in existing:
        if f.name in names:
            column_type = new.field(f.name).type
            # They may differ in nested nullability only: casting into a type that allows nulls
            # everywhere cannot fail.
            if not column_type.equals(f.type) and not nullable_throughout(f.type).equals(f.type):
                raise IngestError(
                    f"{where}: column {f.name!r} is {column_type} in the new data but {f.type} in the "
                    "dataset's schema, which allows no nulls inside it"
                )
        elif not f.nullable:
            raise IngestError(f"{where}: the new data has no column {f.name!r}, which the dataset requires")
    added = [new.field(n) for n in names if existing.get_field_index(n) < 0]
    schema = pa.schema([*existing, *added])
    return schema, (schema if added else None)


#: Per-partition aggregates of a batch (see ``number_rows``): the latest event time, nulls per column.
#: The driver path collects them as columns beside the records' own, so no user column may take them.
_LATEST = "__odfproj_latest"
_NULLS = "__odfproj_nulls:"


def _numbered_as_read(
    records: DataFrame, final: pa.Schema, vocab: Vocab, first: int, partition_records: Sequence[int]
) -> Numbered | None:
    """``records`` (the scan's rows in its order) numbered from the read phase's counts, or ``None``.

    Only where the batch's aggregates need no data: the event time is one value for every record
    (the fallback's), taken from the first record, and no NOT NULL column is checked. That one-row job
    could be spared (the driver knows the fallback), but on a cold JVM it pays for itself: the 20M-row
    write took about 1.9 s longer as the JVM's first job than after it, the job itself about 1 s
    (bench/README.md, session 28).
    """
    if sum(partition_records) == 0 or _checked_not_null(records, final, vocab):
        return None  # counting finds out whether an empty read really is empty
    latest = records.select(_event_time_value(records).alias(_LATEST)).limit(1).collect()
    if not latest:
        return None
    return number_counted(records, OFFSET, first, partition_records, ({_LATEST: latest[0][_LATEST]},))


def _event_time_value(records: DataFrame) -> Column:
    """A record's event time as the watermark counts it: epoch days for a date, milliseconds otherwise."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    event_time = column(EVENT_TIME)
    if isinstance(records.schema[EVENT_TIME].dataType, T.DateType):
        return F.unix_date(event_time)
    return F.unix_millis(event_time.cast("timestamp"))


def _checked_not_null(records: DataFrame, final: pa.Schema, vocab: Vocab) -> list[str]:
    """The NOT NULL columns of ``final`` that the new records carry themselves (not system columns)."""
    system = {vocab.offset, vocab.op, vocab.system_time}
    return [f.name for f in final if not f.nullable and f.name not in system and f.name in records.columns]


def _batch_aggregates(records: DataFrame, final: pa.Schema, vocab: Vocab) -> dict[str, Column]:
    """The latest event time (epoch days for a date, milliseconds otherwise) and the nulls in NOT NULL columns."""
    from pyspark.sql import functions as F

    checks = {_LATEST: F.max(_event_time_value(records))}
    for name in _checked_not_null(records, final, vocab):
        checks[_NULLS + name] = F.sum(F.when(column(name).isNull(), 1).otherwise(0))
    return checks


def _check_not_null(per_partition: Sequence[Mapping[str, Any]], final: pa.Schema, where: str) -> None:
    for f in final:
        if any(row.get(_NULLS + f.name) for row in per_partition):
            raise IngestError(f"{where}: column {f.name!r} is NOT NULL but the new data has nulls in it")


def _new_watermark(
    previous: datetime | None, per_partition: Sequence[Mapping[str, Any]], records: DataFrame
) -> datetime | None:
    from pyspark.sql import types as T

    values = [row[_LATEST] for row in per_partition if row[_LATEST] is not None]
    if not values:
        return previous
    if isinstance(records.schema[EVENT_TIME].dataType, T.DateType):
        latest = watermark_of(date(1970, 1, 1) + timedelta(days=max(values)))
    else:
        latest = datetime.fromtimestamp(0, UTC) + timedelta(milliseconds=max(values))
    return latest if previous is None or latest > previous else previous


def _laid_out(numbered: Numbered, final: pa.Schema, vocab: Vocab, stamp: datetime) -> DataFrame:
    """The numbered records as the file stores them: ``final``'s columns, names and types, cast in Spark."""
    columns = _stored_values(numbered.frame, final, vocab, stamp, column(OFFSET))
    return numbered.frame.select(
        *[(nullable(value, numbered) if f.nullable else value).alias(f.name) for f, value in columns]
    )


def _stored_values(
    records: DataFrame, final: pa.Schema, vocab: Vocab, stamp: datetime, offset: Column | None
) -> list[tuple[pa.Field, Column]]:
    """Each column of ``final`` with its value, cast in Spark; the offset's only if ``offset`` is given."""
    from pyspark.sql import functions as F

    present = set(records.columns)
    sources = {
        vocab.op: column(OP),
        vocab.system_time: F.lit(stamp.astimezone(UTC)),
        vocab.event_time: column(EVENT_TIME),
    }
    columns = []
    for f in final:
        if f.name == vocab.offset:
            if offset is not None:
                columns.append((f, cast(offset, spark_type_from_arrow(f.type))))
            continue
        value = sources.get(f.name)
        if value is None:
            value = column(f.name) if f.name in present else F.lit(None)
        columns.append((f, cast(value, spark_type_from_arrow(f.type))))
    return columns


def _collected(
    records: DataFrame, final: pa.Schema, vocab: Vocab, stamp: datetime, engine: SparkEngine
) -> pa.Table | None:
    """The records as the file stores them (but the offset), in offset order, collected to the driver,
    with each one's event time as the watermark counts it (``_LATEST``): one Spark job.

    ``None`` when the Spark writer must do it: a column the driver does not write exactly as Spark
    (:func:`odfproj.engine.driver_slices.driver_writable`), more than ``SMALL_WORK_RECORDS`` records
    (found by the same job), or more than one file's worth of them.
    """
    if not driver_writable(final):
        return None
    limit = min(SMALL_WORK_RECORDS, engine.rows_per_file) if engine.rows_per_file > 0 else SMALL_WORK_RECORDS
    values = _stored_values(records, final, vocab, stamp, None)
    checked = _checked_not_null(records, final, vocab)
    return collect_small(
        records.select(
            *[value.alias(f.name) for f, value in values],
            _event_time_value(records).alias(_LATEST),
            *[column(name).isNull().alias(_NULLS + name) for name in checked],
        ),
        limit,
    )


def _driver_aggregates(collected: pa.Table) -> dict[str, Any]:
    """What :func:`_batch_aggregates` computes in Spark, from the collected records."""
    import pyarrow.compute as pc

    aggregates: dict[str, Any] = {_LATEST: pc.max(collected.column(_LATEST)).as_py()}
    for name in collected.column_names:
        if name.startswith(_NULLS):
            aggregates[name] = int(pc.sum(collected.column(name).cast(pa.int64())).as_py() or 0)
    return aggregates


def _write_collected(
    collected: pa.Table, final: pa.Schema, vocab: Vocab, first: int, work_dir: Path, codec: str
) -> list[WrittenSlice]:
    """The collected records as one data file numbered from ``first`` (none for no records)."""
    if collected.num_rows == 0:
        return []
    folder = Path(tempfile.mkdtemp(prefix="slices-", dir=work_dir))
    path = folder / "slice-000000.parquet"
    stored = collected.select([f.name for f in final if f.name != vocab.offset])
    count = write_driver_slice(stored, final, vocab.offset, first, path, codec)
    return [WrittenSlice(path, first, count)]


# --- helpers -------------------------------------------------------------------------------------


@contextmanager
def errors_named(where: str, paths: Mapping[str, str]) -> Iterator[None]:
    """Prefix errors with ``where`` (dataset, source, file); show temporary paths by their display name."""
    try:
        yield
    except OdfprojError as e:
        message = driver_spelling(str(e))  # a file handed to executors through the store, by its path
        for path, display in paths.items():
            if path != display:
                message = message.replace(path, display)
        if not message.startswith("dataset "):
            message = f"{where}: {message}"
        raise _same_kind(e, message) from None
    except Exception as e:
        if not is_spark_error(e):
            raise
        failure = describe_spark_error(e)
        message = driver_spelling(failure.message)
        for path, display in paths.items():
            message = message.replace(path, display)
        if failure.file is not None or any(mark in message for mark in _PARSE_FAILURES):
            raise ReadError(f"{where}: {message}") from None  # a lazily read file failed to parse
        raise EngineError(f"{where}: {message}") from None


def _same_kind(error: OdfprojError, message: str) -> OdfprojError:
    try:
        return type(error)(message)
    except TypeError:  # an error class with another constructor
        return IngestError(message)


def _unlink_temporary(item: FetchedItem) -> None:
    if item.temporary:
        if item.path.is_dir():
            shutil.rmtree(item.path, ignore_errors=True)
        else:
            item.path.unlink(missing_ok=True)


@contextmanager
def _removed(path: Path) -> Iterator[None]:
    """Remove the folder ``path`` when the block ends, however it ends."""
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def _work_dir(work_dir: Path | None) -> Iterator[Path]:
    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        yield Path(work_dir)
        return
    with scratch_folder() as path:  # also removes the folders of killed ingests
        yield path
