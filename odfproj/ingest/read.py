"""The read phase of ingestion: a ``ReadStep`` plus local files -> a Spark DataFrame.

Decisions, and why:

- Reads are strict. Spark's readers run in ``FAILFAST`` mode, so a malformed CSV row or a value that does
  not fit its declared type stops the read with a one-line ``ReadError`` naming the file, instead of
  becoming a silent null.
- The result is materialised (``localCheckpoint``) by default. Spark is lazy; without this, a bad file
  would fail in some later step (preprocess, merge, write) with no file in sight. Materialising also
  freezes the input, so later steps never re-parse files that the fetch cache may have removed.
- A declared ``schema`` is the result's schema: its names, order and types. CSV applies it by position
  (as the reference implementation does: ``header: true`` only skips the first line); JSON formats match
  it by name, and take numbers sent as strings (``"id": "2269"`` for ``id BIGINT``) as the reference's
  reader does; Parquet and shapefiles read their own schema and then cast each declared column by name
  under ANSI rules (a missing column or a value that does not fit is an error). Spark file readers always
  produce nullable columns, so ``NOT NULL`` is not enforced here.
- An empty input gives an empty DataFrame with the declared schema; with no declared schema its columns
  are unknowable, which is a ``ReadError``.
- Text is checked to be valid in its declared encoding (UTF-8 by default) before Spark sees it: Spark
  would otherwise replace bad bytes with U+FFFD without a word.
- ``dateFormat``/``timestampFormat``: ``rfc3339`` (the one format the spec requires) means Spark's default
  ISO-8601 parsing, which accepts RFC 3339; any other value is a Spark datetime pattern.
- GeoJSON: one row per feature, its ``properties`` as columns plus a ``geometry`` column holding the
  geometry as a JSON string (no geometry types in Spark or ODF's DDL). A declared schema lists the output
  columns, ``geometry STRING`` included where wanted; any other name is looked up in ``properties``.

CSV options and what they become in Spark (``mode=FAILFAST`` is always set; ``multiLine=true`` too, so
quoted values may span lines, unless a streamed scan proves that no quoted value of any file holds a line
break (``ingest/csv_lines.py``): a file read with ``multiLine`` is one split, one task, while without it
Spark cuts the file over all cores; for one such file the same scan counts the records of each of
Spark's splits (:class:`Scan`), which spares numbering them a Spark job):

======================  ==========================================================================
``separator``           ``sep``
``encoding``            ``encoding`` (checked first; Spark 4 decodes only the charsets in
                        ``SPARK_CHARSETS``, others are a ``ReadError``)
``quote``               ``quote`` (``""`` turns quoting off, as in the spec)
``escape``              ``escape``
``header``              ``header``
``inferSchema``         ``inferSchema`` (ignored by Spark when a schema is declared)
``nullValue``           ``nullValue``
``dateFormat``          ``dateFormat`` (``rfc3339``: Spark's default ISO parsing)
``timestampFormat``     ``timestampFormat`` (``rfc3339``: Spark's default ISO parsing)
======================  ==========================================================================
"""

from __future__ import annotations

import codecs
import fnmatch
import io
import json
import os
import threading
import zipfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from odfproj.engine.columns import column
from odfproj.engine.exchange import exchange_of, local_of_any
from odfproj.engine.file_splits import split_bytes
from odfproj.engine.spark import SparkFailure, is_spark_error, spark_failures
from odfproj.engine.types import spark_type_from_arrow
from odfproj.errors import EngineError, InvalidValueError
from odfproj.ingest.csv_header import check_header_only_files
from odfproj.ingest.csv_lines import LineScan, scan_lines
from odfproj.ingest.errors import IngestError
from odfproj.odf import model
from odfproj.odf.ddl import parse_ddl_schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
    from pyspark.sql import types as T

#: The geometry column of GeoJSON and shapefile reads.
GEOMETRY = "geometry"

#: The charsets Spark 4's CSV and JSON readers decode (``spark.sql.legacy.javaCharsets`` off).
SPARK_CHARSETS = ("utf-8", "us-ascii", "iso-8859-1", "utf-16", "utf-16be", "utf-16le", "utf-32")

#: Spark's charset name for each Python codec name.
_CHARSET_BY_CODEC = {
    "utf-8": "utf-8",
    "ascii": "us-ascii",
    "latin-1": "iso-8859-1",
    "iso8859-1": "iso-8859-1",
    "utf-16": "utf-16",
    "utf-16-be": "utf-16be",
    "utf-16-le": "utf-16le",
    "utf-32": "utf-32",
}
_RFC3339 = "rfc3339"
_CHUNK = 1 << 20


