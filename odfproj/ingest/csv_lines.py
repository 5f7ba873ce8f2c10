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

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

__all__ = ["records_are_lines"]

_CHUNK = 1 << 22
_CR, _LF = 13, 10
#: Charsets in which the separator, quote, escape and line breaks are the same single bytes as in ASCII.
_ASCII_COMPATIBLE = frozenset({"utf-8", "us-ascii", "iso-8859-1"})
#: Pieces checked at once: numpy's passes release the GIL, so the scan uses two cores while the next
#: piece is read (Spark is idle until the read's options are decided).
_THREADS = 2


def records_are_lines(path: str, *, separator: str, quote: str, escape: str, charset: str) -> bool:
    """True only if no quoted value of ``path`` can span lines (see the module docstring)."""
    if quote == "":
        return True  # quoting off: a line break always ends a record
    if charset not in _ASCII_COMPATIBLE or not all(len(c) == 1 and ord(c) < 128 for c in (separator, quote)):
        return False
    q, sep = ord(quote), ord(separator)
    esc = ord(escape) if len(escape) == 1 and ord(escape) < 128 and escape != quote else None
    pending: deque[Future[bool]] = deque()
    rest = b""
    with open(path, "rb") as f, ThreadPoolExecutor(_THREADS, thread_name_prefix="csv-lines") as pool:
        while True:
            data = f.read(_CHUNK)
            piece = rest + data
            if data:  # whole lines only; the unfinished last line waits for the next piece
                cut = max(piece.rfind(b"\n"), piece.rfind(b"\r")) + 1
                piece, rest = piece[:cut], piece[cut:]
            pending.append(pool.submit(_quotes_pair_up, piece, q, sep, esc))
            while pending and (len(pending) > _THREADS or pending[0].done() or not data):
                if not pending.popleft().result():
                    for later in pending:
                        later.cancel()
                    return False
            if not data:
                return True


def _quotes_pair_up(piece: bytes, q: int, sep: int, esc: int | None) -> bool:
    """The rule of the module docstring over whole lines (numpy: a few passes over the bytes), and no
    quote right after the escape character ``esc``.

    If every line holds an even number of quotes, the k-th quote of the piece opens a value when k is
    even and closes it when k is odd; a line break between the two makes the count before it odd.
    """
    if q not in piece:
        return True
    buf = np.empty(len(piece) + 2, np.uint8)  # the piece starts and ends at line ends
    buf[0] = buf[-1] = _LF
    buf[1:-1] = np.frombuffer(piece, np.uint8)
    quotes = np.flatnonzero(buf == q)
    if quotes.size % 2:
        return False
    before, after = buf[quotes[0::2] - 1], buf[quotes[1::2] + 1]
    if esc is not None and np.any(buf[quotes - 1] == esc):
        return False  # an escaped quote
    if not (
        np.all((before == sep) | (before == _CR) | (before == _LF))
        and np.all((after == sep) | (after == _CR) | (after == _LF))
    ):
        return False
    lf = buf == _LF
    breaks = np.flatnonzero(lf | (buf == _CR) if _CR in piece else lf)
    return not np.any(np.searchsorted(quotes, breaks) % 2)  # a line with an odd number of quotes
