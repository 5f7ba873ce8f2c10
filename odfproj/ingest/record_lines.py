"""The line of a file on which its N-th record starts, as the read step reads records: for error messages.

A refusal found after the read (a CDC merge's, :class:`odfproj.ingest.cdc.RecordOrigin`) knows a record
by its number in its file, counted in the order Spark's reader gives the file's records; this module,
run only on the error path, turns that number into the physical line (counting from 1) the record
starts on, by one streamed pass over the file up to it, so messages say ``data/log/3.csv line 3`` as the
read errors do (:func:`odfproj.ingest.read.describe_bad_rows`):

- CSV: blank lines are skipped as Spark skips them, the first other line is the header when the step
  says ``header: true``, and a quoted value spanning lines is one record starting on its first line;
- NdJson and NdGeoJson: one record per non-blank line;
- Json and GeoJson: the records are the elements of one array (the root, the ``subPath``, or
  ``features``), each starting on the line of its first character.

Parquet and shapefiles have no lines: ``None``, and the caller names the record by its number.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterator

from odfproj.odf import model

__all__ = ["record_line"]

#: What Java's ``String.trim`` removes (Spark's test of a blank line): every character up to the space.
_JAVA_BLANK = "".join(chr(c) for c in range(33))


def record_line(step: model.ReadStep, path: str, number: int) -> int | None:
    """The line of ``path`` on which its ``number``-th record (from 1) starts; ``None`` if it has no lines
    or fewer records (the caller then names the record by its number)."""
    try:
        if isinstance(step, model.ReadStepCsv):
            return _nth(_csv_starts(step, path), number)
        if isinstance(step, model.ReadStepNdJson | model.ReadStepNdGeoJson):
            return _nth(_nonblank_lines(path, _encoding(step)), number)
        if isinstance(step, model.ReadStepJson | model.ReadStepGeoJson):
            sub_path = step.sub_path if isinstance(step, model.ReadStepJson) else "features"
            return _nth(_array_element_lines(path, _encoding(step), sub_path), number)
    except (OSError, UnicodeDecodeError, LookupError, csv.Error, ValueError):
        return None  # the message falls back to the record's number
    return None


def _nth(starts: Iterator[int], number: int) -> int | None:
    for i, line in enumerate(starts, start=1):
        if i == number:
            return line
    return None


def _encoding(step: model.ReadStep) -> str:
    encoding = getattr(step, "encoding", None) or "utf-8"
    return codecs.lookup(encoding).name


def _csv_starts(step: model.ReadStepCsv, path: str) -> Iterator[int]:
    """The first line of each data record of a CSV file (header and blank lines skipped)."""
    options: dict = {"delimiter": step.separator if step.separator is not None else ","}
    quote = step.quote if step.quote is not None else '"'
    if quote:
        options["quotechar"] = quote
    else:
        options["quoting"] = csv.QUOTE_NONE
    escape = step.escape if step.escape is not None else "\\"
    if escape and escape != quote:
        options["escapechar"] = escape
    header = bool(step.header)
    with open(path, encoding=_encoding(step), newline="") as stream:
        reader = csv.reader(stream, **options)
        ended = 0  # the line the previous record ended on
        for row in reader:
            start, ended = ended + 1, reader.line_num
            if not "".join(row).strip(_JAVA_BLANK):
                continue
            if header:
                header = False
                continue
            yield start


def _nonblank_lines(path: str, encoding: str) -> Iterator[int]:
    with open(path, encoding=encoding, newline="") as stream:
        for n, line in enumerate(stream, start=1):
            if line.strip(_JAVA_BLANK):
                yield n


def _array_element_lines(path: str, encoding: str, sub_path: str | None) -> Iterator[int]:
    """The line of each element of the file's record array: the root array, or the one at ``sub_path``."""
    with open(path, encoding=encoding) as stream:
        text = stream.read()
    decoder = json.JSONDecoder()
    at = _skip_space(text, 0)
    for part in sub_path.split(".") if sub_path else ():
        at = _member(text, at, part, decoder)
    if text[at : at + 1] != "[":
        return
    at = _skip_space(text, at + 1)
    if text[at : at + 1] == "]":
        return
    line, counted = 1, 0
    while at < len(text):
        line += text.count("\n", counted, at)
        counted = at
        yield line
        _, at = decoder.raw_decode(text, at)
        at = _skip_space(text, at)
        if text[at : at + 1] != ",":
            return
        at = _skip_space(text, at + 1)


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n\ufeff":
        at += 1
    return at


def _member(text: str, at: int, name: str, decoder: json.JSONDecoder) -> int:
    """Where the value of member ``name`` of the object at ``at`` starts (a ``ValueError`` if none)."""
    if text[at : at + 1] != "{":
        raise ValueError(f"no object at {at}")
    at = _skip_space(text, at + 1)
    while text[at : at + 1] == '"':
        key, at = decoder.raw_decode(text, at)
        at = _skip_space(text, at)
        if text[at : at + 1] != ":":
            raise ValueError(f"no ':' at {at}")
        at = _skip_space(text, at + 1)
        if key == name:
            return at
        _, at = decoder.raw_decode(text, at)
        at = _skip_space(text, at)
        if text[at : at + 1] == ",":
            at = _skip_space(text, at + 1)
    raise ValueError(f"no member {name!r}")