class ReadError(IngestError, EngineError):
    """An input file cannot be read as its read step says (format, encoding, schema).

    An ``IngestError`` (the read phase of ingestion) that is also an ``EngineError`` (Spark did the
    reading), so either handler catches it.
    """


@dataclass(frozen=True, slots=True)
class Scan:
    """A read's DataFrame and, where the read phase could tell, its partitions' records."""

    frame: DataFrame
    #: The records Spark's scan gives each partition, by partition index (a CSV read line by line,
    #: counted on the driver's pass over its bytes: ``ingest.csv_lines``); ``None`` if not known. A
    #: prediction: Spark's read must be checked against it (``engine.slices.number_counted``).
    partition_records: tuple[int, ...] | None = None


def read_files(
    spark: SparkSession,
    read: model.ReadStep,
    paths: Sequence[str | Path],
    *,
    materialize: bool = True,
    file_column: str | None = None,
) -> DataFrame:
    """Read local ``paths`` (all in the same format) as ``read`` describes (:func:`scan_files`'s frame)."""
    return scan_files(spark, read, paths, materialize=materialize, file_column=file_column).frame


def scan_files(
    spark: SparkSession,
    read: model.ReadStep,
    paths: Sequence[str | Path],
    *,
    materialize: bool = True,
    file_column: str | None = None,
    lines_ahead: LinesAhead | None = None,
) -> Scan:
    """Read local ``paths`` (all in the same format) as ``read`` describes.

    With ``materialize`` (the default) the data is parsed now, so every format and type error surfaces
    here as a ``ReadError``; without it the DataFrame is lazy and errors appear at the first action.
    ``file_column``: for a read of several files, a column of that name holds each record's file as
    Spark names it (``input_file_name()``, a ``file:`` URI; :func:`file_of_uri` turns it back into the
    path; empty where the reader cannot tell). Read by a refusal only; never give it to a read that a
    preprocess query reads (a preprocess query must not depend on the file Spark read).
    ``lines_ahead``: the pass over a CSV file :func:`scan_ahead` started, taken if it fits.
    """
    files = [str(Path(p).absolute()) for p in paths]  # a warm session's JVM may not share our working folder
    for f in files:
        if not Path(f).exists():
            raise ReadError(f"input file {f} does not exist")
    try:
        declared = parse_ddl_schema(list(read.schema)) if read.schema else None
    except InvalidValueError as e:
        raise ReadError(f"the read step's schema is invalid: {e}") from None
    reader = _READERS.get(type(read))
    if reader is None:
        raise ReadError(f"unsupported read step {type(read).__name__}")
    if lines_ahead is not None and isinstance(read, model.ReadStepCsv):
        reader = partial(_read_csv, ahead=lines_ahead)
    what = _describe(files)

    def unreadable(failure: SparkFailure) -> ReadError:
        if failure.user_raised:
            return ReadError(failure.message)
        bad = describe_bad_rows(spark, read, files)
        return ReadError(bad if bad is not None else f"cannot read {failure.file or what}: {failure.message}")

    with spark_failures(unreadable):
        scan = reader(spark, read, files, declared) if files else None
        if not isinstance(scan, Scan):
            scan = Scan(scan if scan is not None else _empty(spark, declared, what))
        df = scan.frame
        if file_column is not None and len(files) > 1:
            df = df.withColumn(file_column, _input_file_name())
        if materialize:
            df = df.localCheckpoint(eager=True)
    if declared is None and not df.columns:
        raise ReadError(
            f"{what} holds no data and the read step declares no schema, so its columns are unknown"
        )
    return Scan(df, scan.partition_records if df is scan.frame else None)


def _input_file_name() -> Column:
    from pyspark.sql import functions as F

    return F.input_file_name()


def file_of_uri(uri: str) -> str:
    """The local path a ``file_column`` value (:func:`read_files`) names, normalised as ``os.path.normpath``:
    a file Spark read from the workspace's store names the driver's file it is a copy of."""
    from urllib.parse import unquote, urlsplit

    if not uri:
        return ""
    handed = local_of_any(uri)
    return os.path.normpath(handed if handed is not None else unquote(urlsplit(uri).path))


def _in_spark(spark: SparkSession, files: Sequence[str]) -> list[str]:
    """Where Spark's tasks open the driver's ``files``: the paths themselves, or their copies in the
    workspace's store where the executors may not see the driver's disk (``engine.exchange``)."""
    exchange = exchange_of(spark)
    return [exchange.reads_at(Path(f)) for f in files]


