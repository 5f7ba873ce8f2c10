"""Can a CSV file be read line by line? Only when no quoted value can hold a line break.

Spark reads a CSV file with ``multiLine=true`` as one split, parsed by one task, so that a quoted
value spanning lines parses correctly; with ``multiLine=false`` it cuts the file at line breaks over
all cores, which is right only when every record is one line. :func:`records_are_lines` decides this
with one streamed pass over the bytes (4 MiB pieces cut at line breaks, bounded memory),
conservatively: a "yes" is a proof, and anything it cannot prove (a quote in the middle of a value, a
doubled or escaped quote, a charset whose quote is not one byte) is a "no", which only costs
parallelism.

The proof: on every physical line (cut at CR or LF, as Spark's line reader cuts), the quotes pair up
as (opening, closing), each opening quote at the line start or right after a separator, each closing
quote right before a separator or the line end, with no quote or line break between them. Then each
quoted value opens at a field's start and closes before the line ends, so every line ends outside
quotes. A few numpy passes per 4 MiB piece check it (:func:`_quotes_pair_up`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["records_are_lines"]

_CHUNK = 1 << 22
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
    escaped = (
        (escape + quote).encode() if len(escape) == 1 and ord(escape) < 128 and escape != quote else None
    )
    rest = b""
    with open(path, "rb") as f:
        while True:
            data = f.read(_CHUNK)
            piece = rest + data
            if data:  # whole lines only; the unfinished last line waits for the next piece
                cut = max(piece.rfind(b"\n"), piece.rfind(b"\r")) + 1
                piece, rest = piece[:cut], piece[cut:]
            if (escaped is not None and escaped in piece) or not _quotes_pair_up(piece, q, sep):
                return False
            if not data:
                return True


def _quotes_pair_up(piece: bytes, q: int, sep: int) -> bool:
    """The rule of the module docstring over whole lines (numpy: a few passes over the bytes).

    If every line holds an even number of quotes, the k-th quote of the piece opens a value when k is
    even and closes it when k is odd; a line break between the two makes the count before it odd.
    """
    if q not in piece:
        return True
    buf = np.frombuffer(b"\n" + piece + b"\n", np.uint8)  # the piece starts and ends at line ends
    quotes = np.flatnonzero(buf == q)
    breaks = np.flatnonzero((buf == _CR) | (buf == _LF))
    if quotes.size % 2 or np.any(np.searchsorted(quotes, breaks) % 2):
        return False  # a line with an odd number of quotes
    before, after = buf[quotes[0::2] - 1], buf[quotes[1::2] + 1]
    return bool(
        np.all((before == sep) | (before == _CR) | (before == _LF))
        and np.all((after == sep) | (after == _CR) | (after == _LF))
    )
