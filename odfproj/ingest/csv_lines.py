"""Can a CSV file be read line by line, and how many records does each of Spark's splits of it hold?

Spark reads a CSV file with ``multiLine=true`` as one split, parsed by one task, so that a quoted
value spanning lines parses correctly; with ``multiLine=false`` it cuts the file at line breaks over
all cores, which is right only when every record is one line. :func:`scan_lines` decides this with
one streamed pass over the bytes (4 MiB pieces cut at line breaks, bounded memory), conservatively:
a "yes" is a proof, and anything it cannot prove (a quote in the middle of a value, a doubled or
escaped quote, a charset whose quote is not one byte) is a "no", which only costs parallelism.

The proof: on every physical line (cut at CR or LF, as Spark's line reader cuts), the quotes pair up
as (opening, closing), each opening quote at the line start or right after a separator, each closing
quote right before a separator or the line end, with no quote or line break between them. Then each
quoted value opens at a field's start and closes before the line ends, so every line ends outside
quotes. A few numpy passes per 4 MiB piece check it (:func:`_quotes_pair_up`).

The same pass can count the records of each split Spark will read (``split_bytes``, from
:func:`odfproj.engine.file_splits.split_bytes`), so that numbering them needs no count job. The rules
it follows, Hadoop's line reader's and Spark's CSV reader's (``multiLine=false``):

- A line ends at LF, CR LF or a lone CR; the last line may have no line break.
- A split ``[s, s + n)`` reads the lines that start in ``(s, s + n]`` (and the first split the line
  at 0): a split starting inside a line, or at its start, leaves that line to the split before it.
  So a line starting at byte ``p > 0`` belongs to split ``(p - 1) // n``.
- A line whose bytes are all at most 0x20 (blank, as Java's ``trim`` sees it) is no record.
- With ``header``, the first record line of the first split is the header, no record. (If the
  first split has no record line, Spark would read the header as data in a later split: no count.)

These hold for the charsets whose line breaks and blanks are single ASCII bytes, the only ones
scanned here. A count that Spark's read does not match is found when the offsets are written
(:mod:`odfproj.engine.slices`), and the batch is then counted by Spark.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

__all__ = ["LineScan", "scan_lines"]

_CHUNK = 1 << 22
#: Room in a piece's buffer for the unfinished line carried over from the piece before (a longer line
#: gets a buffer of its own).
_LINE_ROOM = 1 << 16
_CR, _LF = 13, 10
#: The greatest byte Java's ``String.trim`` removes: a line of such bytes only is blank.
_BLANK = 0x20
#: Charsets in which the separator, quote, escape and line breaks are the same single bytes as in ASCII.
_ASCII_COMPATIBLE = frozenset({"utf-8", "us-ascii", "iso-8859-1"})
#: Pieces checked at once: numpy's passes release the GIL, so the scan uses two cores while the next
#: piece is read (Spark is idle until the read's options are decided).
_THREADS = 2


@dataclass(frozen=True, slots=True)
class LineScan:
    """What one pass over a CSV file found."""

    #: No quoted value can span lines (see the module docstring): Spark may cut the file.
    records_are_lines: bool
    #: The records of each split of ``split_bytes`` bytes, in file order, header left out; ``None``
    #: when not asked, when the records are not lines, or when the header would not be dropped.
    split_records: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class _Lines:
    """A piece of whole lines, in a buffer of the pass's ring, with what ``bytearray.find`` saw of it."""

    data: memoryview
    has_cr: bool
    has_quote: bool


@dataclass(frozen=True, slots=True)
class _Piece:
    lines: bool
    #: Record lines per split, or ``None`` when not counting.
    records: np.ndarray | None = None
    #: Where the piece's first record line starts in the file, if it has one.
    first_record: int | None = None


