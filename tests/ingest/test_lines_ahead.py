"""The pass over a CSV file started while the session starts (``ingest.read.scan_ahead``), no JVM needed.

Its answer is taken only for the file and split size the read then asks for; otherwise the read makes
its own pass, so a prediction that missed (or a pass that failed) costs time, never a wrong count.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

from odfproj.ingest import read
from odfproj.ingest.csv_lines import scan_lines
from odfproj.odf import model

_CSV = model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING"))


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "rows.csv"
    path.write_text("id,name\n" + "".join(f"{i},name-{i}\n" for i in range(500)))
    return path


def test_the_answer_is_the_reads_own_pass_for_the_same_file_and_split(tmp_path: Path) -> None:
    path = _file(tmp_path)
    ahead = read.scan_ahead(_CSV, path, lambda size: size // 3)
    assert ahead is not None and ahead.path == str(path.absolute())
    split = path.stat().st_size // 3
    own = scan_lines(
        str(path), separator=",", quote='"', escape="\\", charset="utf-8", split_bytes=split, header=True
    )
    assert own.split_records is not None and len(own.split_records) >= 3
    assert ahead.take(str(path.absolute()), split) == own


def test_another_split_or_file_is_not_taken_and_stops_the_pass(tmp_path: Path) -> None:
    path = _file(tmp_path)
    for asked in ((str(path.absolute()), 100), (str(tmp_path / "other.csv"), path.stat().st_size // 3)):
        ahead = read.scan_ahead(_CSV, path, lambda size: size // 3)
        assert ahead is not None
        assert ahead.take(*asked) is None
        assert ahead.stop.is_set()


def test_a_failed_pass_is_left_to_the_reads_own(tmp_path: Path) -> None:
    """The read's own pass, made again, raises the error where the ingest names the file and dataset."""
    failed = read.LinesAhead(str(tmp_path / "rows.csv"), 64, Future(), threading.Event())
    failed.answer.set_exception(OSError("gone"))
    assert failed.take(failed.path, 64) is None


def test_no_pass_ahead_where_the_split_size_is_not_known_or_the_read_is_not_csv(tmp_path: Path) -> None:
    path = _file(tmp_path)
    assert read.scan_ahead(_CSV, path, lambda size: None) is None  # the session is up, or not local
    assert read.scan_ahead(model.ReadStepNdJson(), path, lambda size: 64) is None
    assert read.scan_ahead(_CSV, tmp_path / "missing.csv", lambda size: 64) is None
    gz = tmp_path / "rows.csv.gz"
    gz.write_bytes(b"")
    assert read.scan_ahead(_CSV, gz, lambda size: 64) is None  # read through a codec: no splits
