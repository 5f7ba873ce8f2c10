"""``scan_lines``: a "records are lines" must be a proof that no quoted value spans lines (no JVM needed)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odfproj.ingest import csv_lines
from odfproj.ingest.csv_lines import scan_lines


def _scan(tmp_path: Path, content: str | bytes, *, charset: str = "utf-8", escape: str = "\\") -> bool:
    path = tmp_path / "data.csv"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return scan_lines(str(path), separator=",", quote='"', escape=escape, charset=charset).records_are_lines


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("a,b\n1,2\n", True),
        ('"a","b"\n"1","2"\n', True),
        ('"a","b"\r\n"1","2"\r\n', True),
        ('"a","b,c"\n', True),
        ('"a",""\n', True),
        ('"a","b"', True),
        ("", True),
        ('"a","b\n1","2"\n', False),  # a quoted line break
        ('"a","b\rc"\n', False),  # a quoted carriage return: Spark's line reader cuts there too
        ('"a",b"c\n', False),  # a quote inside an unquoted value
        ('"a","x""y"\n', False),  # a doubled quote
        ('"a","x\\"y"\n', False),  # an escaped quote
        ('"a\\"\n"b"\n', False),  # an escaped quote where a value would close: Spark reads on
        ('"a","b', False),  # a value left open at the end
        ('x"y,"z\nw",1\n', False),  # an even count of quotes on a line is not enough
    ],
)
def test_small_files_in_every_piece_size(tmp_path: Path, monkeypatch, content: str, expected: bool) -> None:
    for size in (1, 2, 3, 5, 1 << 20):  # quotes and line breaks on every side of a piece boundary
        monkeypatch.setattr(csv_lines, "_CHUNK", size)
        for room in (0, 1 << 16):  # no room for a line carried over: each piece gets a larger buffer
            monkeypatch.setattr(csv_lines, "_LINE_ROOM", room)
            assert _scan(tmp_path, content) is expected, (size, room)


def test_quoting_off_and_other_charsets(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text('a"\nb\n')
    assert scan_lines(str(path), separator=",", quote="", escape="\\", charset="utf-8").records_are_lines
    assert not _scan(tmp_path, '"a"\n'.encode("utf-16"), charset="utf-16")  # quote is not one byte there


VALUES = st.text(alphabet=st.sampled_from(list('ab,"\n\r\\ é')), max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.lists(VALUES, min_size=1, max_size=3), min_size=1, max_size=5),
    quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]),
    terminator=st.sampled_from(["\n", "\r\n"]),
    size=st.sampled_from([1, 3, 7, 1 << 20]),
)
def test_a_yes_means_no_value_holds_a_line_break(rows, quoting, terminator, size, tmp_path_factory) -> None:
    out = io.StringIO()
    csv.writer(out, quoting=quoting, lineterminator=terminator).writerows(rows)
    tmp_path = tmp_path_factory.mktemp("csv")
    csv_lines._CHUNK, old = size, csv_lines._CHUNK
    try:
        yes = _scan(tmp_path, out.getvalue(), escape="")
    finally:
        csv_lines._CHUNK = old
    parsed = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    spans = any("\n" in v or "\r" in v for row in parsed for v in row)
    if yes:
        assert not spans
    if not any(c in v for row in rows for v in row for c in '"\n\r'):
        assert yes  # plain values, quoted or not: the scan says yes


def _records_per_split(data: bytes, split: int, header: bool) -> tuple[int, ...] | None:
    """The rule of ``csv_lines``' docstring, byte by byte: a line starting at ``p`` is split
    ``max(p - 1, 0) // split``'s; blank lines are no records; the header is split 0's first record."""
    counts = [0] * -(-len(data) // split)
    starts, p = [], 0
    while p < len(data):
        end = p
        while end < len(data) and data[end] not in b"\r\n":
            end += 1
        if any(b > 0x20 for b in data[p:end]):
            starts.append(p)
        p = end + (2 if data[end : end + 2] == b"\r\n" else 1)
    for start in starts:
        counts[max(start - 1, 0) // split] += 1
    if header and starts:
        if max(starts[0] - 1, 0) // split:
            return None
        counts[0] -= 1
    return tuple(counts)


LINES = st.lists(
    st.tuples(
        st.sampled_from(["", " ", "\t ", " 1,a", "2,bb", '"3","c"', "x" * 9]),
        st.sampled_from(["\n", "\r\n", "\r"]),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(
    lines=LINES,
    last_break=st.booleans(),
    header=st.booleans(),
    split=st.integers(min_value=1, max_value=40),
    size=st.sampled_from([1, 2, 5, 1 << 20]),
)
def test_records_are_counted_per_split_as_the_rule_says(
    lines, last_break, header, split, size, tmp_path_factory
) -> None:
    data = "".join(body + end for body, end in lines)
    if not last_break:
        data = data.rstrip("\r\n")
    path = tmp_path_factory.mktemp("csv") / "data.csv"
    path.write_bytes(data.encode())
    csv_lines._CHUNK, old = size, csv_lines._CHUNK
    try:
        scan = csv_lines.scan_lines(
            str(path),
            separator=",",
            quote='"',
            escape="\\",
            charset="utf-8",
            split_bytes=split,
            header=header,
        )
    finally:
        csv_lines._CHUNK = old
    assert scan.records_are_lines
    assert scan.split_records == _records_per_split(data.encode(), split, header)


def test_no_count_without_a_split_size_or_when_records_span_lines(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text('a,b\n1,"x\ny"\n')
    assert csv_lines.scan_lines(
        str(path), separator=",", quote='"', escape="\\", charset="utf-8", split_bytes=4
    ) == csv_lines.LineScan(False)
    path.write_text("a,b\n1,2\n")
    assert (
        csv_lines.scan_lines(str(path), separator=",", quote='"', escape="\\", charset="utf-8").split_records
        is None
    )
    # Quoting off: no proof needed, but the records are still counted.
    assert csv_lines.scan_lines(
        str(path), separator=",", quote="", escape="\\", charset="utf-8", split_bytes=4
    ).split_records == (2, 0)  # a line starting where a split starts is the split before's


def test_a_stopped_pass_ends_with_a_no_before_reading_on(tmp_path: Path, monkeypatch) -> None:
    """The pass started ahead of the session (``ingest.read.scan_ahead``) stops when nobody will read it."""
    import threading

    path = tmp_path / "data.csv"
    path.write_text("a,b\n" + "1,2\n" * 1000)
    read: list[int] = []
    real_open = open

    class Counting:
        def __init__(self, f) -> None:
            self._f = f

        def readinto(self, buffer) -> int:
            read.append(len(buffer))
            return self._f.readinto(buffer)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self._f.close()

    monkeypatch.setattr(csv_lines, "_CHUNK", 16)
    monkeypatch.setattr(csv_lines, "open", lambda *a, **k: Counting(real_open(*a, **k)), raising=False)
    stop = threading.Event()
    assert csv_lines.scan_lines(
        str(path), separator=",", quote='"', escape="\\", charset="utf-8", split_bytes=64, stop=stop
    ).records_are_lines
    whole = len(read)
    read.clear()
    stop.set()
    assert csv_lines.scan_lines(
        str(path), separator=",", quote='"', escape="\\", charset="utf-8", split_bytes=64, stop=stop
    ) == csv_lines.LineScan(False)
    assert whole > 200 and read == []
