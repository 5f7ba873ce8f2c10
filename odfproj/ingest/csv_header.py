"""A CSV file that is only a header line of the wrong width: refused instead of ingested as nothing.

With ``header: true`` the first line of a CSV file is skipped, so a file of one line, a garbage
file without a newline for instance, reads as zero records: the ingest would record the file as
done with "no new data" and never look at it again. A file that really has no records has the
source's header (as many fields as the read schema has columns); anything else is refused, naming
the file. Files with records are left to Spark's strict reader, which catches malformed rows.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence

import pyarrow as pa

from odfproj.ingest.errors import IngestError
from odfproj.odf import model

__all__ = ["check_header_only_files"]


def check_header_only_files(
    step: model.ReadStepCsv, files: Sequence[str], declared: pa.Schema | None, charset: str
) -> None:
    """Raise :class:`HeaderOnlyError` for a file that holds only a first line of the wrong width."""
    if not step.header or declared is None:
        return
    separator = step.separator if step.separator is not None else ","
    quote = step.quote if step.quote is not None else '"'
    if len(separator) != 1 or len(quote) > 1:
        return  # a dialect Python's csv cannot express: Spark alone decides
    for path in files:
        header = _only_row(path, separator, quote, step.escape, charset)
        if header is not None and len(header) != len(declared):
            raise HeaderOnlyError(
                f"{path}: the file holds nothing but a first line of {len(header)} field(s), and the "
                f"read schema declares {len(declared)} column(s); it is not a header of this source "
                "(with header: true the first line is skipped, so the file would ingest as nothing)"
            )


class HeaderOnlyError(IngestError):
    """A CSV file holds only a first line that cannot be the source's header."""


def _only_row(path: str, separator: str, quote: str, escape: str | None, charset: str) -> list[str] | None:
    """The file's one non-blank row, or ``None`` when it has none or more than one."""
    options: dict = {"delimiter": separator}
    if quote:
        options["quotechar"] = quote
    else:
        options["quoting"] = csv.QUOTE_NONE
    if escape:
        options["escapechar"] = escape
    try:
        with open(path, encoding=charset, errors="replace", newline="") as stream:
            rows = (row for row in csv.reader(stream, **options) if any(field.strip() for field in row))
            first = next(rows, None)
            if first is None or next(rows, None) is not None:
                return None
            return first
    except (OSError, csv.Error, LookupError):
        return None  # unreadable here: Spark's reader reports it