def _describe(files: Sequence[str]) -> str:
    if len(files) == 1:
        return files[0]
    if not files:
        return "no input files"
    return f"one of {len(files)} files ({files[0]}, ...)"


def _empty(spark: SparkSession, declared: pa.Schema | None, what: str) -> DataFrame:
    if declared is None:
        raise ReadError(f"{what}: nothing to read and the read step declares no schema")
    return spark.createDataFrame([], _spark_schema(declared))


def _spark_schema(schema: pa.Schema) -> T.StructType:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, spark_type_from_arrow(f.type), True) for f in schema])


# --- text checks ----------------------------------------------------------------------------------------


def _spark_charset(encoding: str | None) -> str:
    """Spark's name for ``encoding``; a ``ReadError`` for names Python or Spark does not know."""
    if encoding is None:
        return "utf-8"
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:
        raise ReadError(f"unknown encoding {encoding!r}") from None
    charset = _CHARSET_BY_CODEC.get(codec)
    if charset is None:
        raise ReadError(
            f"encoding {encoding!r} is not supported by the Spark reader; use one of {', '.join(SPARK_CHARSETS)}"
        )
    return charset


def _check_text(files: Sequence[str], charset: str) -> list[str]:
    """Fail on bytes that are invalid in ``charset``; return each file's first non-blank character."""
    firsts: list[str] = []
    for f in files:
        decoder = codecs.getincrementaldecoder(charset)(errors="strict")
        first = ""
        offset = 0
        with open(f, "rb") as stream:
            while True:
                chunk = stream.read(_CHUNK)
                try:
                    text = decoder.decode(chunk, final=not chunk)
                except UnicodeDecodeError as e:
                    raise ReadError(
                        f"{f} is not valid {charset} (byte offset {offset + e.start}); set the read "
                        "step's `encoding` to the file's encoding"
                    ) from None
                if not first:
                    first = text.lstrip("\ufeff \t\r\n")[:1]
                offset += len(chunk)
                if not chunk:
                    break
        firsts.append(first)
    return firsts


def _datetime_options(reader: DataFrameReader, step: Any) -> DataFrameReader:
    for option in ("date_format", "timestamp_format"):
        value = getattr(step, option, None)
        if value is not None and value.lower() != _RFC3339:
            name = "dateFormat" if option == "date_format" else "timestampFormat"
            reader = reader.option(name, value)
    return reader


# --- CSV ------------------------------------------------------------------------------------------------


def csv_options(step: model.ReadStepCsv) -> dict[str, str]:
    """The Spark CSV options a ``ReadStepCsv`` means (see the module docstring for the table)."""
    options = {"mode": "FAILFAST", "multiLine": "true", "encoding": _spark_charset(step.encoding)}
    simple = {
        "sep": step.separator,
        "quote": step.quote,
        "escape": step.escape,
        "nullValue": step.null_value,
    }
    options.update({k: v for k, v in simple.items() if v is not None})
    for key, flag in (("header", step.header), ("inferSchema", step.infer_schema)):
        if flag is not None:
            options[key] = "true" if flag else "false"
    for key, value in (("dateFormat", step.date_format), ("timestampFormat", step.timestamp_format)):
        if value is not None and value.lower() != _RFC3339:
            options[key] = value
    return options


def _read_csv(
    spark: SparkSession,
    step: model.ReadStepCsv,
    files: list[str],
    declared: pa.Schema | None,
    ahead: LinesAhead | None = None,
) -> Scan:
    options = csv_options(step)
    _check_text(files, options["encoding"])
    check_header_only_files(step, files, declared, options["encoding"])
    # One file read line by line: the scan that proves it also counts the records of Spark's splits.
    split = (
        split_bytes(spark, Path(files[0]).stat().st_size)
        if len(files) == 1 and _splittable(files[0])
        else None
    )
    scans = []
    for f in files:
        taken = ahead.take(f, split) if ahead is not None else None
        scans.append(taken if taken is not None else _line_scan(options, f, split))
        if not scans[-1].records_are_lines:
            break
    if all(scan.records_are_lines for scan in scans):
        options["multiLine"] = "false"  # no quoted line break: Spark may split the files over all cores
    reader = spark.read.options(**options)
    if declared is not None:
        reader = reader.schema(_spark_schema(declared))
    counted = scans[0].split_records if len(scans) == 1 and options["multiLine"] == "false" else None
    return Scan(reader.csv(_in_spark(spark, files)), counted)


