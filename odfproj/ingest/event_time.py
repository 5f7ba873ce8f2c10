"""Event time of a fetched item, from its metadata, its path, or the system clock (``EventTimeSource``).

A Snapshot-style root needs to know *when* each fetched export was taken: that time becomes the event
time of the changes the merge derives from it. These are pure functions (no I/O) so each rule is
unit-tested on its own; the fetcher supplies the inputs (``Last-Modified``, a file's mtime, a path).

Timestamp formats (``FromPath.timestampFormat``)
    The spec says "java.text.SimpleDateFormat form", while the reference implementation (kamu) feeds
    the string to Rust chrono, i.e. ``strftime`` codes, with ``%Y-%m-%d`` as its default. Both occur in
    the wild, so both are accepted: a format containing a ``%`` code (``%Y``, ``%.f``...) is read as strftime/chrono (with chrono's
    ``%F``, ``%T``, ``%.f``, ``%:z`` ... translated), anything else as SimpleDateFormat (letters ``y M L
    d D H h m s S a E z Z X x``, ``'quoted'`` literals). Without a format the text must be ISO 8601:
    RFC 3339, a date (``2024-01-31``), a basic date (``20240131``) or a zone-less date-time.
    A result without a zone is taken as UTC, like the reference implementation does.

Messages raised here describe the pattern and the text but not the dataset: the fetcher re-raises
them with :func:`odfproj.ingest.errors.source_label` in front.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from odfproj.ingest.errors import EventTimeError
from odfproj.odf import model

__all__ = [
    "event_time_from_metadata",
    "event_time_from_path",
    "event_time_from_system_time",
    "parse_timestamp",
    "resolve_event_time",
    "strptime_format",
]


def resolve_event_time(
    source: model.EventTimeSource | None,
    *,
    path: str | None,
    last_modified: datetime | None,
    system_time: datetime,
) -> datetime | None:
    """Apply one ``EventTimeSource`` rule; ``None`` (no rule) or missing metadata give ``None``.

    ``None`` means "unknown": the coordinator then falls back to the system time of the ingest, as
    the reference implementation does.
    """
    match source:
        case None:
            return None
        case model.EventTimeSourceFromMetadata():
            return event_time_from_metadata(last_modified)
        case model.EventTimeSourceFromSystemTime():
            return event_time_from_system_time(system_time)
        case model.EventTimeSourceFromPath():
            if path is None:
                raise EventTimeError("eventTime FromPath needs a path, and this source has none")
            return event_time_from_path(source, path)
    raise EventTimeError(f"unsupported eventTime source {type(source).__name__}")


def event_time_from_metadata(last_modified: datetime | None) -> datetime | None:
    """``Last-Modified`` of an HTTP resource or the mtime of a file; ``None`` when the server sent none."""
    return None if last_modified is None else _as_utc(last_modified)


def event_time_from_system_time(system_time: datetime) -> datetime:
    """The time of this ingest run (passed in, never read from the clock here, so tests are exact)."""
    return _as_utc(system_time)


def event_time_from_path(source: model.EventTimeSourceFromPath, path: str) -> datetime:
    """Match ``source.pattern`` and parse its first group with ``source.timestamp_format``.

    The pattern is searched in the file name first (what the reference implementation matches) and
    then in the whole path or URL, so both ``data-(\\d{8})\\.csv`` and ``(\\d{4}/\\d{2})/data.csv`` work.
    """
    try:
        regex = re.compile(source.pattern)
    except re.error as e:
        raise EventTimeError(f"invalid eventTime pattern {source.pattern!r}: {e}") from None
    if regex.groups < 1:
        raise EventTimeError(f"eventTime pattern {source.pattern!r} has no capture group for the timestamp")
    name = path.rstrip("/").rsplit("/", 1)[-1]
    for candidate in dict.fromkeys((name, path)):
        match = regex.search(candidate)
        if match is not None:
            text = match.group(1)
            if text is None:
                raise EventTimeError(
                    f"eventTime pattern {source.pattern!r} matched {path!r} but its first group is empty"
                )
            return parse_timestamp(text, source.timestamp_format)
    raise EventTimeError(f"eventTime pattern {source.pattern!r} does not match {path!r}")


def parse_timestamp(text: str, timestamp_format: str | None) -> datetime:
    """Parse ``text`` with a SimpleDateFormat or strftime format (ISO 8601 when ``None``) into UTC."""
    if timestamp_format is None:
        try:
            return _as_utc(datetime.fromisoformat(text))
        except ValueError:
            raise EventTimeError(
                f"cannot parse {text!r} as an ISO 8601 timestamp; set timestampFormat"
            ) from None
    if timestamp_format.strip() == "%s":
        try:
            return datetime.fromtimestamp(int(text), tz=UTC)
        except (ValueError, OverflowError):
            raise EventTimeError(f"cannot parse {text!r} as seconds since the epoch") from None
    fmt = strptime_format(timestamp_format)
    try:
        return _as_utc(datetime.strptime(text, fmt))
    except ValueError as e:
        raise EventTimeError(
            f"cannot parse {text!r} with timestampFormat {timestamp_format!r}: {e}"
        ) from None


def strptime_format(timestamp_format: str) -> str:
    """Translate a SimpleDateFormat or chrono format into Python ``strptime`` codes."""
    if _CHRONO_CODE.search(timestamp_format):
        return _from_chrono(timestamp_format)
    return _from_simple_date_format(timestamp_format)


# chrono codes that strptime lacks, and their strptime equivalents.
_CHRONO = {
    "F": "%Y-%m-%d",
    "T": "%H:%M:%S",
    "R": "%H:%M",
    "D": "%m/%d/%y",
    "e": "%d",
    "k": "%H",
    "l": "%I",
    "P": "%p",
    "#z": "%z",
}
_CHRONO_CODE = re.compile(r"%[A-Za-z.:#]")  # a strftime code, not a stray % inside a quoted literal
_CHRONO_TOKEN = re.compile(r"%(\.\d?f|:{1,3}z|#z|.)", re.DOTALL)


def _from_chrono(fmt: str) -> str:
    def replace(m: re.Match[str]) -> str:
        code = m.group(1)
        if code.startswith(".") and code.endswith("f"):
            return ".%f"
        if code.endswith("z"):
            return "%z"
        return _CHRONO.get(code, m.group(0))

    return _CHRONO_TOKEN.sub(replace, fmt)


def _simple_date_letter(letter: str, count: int, fmt: str) -> str:
    """One run of a SimpleDateFormat pattern letter (``yyyy``, ``MMM``...) as a strptime code."""
    match letter:
        case "y" | "u":
            return "%y" if count == 2 else "%Y"
        case "M" | "L":
            return "%m" if count <= 2 else ("%b" if count == 3 else "%B")
        case "d":
            return "%d"
        case "D":
            return "%j"
        case "H":
            return "%H"
        case "h":
            return "%I"
        case "m":
            return "%M"
        case "s":
            return "%S"
        case "S":
            return "%f"
        case "a":
            return "%p"
        case "E":
            return "%a" if count <= 3 else "%A"
        case "z":
            return "%Z"
        case "Z" | "X" | "x":
            return "%z"
    raise EventTimeError(f"unsupported letter {letter!r} in timestampFormat {fmt!r}")


def _from_simple_date_format(fmt: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "'":
            end = fmt.find("'", i + 1)
            if end == -1:
                raise EventTimeError(f"unterminated quote in timestampFormat {fmt!r}")
            literal = fmt[i + 1 : end]
            out.append("'" if literal == "" else literal.replace("%", "%%"))
            i = end + 1
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < len(fmt) and fmt[j] == ch:
                j += 1
            out.append(_simple_date_letter(ch, j - i, fmt))
            i = j
        else:
            out.append("%%" if ch == "%" else ch)
            i += 1
    return "".join(out)


def _as_utc(value: datetime) -> datetime:
    """Zone-less results are UTC (as in the reference implementation); others are converted."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
