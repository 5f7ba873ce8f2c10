"""Can a CSV file be read line by line? Only when no quoted value can hold a line break.

Spark reads a CSV file with ``multiLine=true`` as one split, parsed by one task, so that a quoted
value spanning lines parses correctly; with ``multiLine=false`` it cuts the file at line breaks over
all cores, which is right only when every record is one line. :func:`records_are_lines` decides this
with one streamed pass over the bytes (numpy per 1 MiB piece, bounded memory), conservatively: a
"yes" is a proof, and anything it cannot prove (a quote in the middle of a value, a doubled quote,
an escaped quote, a charset whose quote is not one byte) is a "no", which only costs parallelism.

The proof: on every physical line (cut at CR or LF, as Spark's line reader cuts), the quotes pair up
as (opening, closing), each opening quote right after the line start or a separator and each closing
quote right before a separator or the line end, with no quote between them. Then each quoted value
opens at a field's start and closes before the line ends, so every line ends outside quotes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["records_are_lines"]

_CHUNK = 1 << 20
_CR, _LF = 13, 10
#: Charsets in which the separator, quote, escape and line breaks are the same single bytes as in ASCII.
_ASCII_COMPATIBLE = frozenset({"utf-8", "us-ascii", "iso-8859-1"})


def records_are_lines(path: str, *, separator: str, quote: str, escape: str, charset: str) -> bool:
    """True only if no quoted value of ``path`` can span lines (see the module docstring)."""
    if quote == "":
        return True  # quoting off: a line break always ends a record
    if charset not in _ASCII_COMPATIBLE or not all(len(c) == 1 and ord(c) < 128 for c in (separator, quote)):
        return False
    q, sep = ord(quote), ord(separator)
    escape_byte = ord(escape) if len(escape) == 1 and ord(escape) < 128 and escape != quote else None
    carried = bytes([_LF])  # the byte before the file stands for a line start
    odd = False  # inside a line, after an opening quote whose closing quote has not come yet
    with open(path, "rb") as f:
        while True:
            data = f.read(_CHUNK)
            last = not data
            buf = np.frombuffer(carried + (data if not last else bytes([_LF])), np.uint8)
            ok, odd = _lines_ok(buf, q, sep, escape_byte, odd)
            if not ok:
                return False
            if last:
                return not odd
            carried = buf[-2:].tobytes()  # the last byte is checked next time, beside its neighbours


def _lines_ok(buf: np.ndarray, q: int, sep: int, escape: int | None, odd: bool) -> tuple[bool, bool]:
    """Check the bytes ``buf[1:-1]`` (their neighbours are in ``buf``); return (ok, odd at the end).

    ``buf[0]`` was checked with the previous piece (or stands for the line start); ``buf[-1]`` is
    checked with the next piece, whose ``buf[1]`` it becomes.
    """
    inner = buf[1:-1]
    quotes = np.nonzero(inner == q)[0] + 1
    breaks = np.nonzero((inner == _CR) | (inner == _LF))[0] + 1
    if not quotes.size:
        return (not (odd and breaks.size)), odd
    left, right = buf[quotes - 1], buf[quotes + 1]
    if escape is not None and bool(np.any(left == escape)):
        return False, odd  # an escaped quote: leave it to the multi-line parser
    # The ordinal of each quote within its line decides whether it must open or close a value.
    line_of_quote = np.searchsorted(breaks, quotes)
    line_start_quote = np.searchsorted(quotes, breaks)  # quotes before each line break
    first_in_line = np.concatenate(([0], line_start_quote))[line_of_quote]
    ordinal = np.arange(quotes.size) - first_in_line + (odd & (line_of_quote == 0))
    opening = ordinal % 2 == 0
    at_field_start = (left == sep) | (left == _CR) | (left == _LF)
    at_field_end = (right == sep) | (right == _CR) | (right == _LF)
    if not bool(np.all(np.where(opening, at_field_start, at_field_end))):
        return False, odd
    # Every line break must come after an even number of quotes on its line.
    per_line = np.diff(np.concatenate(([0], line_start_quote)))
    if per_line.size:
        per_line[0] += int(odd)
        if bool(np.any(per_line % 2)):
            return False, odd
    after_last_break = quotes.size - (int(line_start_quote[-1]) if breaks.size else 0)
    tail = after_last_break + (int(odd) if not breaks.size else 0)
    return True, bool(tail % 2)