def _line_scan(
    options: Mapping[str, str], path: str, split: int | None, stop: threading.Event | None = None
) -> LineScan:
    """The driver's pass over one CSV file (``ingest.csv_lines``) with the Spark options the read gives it."""
    return scan_lines(
        path,
        separator=options.get("sep", ","),
        quote=options.get("quote", '"'),
        escape=options.get("escape", "\\"),
        charset=options["encoding"],
        split_bytes=split,
        header=options.get("header") == "true",
        stop=stop,
    )


@dataclass(frozen=True)
class LinesAhead:
    """The pass over one CSV file, started in a thread of its own before the session is up (:func:`scan_ahead`).

    A cold command's JVM takes 4-5 s to start, the pass over 20M rows (747 MiB) 0.9 s on two threads: the
    pass hides behind the start. On two cores the JVM started in 5.0-5.2 s beside it, plain Spark's alone
    in 5.1-5.3 s: the whole pass is saved (bench/README.md, sessions 28 and 29).
    """

    path: str
    #: The split size the session was expected to have (``engine.file_splits.split_bytes_before_start``).
    split_bytes: int
    answer: Future[LineScan]
    stop: threading.Event

    def take(self, path: str, split: int | None) -> LineScan | None:
        """The pass's answer if it is over ``path`` with the session's split size ``split``, else ``None``
        (and the pass is stopped). A pass that failed is ``None`` too: the read's own pass reports why."""
        if path != self.path or split != self.split_bytes:
            self.cancel()
            return None
        try:
            return self.answer.result()
        except Exception:  # the same pass, made again by the read, raises it where errors are named
            return None

    def cancel(self) -> None:
        """Stop the pass at its next piece, if it still runs: nobody will take its answer."""
        self.stop.set()


def scan_ahead(read: model.ReadStep, path: Path, split_of: Callable[[int], int | None]) -> LinesAhead | None:
    """Start the pass :func:`scan_files` will make over ``path`` (a CSV file), if the session is not up yet.

    ``split_of``: the split size the session will give a file of that many bytes, ``None`` if it cannot
    be told before the session starts or the session is already up (``SparkEngine.split_bytes_before_start``).
    The caller cancels what it did not take. In a daemon thread: a command that stops does not wait for it.
    """
    if not isinstance(read, model.ReadStepCsv):
        return None
    file = str(path.absolute())
    try:
        split = split_of(os.path.getsize(file)) if _splittable(file) else None
        options = csv_options(read)
    except (OSError, ReadError):
        return None  # the read reports it
    if split is None:
        return None
    ahead = LinesAhead(file, split, Future(), threading.Event())

    def scan() -> None:
        if ahead.answer.set_running_or_notify_cancel():
            try:
                ahead.answer.set_result(_line_scan(options, file, split, ahead.stop))
            except Exception as e:  # kept for take(), which lets the read's own pass report it
                ahead.answer.set_exception(e)

    threading.Thread(target=scan, name="csv-lines-ahead", daemon=True).start()
    return ahead


#: File name endings Hadoop reads through a compression codec: their bytes are not the text's.
_CODEC_SUFFIXES = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".br", ".lzo", ".xz")


def _splittable(path: str) -> bool:
    """Whether Spark cuts ``path`` at byte positions of its text (no codec by its name)."""
    return not path.lower().endswith(_CODEC_SUFFIXES)


#: How many malformed rows an error shows: enough to see a pattern, short enough for one line.
SHOWN_BAD_ROWS = 3
_BAD = "__odfproj_bad_row"
_SHOWN_CHARS = 80