def scan_lines(
    path: str,
    *,
    separator: str,
    quote: str,
    escape: str,
    charset: str,
    split_bytes: int | None = None,
    header: bool = False,
    stop: threading.Event | None = None,
) -> LineScan:
    """Whether ``path``'s records are lines, and with ``split_bytes`` the records of each split.

    ``header``: the read drops the file's first record line (the CSV read step's ``header``).
    ``stop``: once set, the pass ends at the next piece with a "no" (nobody will read the answer).
    """
    ascii_like = charset in _ASCII_COMPATIBLE
    quotes: tuple[int, int, int | None] | None = None  # quote, separator, escape: what the proof checks
    if quote != "":
        if not ascii_like or not all(len(c) == 1 and ord(c) < 128 for c in (separator, quote)):
            return LineScan(False)
        esc = ord(escape) if len(escape) == 1 and ord(escape) < 128 and escape != quote else None
        quotes = (ord(quote), ord(separator), esc)
    elif not split_bytes or not ascii_like:
        return LineScan(True)  # quoting off: a line break always ends a record
    splits = -(-os.path.getsize(path) // split_bytes) if split_bytes else 0
    records = np.zeros(splits, np.int64) if split_bytes else None
    first_record: int | None = None
    pending: deque[Future[_Piece]] = deque()
    # Each piece is read into a buffer of this ring, not into fresh bytes objects (whose pages fault on
    # first touch, piece after piece): at most _THREADS pieces are being scanned when the next is read.
    ring = [bytearray(_CHUNK + _LINE_ROOM) for _ in range(_THREADS + 1)]
    rest = b""  # the unfinished last line of the piece before
    start = 0  # where in the file the next piece starts
    with open(path, "rb") as f, ThreadPoolExecutor(_THREADS, thread_name_prefix="csv-lines") as pool:
        for turn in itertools.count():
            if stop is not None and stop.is_set():
                for later in pending:
                    later.cancel()
                return LineScan(False)
            slot = turn % len(ring)
            if len(ring[slot]) < len(rest) + _CHUNK:  # a line longer than a piece
                ring[slot] = bytearray(len(rest) + _CHUNK)
            buffer = ring[slot]
            view = memoryview(buffer)
            view[: len(rest)] = rest
            got = f.readinto(view[len(rest) : len(rest) + _CHUNK])
            end = len(rest) + got
            cut = end
            if got:  # whole lines only; the unfinished last line waits for the next piece
                cut = max(buffer.rfind(b"\n", 0, end), buffer.rfind(b"\r", 0, end)) + 1
            rest = bytes(view[cut:end])
            has_quote = quotes is not None and buffer.find(quotes[0], 0, cut) >= 0
            piece = _Lines(view[:cut], buffer.find(_CR, 0, cut) >= 0, has_quote)
            pending.append(pool.submit(_scan_piece, piece, start, quotes, split_bytes, splits))
            start += cut
            while pending and (len(pending) > _THREADS or pending[0].done() or not got):
                done = pending.popleft().result()
                if not done.lines:
                    for later in pending:
                        later.cancel()
                    return LineScan(False)
                if records is not None and done.records is not None:
                    records += done.records
                    if first_record is None:
                        first_record = done.first_record
            if not got:
                break
    if records is None:
        return LineScan(True)
    if header and first_record is not None:
        if _split_of(first_record, split_bytes or 1) != 0:
            return LineScan(True)
        records[0] -= 1
    return LineScan(True, tuple(int(n) for n in records))


def _split_of(line_start: int, split_bytes: int) -> int:
    """The split that reads the line starting at ``line_start`` (see the module docstring)."""
    return max(line_start - 1, 0) // split_bytes


class _Scratch:
    """One thread's work arrays, reused from piece to piece.

    A numpy operation on a 4 MiB piece takes about 0.1 ms, but a fresh 4 MiB result is a new mapping
    whose every page faults on first touch, which took longer than the operation (bench/README.md).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.framed = np.empty(size + 2, np.uint8)
        self.breaks = np.empty(size + 2, np.bool_)
        self.quotes = np.empty(size + 2, np.bool_)
        self.other = np.empty(size + 2, np.bool_)

    def frame(self, piece: memoryview) -> np.ndarray:
        """``piece`` between two line feeds (it starts and ends at line ends): no bound checks at the edges."""
        framed = self.framed[: len(piece) + 2]
        framed[0] = framed[-1] = _LF
        framed[1:-1] = np.frombuffer(piece, np.uint8)
        return framed


_THREAD = threading.local()


def _scratch(size: int) -> _Scratch:
    """This thread's work arrays, large enough for a piece of ``size`` bytes."""
    scratch: _Scratch | None = getattr(_THREAD, "scratch", None)
    if scratch is None or scratch.size < size:
        scratch = _THREAD.scratch = _Scratch(max(size, _CHUNK))
    return scratch


def _scan_piece(
    piece: _Lines,
    start: int,
    quotes: tuple[int, int, int | None] | None,
    split_bytes: int | None,
    splits: int,
) -> _Piece:
    """One piece of whole lines starting at byte ``start`` of the file: the proof, and its records per split."""
    size = len(piece.data)
    if not size:
        return _Piece(True, np.zeros(splits, np.int64) if split_bytes else None)
    scratch = _scratch(size)
    framed = scratch.frame(piece.data)
    breaks = np.equal(framed, _LF, out=scratch.breaks[: framed.size])
    if piece.has_cr:
        np.logical_or(breaks, np.equal(framed, _CR, out=scratch.other[: framed.size]), out=breaks)
    if quotes is not None and piece.has_quote and not _quotes_pair_up(framed, breaks, scratch, *quotes):
        return _Piece(False)
    if not split_bytes:
        return _Piece(True)
    split = _split_of(start, split_bytes)
    if not piece.has_cr and split == _split_of(start + size - 1, split_bytes):
        # Every line of the piece starts in one split: count them, unless a line may be blank.
        line_starts = breaks[:-2]  # the byte before each byte of the piece is a line feed
        blank = np.less_equal(framed[1:-1], _BLANK, out=scratch.other[:size])
        if not np.logical_and(blank, line_starts, out=blank).any():
            counts = np.zeros(splits, np.int64)
            counts[split] = np.count_nonzero(line_starts)
            return _Piece(True, counts, start)
    starts = _record_starts(framed[1:-1], piece.has_cr) + start
    counts = np.bincount(np.maximum(starts - 1, 0) // split_bytes, minlength=splits)
    return _Piece(True, counts, int(starts[0]) if starts.size else None)


def _record_starts(buf: np.ndarray, has_cr: bool) -> np.ndarray:
    """Where in ``buf`` (whole lines, not empty) each record line starts: lines with a byte above 0x20."""
    ends = np.flatnonzero(buf == _LF)
    if has_cr:  # a CR ends a line unless an LF follows (then the LF does)
        cr = np.flatnonzero(buf == _CR)
        following = buf[np.minimum(cr + 1, buf.size - 1)]
        lone = cr[(cr + 1 == buf.size) | (following != _LF)]
        ends = np.sort(np.concatenate((ends, lone)))
    starts = np.concatenate((np.zeros(1, np.int64), ends + 1))
    if starts[-1] == buf.size:
        starts = starts[:-1]  # the piece ends with a line break: no line starts after it
    filled = buf[starts] > _BLANK
    if not filled.all():  # a line starting with a blank byte: is any of its bytes above 0x20?
        filled = np.maximum.reduceat(buf, starts) > _BLANK  # each line with its line break (<= 0x20)
    return starts[filled]


def _quotes_pair_up(
    framed: np.ndarray, breaks: np.ndarray, scratch: _Scratch, q: int, sep: int, esc: int | None
) -> bool:
    """The rule of the module docstring over whole lines (numpy: a few passes over the bytes), and no
    quote right after the escape character ``esc``. ``framed`` is the piece between two line feeds,
    ``breaks`` marks its CRs and LFs.

    If every line holds an even number of quotes, the k-th quote of the piece opens a value when k is
    even and closes it when k is odd; a line break between the two makes the count before it odd.
    """
    size = framed.size
    quote = np.equal(framed, q, out=scratch.quotes[:size])
    at = np.flatnonzero(quote)
    if at.size % 2:
        return False
    if esc is not None:
        escaped = np.equal(framed[:-1], esc, out=scratch.other[: size - 1])
        if np.logical_and(escaped, quote[1:], out=escaped).any():
            return False  # an escaped quote
    edge = np.logical_or(breaks, np.equal(framed, sep, out=scratch.other[:size]), out=scratch.other[:size])
    if not (edge[at[0::2] - 1].all() and edge[at[1::2] + 1].all()):
        return False  # a quote that neither opens a value after an edge nor closes one before an edge
    return not np.any(np.searchsorted(at, np.flatnonzero(breaks)) & 1)  # a line with an odd number of quotes
