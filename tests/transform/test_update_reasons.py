"""Why an update took the full path, in its own words, and the record it leaves for ``plan``."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest

from odfproj.storage.update_record import read_update_record
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import update_derivative
from tests.transform.helpers import T0, A, R, add_records, create_derivative, create_root, schema_with

pytestmark = pytest.mark.spark

QUERY = "SELECT k, min(v) AS lo, sum(v) AS total, max(event_time) AS event_time FROM r GROUP BY k"
MIN_LOST = (
    "min(v): a group lost its last row at its minimum while other rows remain "
    "(its new minimum is not known without them)"
)


def test_a_grouped_update_says_which_case_made_it_full(tmp_path, engine) -> None:
    """The min of a losing its last row, then the sum of b leaving BIGINT: each update names its case."""
    ws = Workspace(tmp_path / "ws")
    root = create_root(ws, "r", schema_with(("k", pa.string()), ("v", pa.int64())))
    create_derivative(ws, "d", {"r": root}, (None, QUERY))
    batches = [
        [(A, 0, "a", 1), (A, 1, "a", 5), (A, 2, "b", 2)],
        [(R, 0, "a", 1)],
        [(A, 3, "b", 2**63 - 1)],
        [(A, 4, "c", 7)],
    ]
    outcomes = []
    for minute, batch in enumerate(batches, start=1):
        now = T0 + timedelta(minutes=minute)
        add_records(ws.open("r"), ws.root / "scratch", batch, now)
        outcomes.append(update_derivative(ws, "d", engine, now))
    assert [(o.mode, o.why_full, o.query_mode) for o in outcomes] == [
        ("full", "it had no data yet", "grouped"),
        ("full", MIN_LOST, "grouped"),
        ("full", "sum(v) of a group left the range of its type BIGINT", "grouped"),
        ("grouped", "", "grouped"),
    ]
    assert outcomes[1].reason == f"appended 2 records (full: {MIN_LOST})"
    dataset = ws.open("d")
    record = read_update_record(dataset, dataset.projection())
    assert record is not None
    assert (record.path, record.why_full, record.mode, record.hint) == ("grouped", "", "grouped", "")
    assert record.head == dataset.head().to_multibase()