def bad_csv_rows(
    spark: SparkSession, step: model.ReadStepCsv, files: Sequence[str], limit: int = SHOWN_BAD_ROWS
) -> list[tuple[str, int, str]]:
    """The first ``limit`` lines of ``files`` that do not parse under ``step``: ``(file, line, text)``.

    One Spark job per file, however many rows are bad: each physical line is parsed on its own
    (``from_csv``, permissive) beside its line number, and the lines that fail come back. Line
    numbers count physical lines, so a quoted value spanning lines may be reported by its parts.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not step.schema:
        return []
    declared = _spark_schema(parse_ddl_schema(list(step.schema)))
    schema = T.StructType([*declared.fields, T.StructField(_BAD, T.StringType(), True)])
    options = {
        k: v for k, v in csv_options(step).items() if k not in ("mode", "multiLine", "encoding", "header")
    }
    options.update(mode="PERMISSIVE", columnNameOfCorruptRecord=_BAD)
    first_data_line = 2 if step.header else 1
    found: list[tuple[str, int, str]] = []
    for f in files:
        if len(found) >= limit:
            break
        lines = _numbered_lines(spark.read.text(_in_spark(spark, [f])[0]))
        parsed = lines.where(F.col("line") >= first_data_line).where(F.length(F.trim("value")) > 0)
        parsed = parsed.select(
            "line", "value", F.from_csv("value", schema.simpleString(), options).alias("r")
        )
        bad = parsed.where(F.col(f"r.{_BAD}").isNotNull()).orderBy("line").limit(limit - len(found)).collect()
        found.extend((f, row["line"], row["value"]) for row in bad)
    return found


#: ``monotonically_increasing_id`` puts the partition index above these bits, the row's index below.
_ROW_BITS = 33


def _numbered_lines(text: DataFrame) -> DataFrame:
    """``spark.read.text``'s rows as ``(line, value)``, ``line`` counting from 1 in file order.

    DataFrame operations only (an RDD's ``zipWithIndex`` does not exist on Spark Connect): each row's
    id holds its partition and its index in it; one small aggregate counts the rows per partition,
    and a partition's first line number is the sum of the counts before it.
    """
    from pyspark.sql import functions as F

    ided = text.select(F.monotonically_increasing_id().alias("id"), "value")
    counts = ided.groupBy(F.shiftright("id", _ROW_BITS).alias("p")).count().orderBy("p").collect()
    first, start = {}, 1
    for row in counts:
        first[row["p"]] = start
        start += row["count"]
    starts = F.create_map(*(F.lit(x) for pair in first.items() for x in pair)) if first else F.create_map()
    partition = F.shiftright("id", _ROW_BITS)
    row_in_partition = F.col("id").bitwiseAND(F.lit((1 << _ROW_BITS) - 1))
    return ided.select(
        (starts[partition] + row_in_partition).cast("long").alias("line"), F.col("value").cast("string")
    )


def describe_bad_rows(spark: SparkSession, step: model.ReadStep, files: Sequence[str]) -> str | None:
    """One line naming the file and line of the first rows that do not fit ``step``; ``None`` if none found."""
    if not isinstance(step, model.ReadStepCsv):
        return None
    try:
        bad = bad_csv_rows(spark, step, files)
    except Exception as e:  # the diagnosis must never hide the original error
        if not is_spark_error(e):
            raise
        return None
    if not bad:
        return None
    shown = "; ".join(
        f"{f} line {n}: {text[:_SHOWN_CHARS] + ('…' if len(text) > _SHOWN_CHARS else '')!r}"
        for f, n, text in bad
    )
    more = " (the first ones)" if len(bad) >= SHOWN_BAD_ROWS else ""
    return f"rows that do not fit the read step's schema ({', '.join(step.schema or ())}){more}: {shown}"


# --- JSON -----------------------------------------------------------------------------------------------


def _json_reader(spark: SparkSession, step: Any, *, multi_line: bool) -> tuple[DataFrameReader, str]:
    charset = _spark_charset(getattr(step, "encoding", None))
    reader = spark.read.option("mode", "FAILFAST").option("multiLine", "true" if multi_line else "false")
    if getattr(step, "encoding", None) is not None:
        reader = reader.option("encoding", charset)
        if not multi_line and charset != "utf-8":
            reader = reader.option("lineSep", "\n")  # Spark needs it spelled out for non-UTF-8 lines
    return _datetime_options(reader, step), charset


def _path_parts(sub_path: str) -> list[str]:
    parts = sub_path.split(".")
    if not all(parts):
        raise ReadError(f"invalid subPath {sub_path!r}: expected names separated by dots, like a.b.c")
    return parts


def _path_column(parts: Sequence[str]) -> Column:

    value = column(parts[0])
    for part in parts[1:]:
        value = value.getField(part)
    return value


def _wrap(parts: Sequence[str], inner: T.DataType) -> T.StructType:
    from pyspark.sql import types as T

    wrapped: T.DataType = inner
    for part in reversed(parts):
        wrapped = T.StructType([T.StructField(part, wrapped, True)])
    assert isinstance(wrapped, T.StructType)
    return wrapped


def _required(column: Column, files: Sequence[str], message: str) -> Column:
    """``column``, failing the read (naming the file) where it is null."""
    from pyspark.sql import functions as F

    return F.when(column.isNull(), F.raise_error(F.lit(f"{_describe(files)}: {message}"))).otherwise(column)


def _read_json(
    spark: SparkSession, step: model.ReadStepJson, files: list[str], declared: pa.Schema | None
) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    reader, charset = _json_reader(spark, step, multi_line=True)
    firsts = _check_text(files, charset)
    if step.sub_path is None:
        for f, first in zip(files, firsts, strict=True):
            if first == "{":
                raise ReadError(
                    f"{f}: the JSON root is an object, not an array; set the read step's subPath to "
                    "the path of the array of records"
                )
        if declared is not None:
            return _numbers_from_text(
                reader.schema(_spark_schema(_json_read_schema(declared))).json(_in_spark(spark, files)),
                declared,
                files,
            )
        return reader.json(_in_spark(spark, files))
    parts = _path_parts(step.sub_path)
    if declared is not None:
        records = T.ArrayType(_spark_schema(_json_read_schema(declared)), True)
        df = reader.schema(_wrap(parts, records)).json(_in_spark(spark, files))
    else:
        df = reader.json(_in_spark(spark, files))
        if not df.columns:
            return df
        try:
            found = df.select(_path_column(parts).alias("r")).schema["r"].dataType
        except Exception as e:
            if not is_spark_error(e):
                raise
            raise ReadError(f"subPath {step.sub_path!r} is not in {_describe(files)}") from None
        if not isinstance(found, T.ArrayType) or not isinstance(found.elementType, T.StructType):
            raise ReadError(
                f"subPath {step.sub_path!r} in {_describe(files)} is {found.simpleString()}, not an array "
                "of objects"
            )
    array = _required(_path_column(parts), files, f"subPath {step.sub_path} is missing or null")
    exploded = df.select(F.explode(array).alias("r")).select("r.*")
    return _numbers_from_text(exploded, declared, files) if declared is not None else exploded


def _read_ndjson(
    spark: SparkSession, step: model.ReadStepNdJson, files: list[str], declared: pa.Schema | None
) -> DataFrame:
    reader, charset = _json_reader(spark, step, multi_line=False)
    _check_text(files, charset)
    if declared is not None:
        return _numbers_from_text(
            reader.schema(_spark_schema(_json_read_schema(declared))).json(_in_spark(spark, files)),
            declared,
            files,
        )
    return reader.json(_in_spark(spark, files))


def _parsed_from_text(data_type: pa.DataType) -> bool:
    return pa.types.is_integer(data_type) or pa.types.is_floating(data_type) or pa.types.is_decimal(data_type)


def _json_read_schema(declared: pa.Schema) -> pa.Schema:
    """``declared`` with its numeric top-level columns read as text, to be parsed by :func:`_numbers_from_text`.

    The reference implementation's reader (arrow-json) takes a number sent as a string
    (``"id": "2269"`` for ``id BIGINT``); Spark's reader refuses it. Spark reads any JSON scalar into
    a string column as its text, so reading the column as text and parsing it accepts both forms.
    """
    return pa.schema([f.with_type(pa.utf8()) if _parsed_from_text(f.type) else f for f in declared])


def _numbers_from_text(df: DataFrame, declared: pa.Schema, files: Sequence[str]) -> DataFrame:
    """The columns :func:`_json_read_schema` read as text, parsed as their declared numbers.

    A value that is not a number fails the read naming the file, the column and the value. The file is
    named by a literal (:func:`_describe`), never ``input_file_name()``: the read is the input of a
    preprocess query, whose plan must be pure (``engine.spark.check_query_plan``) when an Append or
    Ledger merge reads it lazily.
    """
    from pyspark.sql import functions as F

    from odfproj.odf.ddl import format_ddl_type

    if not any(_parsed_from_text(f.type) for f in declared):
        return df
    columns = []
    for f in declared:
        value = column(f.name)
        if _parsed_from_text(f.type):
            parsed = F.trim(value).try_cast(spark_type_from_arrow(f.type))
            problem = F.concat(
                F.lit(
                    f"{_describe(files)}: column {f.name} is {format_ddl_type(f.type)}, but a record holds "
                ),
                F.to_json(F.struct(value.alias(f.name))),
            )
            value = F.when(value.isNotNull() & parsed.isNull(), F.raise_error(problem)).otherwise(parsed)
        columns.append(value.alias(f.name))
    return df.select(*columns)


# --- GeoJSON --------------------------------------------------------------------------------------------


def _feature_type(properties: T.StructType) -> T.StructType:
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("properties", properties, True),
            T.StructField(GEOMETRY, T.StringType(), True),  # Spark keeps an object's raw JSON text
        ]
    )


def _properties_and_columns(
    declared: pa.Schema | None, inferred: T.StructType | None
) -> tuple[T.StructType, list[str]]:
    """The ``properties`` struct to read, and the output columns in order."""
    from pyspark.sql import types as T

    if declared is not None:
        geometry = declared.field(GEOMETRY) if GEOMETRY in declared.names else None
        if geometry is not None and not pa.types.is_string(geometry.type):
            raise ReadError(f"the {GEOMETRY} column holds the geometry as GeoJSON text; declare it STRING")
        props = pa.schema([f for f in declared if f.name != GEOMETRY])
        return _spark_schema(props), list(declared.names)
    properties = inferred if inferred is not None else T.StructType([])
    return properties, [*(f.name for f in properties.fields if f.name != GEOMETRY), GEOMETRY]


def _feature_columns(feature: Column, columns: Sequence[str]) -> list[Column]:
    return [
        (feature.getField(GEOMETRY) if c == GEOMETRY else feature.getField("properties").getField(c)).alias(c)
        for c in columns
    ]


def _inferred_properties(df: DataFrame, path: Sequence[str]) -> T.StructType | None:
    from pyspark.sql import types as T

    data_type: T.DataType = df.schema
    for part in path:
        if not isinstance(data_type, T.StructType) or part not in data_type.fieldNames():
            return None
        data_type = data_type[part].dataType
        if isinstance(data_type, T.ArrayType):
            data_type = data_type.elementType
    return data_type if isinstance(data_type, T.StructType) else None


def _geo_reader(
    spark: SparkSession,
    step: model.ReadStepGeoJson | model.ReadStepNdGeoJson,
    files: list[str],
    declared: pa.Schema | None,
    *,
    multi_line: bool,
    check: Callable[[DataFrame], None] | None = None,
) -> tuple[DataFrameReader, tuple[T.StructType, list[str]] | DataFrame]:
    """The JSON reader of a (ND)GeoJSON step and its properties and columns, declared or inferred.

    Without a declared schema the files are probed (``check`` may refuse the probe); an empty probe is
    returned as it is, the caller's whole result.
    """
    reader, charset = _json_reader(spark, step, multi_line=multi_line)
    _check_text(files, charset)
    inferred = None
    if declared is None:
        probe = reader.json(_in_spark(spark, files))
        if not probe.columns:
            return reader, probe
        if check is not None:
            check(probe)
        inferred = _inferred_properties(probe, ["features", "properties"] if multi_line else ["properties"])
    return reader, _properties_and_columns(declared, inferred)


def _read_geojson(
    spark: SparkSession, step: model.ReadStepGeoJson, files: list[str], declared: pa.Schema | None
) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def check(probe: DataFrame) -> None:
        if "features" not in probe.columns:
            raise ReadError(f"{_describe(files)} is not a GeoJSON FeatureCollection (no `features` array)")

    reader, found = _geo_reader(spark, step, files, declared, multi_line=True, check=check)
    if not isinstance(found, tuple):
        return found
    properties, columns = found
    schema = T.StructType([T.StructField("features", T.ArrayType(_feature_type(properties), True), True)])
    df = reader.schema(schema).json(_in_spark(spark, files))
    features = _required(F.col("features"), files, "not a GeoJSON FeatureCollection (no `features` array)")
    return df.select(F.explode(features).alias("f")).select(*_feature_columns(F.col("f"), columns))


def _read_ndgeojson(
    spark: SparkSession, step: model.ReadStepNdGeoJson, files: list[str], declared: pa.Schema | None
) -> DataFrame:
    from pyspark.sql import functions as F

    reader, found = _geo_reader(spark, step, files, declared, multi_line=False)
    if not isinstance(found, tuple):
        return found
    properties, columns = found
    df = reader.schema(_feature_type(properties)).json(_in_spark(spark, files))
    return df.select(*_feature_columns(F.struct(*(F.col(c) for c in df.columns)), columns))


# --- Parquet and shapefiles: read natively, then cast to the declared schema -----------------------------


def _cast_to(df: DataFrame, declared: pa.Schema | None, what: str) -> DataFrame:

    if declared is None:
        return df
    available = {c.lower(): c for c in df.columns}
    columns = []
    for field in declared:
        name = available.get(field.name.lower())
        if name is None:
            raise ReadError(
                f"{what} has no column {field.name!r} declared in the read step's schema "
                f"(it has {', '.join(df.columns) or 'none'})"
            )
        columns.append(column(name).cast(spark_type_from_arrow(field.type)).alias(field.name))
    return df.select(*columns)


def _read_parquet(
    spark: SparkSession, step: model.ReadStepParquet, files: list[str], declared: pa.Schema | None
) -> DataFrame:
    return _cast_to(spark.read.parquet(*_in_spark(spark, files)), declared, _describe(files))


def _read_shapefile(
    spark: SparkSession, step: model.ReadStepEsriShapefile, files: list[str], declared: pa.Schema | None
) -> DataFrame:
    try:
        import shapefile  # pyshp
    except ImportError:
        raise ReadError(
            "reading EsriShapefile needs the optional pyshp package: install odfproj[shapefile] "
            "(pip install 'odfproj[shapefile]')"
        ) from None
    tables = [_shapefile_table(shapefile, f, step.sub_path) for f in files]
    table = pa.concat_tables(tables, promote_options="permissive")
    return _cast_to(spark.createDataFrame(table), declared, _describe(files))


def _shapefile_table(shapefile: Any, path: str, sub_path: str | None) -> pa.Table:
    """One shapefile (plain, in a folder, or inside a ZIP) as an Arrow table: attributes + geometry."""
    source = Path(path)
    try:
        if zipfile.is_zipfile(source):
            with zipfile.ZipFile(source) as archive:
                shp = _pick_shp([n for n in archive.namelist() if n.lower().endswith(".shp")], sub_path, path)
                stem = shp[:-4]
                members = {n.lower(): n for n in archive.namelist()}
                streams = {
                    ext: io.BytesIO(archive.read(members[(stem + "." + ext).lower()]))
                    for ext in ("shp", "shx", "dbf")
                    if (stem + "." + ext).lower() in members
                }
                with shapefile.Reader(**streams) as reader:
                    return _shapefile_to_arrow(reader)
        if source.is_dir():
            found = [str(p.relative_to(source)) for p in source.rglob("*") if p.suffix.lower() == ".shp"]
            source = source / _pick_shp(found, sub_path, path)
        with shapefile.Reader(str(source)) as reader:
            return _shapefile_to_arrow(reader)
    except ReadError:
        raise
    except Exception as e:
        raise ReadError(f"cannot read shapefile {path}: {e}") from None


def _pick_shp(candidates: Sequence[str], sub_path: str | None, where: str) -> str:
    matches = [c for c in candidates if sub_path is None or fnmatch.fnmatch(c, sub_path)]
    if len(matches) != 1:
        found = ", ".join(sorted(candidates)) or "none"
        if not matches:
            raise ReadError(f"{where}: no .shp file matches subPath {sub_path!r} (found: {found})")
        raise ReadError(f"{where}: several .shp files found ({found}); set subPath to choose one")
    return matches[0]


_DBF_TYPES: dict[str, Callable[[int], pa.DataType]] = {
    "C": lambda decimals: pa.utf8(),
    "N": lambda decimals: pa.int64() if decimals == 0 else pa.float64(),
    "F": lambda decimals: pa.float64(),
    "L": lambda decimals: pa.bool_(),
    "D": lambda decimals: pa.date32(),
}


def _shapefile_to_arrow(reader: Any) -> pa.Table:
    fields = [f for f in reader.fields if f[0] != "DeletionFlag"]
    names = [f[0] for f in fields]
    types = [_DBF_TYPES.get(str(f[1]), lambda d: pa.utf8())(int(f[3])) for f in fields]
    columns: list[list[Any]] = [[] for _ in fields]
    geometries: list[str | None] = []
    for item in reader.iterShapeRecords():
        for i, value in enumerate(item.record):
            columns[i].append(None if value == "" and types[i] != pa.utf8() else value)
        shape = item.shape
        geometries.append(None if shape.shapeType == 0 else json.dumps(shape.__geo_interface__))
    arrays = [pa.array(values, type=t) for values, t in zip(columns, types, strict=True)]
    return pa.table([*arrays, pa.array(geometries, pa.utf8())], names=[*names, GEOMETRY])


_READERS: dict[type, Callable[[SparkSession, Any, list[str], pa.Schema | None], DataFrame | Scan]] = {
    model.ReadStepCsv: _read_csv,
    model.ReadStepJson: _read_json,
    model.ReadStepNdJson: _read_ndjson,
    model.ReadStepGeoJson: _read_geojson,
    model.ReadStepNdGeoJson: _read_ndgeojson,
    model.ReadStepParquet: _read_parquet,
    model.ReadStepEsriShapefile: _read_shapefile,
}
