"""The stateless path on real Spark: it reads only new records and writes exactly the full path's blocks."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odfproj.storage.workspace import Workspace
from odfproj.transform.reproduce import reproduce_all
from tests.transform.helpers import (
    CF,
    CT,
    A,
    R,
    block_hashes,
    create_derivative,
    create_root,
    current_rows,
    data_events,
    hours,
    read_records,
    schema_with,
    spark_examples,
    valid_changes,
)
from tests.transform.helpers import update_after_each as run

pytestmark = pytest.mark.spark

ROOT_SCHEMA = schema_with(("k", pa.string()), ("v", pa.int64()))
#: Stateless: two filtered projections of the same input, UNION ALL (rows can occur twice).
QUERY = (
    "SELECT event_time, k, v * 2 AS w FROM r WHERE v % 3 <> 0 "
    "UNION ALL SELECT event_time, upper(k) AS k, v AS w FROM r WHERE v > 5"
)


def expected_rows(root_rows: list[tuple]) -> list[tuple]:
    """QUERY over the root's current rows ``(event_time, k, v)``, in plain Python."""
    out = [(t, k, v * 2) for t, k, v in root_rows if v % 3 != 0]
    out += [(t, k.upper(), v) for t, k, v in root_rows if v > 5]
    return sorted(out, key=repr)


def make(ws_dir: Path, query: str = QUERY) -> Workspace:
    ws = Workspace(ws_dir)
    root = create_root(ws, "r", ROOT_SCHEMA)
    create_derivative(ws, "d", {"r": root}, (None, query))
    return ws


FIRST = [(A, 0, "a", 1), (A, 1, "b", 7), (A, 1, "b", 7), (A, 2, "c", 9), (A, 3, "d", 4)]
#: Retracts one of two identical rows, corrects another (-C carries the old row), adds one.
SECOND = [(R, 1, "b", 7), (CF, 0, "a", 1), (CT, 4, "a", 8), (A, 5, "e", 6)]


def test_retractions_and_corrections_pass_through_as_retractions(tmp_path, engine) -> None:
    """A regression pin: the stateless block of SECOND retracts exactly the query rows it must."""
    ws = make(tmp_path / "ws")
    assert run(ws, engine, [FIRST, SECOND]) == ["full", "stateless"]
    second = read_records(ws.open("d")).filter(pc.field("offset") >= 7).to_pylist()  # FIRST gave 7
    got = sorted(((r["op"], r["event_time"], r["k"], r["w"]) for r in second), key=repr)
    assert got == sorted(
        [
            (R, hours(1), "b", 14),
            (R, hours(1), "B", 7),
            (R, hours(0), "a", 2),
            (A, hours(4), "a", 16),
            (A, hours(4), "A", 8),
            (A, hours(5), "E", 6),
        ],
        key=repr,
    )
    root_rows = [
        (hours(1), "b", 7),
        (hours(2), "c", 9),
        (hours(3), "d", 4),
        (hours(4), "a", 8),
        (hours(5), "e", 6),
    ]
    assert current_rows(ws.open("d")) == expected_rows(root_rows)
    assert all(reproduce_all(ws, "d", engine))


def test_full_refresh_writes_the_same_blocks(tmp_path, engine) -> None:
    incremental, full = make(tmp_path / "inc"), make(tmp_path / "full")
    assert run(incremental, engine, [FIRST, SECOND]) == ["full", "stateless"]
    assert run(full, engine, [FIRST, SECOND], full_refresh=True) == ["full", "full"]
    assert block_hashes(incremental) == block_hashes(full)


def test_no_history_is_read(tmp_path, engine) -> None:
    """With the consumed input files and the derivative's own files gone, the stateless update still works."""
    ws = make(tmp_path / "ws")
    run(ws, engine, [FIRST])
    for name in ("r", "d"):
        for path in ws.open(name).layout.data_dir.iterdir():
            path.unlink()
    assert run(ws, engine, [SECOND]) == ["stateless"]
    assert [e.new_data.offset_interval.end for e in data_events(ws.open("d"))] == [6, 12]


def test_queries_that_are_not_stateless_take_the_full_path(tmp_path, engine) -> None:
    # A window over a grouped query: full (a plain GROUP BY has a path of its own, test_grouped.py).
    grouped = (
        "SELECT max(event_time) AS event_time, k, sum(v) AS total, "
        "rank() OVER (ORDER BY sum(v)) AS r FROM r GROUP BY k"
    )
    ws = make(tmp_path / "ws", grouped)
    assert run(ws, engine, [FIRST, SECOND]) == ["full", "full"]
    assert sorted(r[1:] for r in current_rows(ws.open("d"))) == [
        ("a", 8, 4),
        ("b", 7, 3),
        ("c", 9, 5),
        ("d", 4, 1),
        ("e", 6, 2),
    ]


@st.composite
def changes(draw) -> list[list[tuple]]:
    """Valid root records (retractions and corrections of rows that are current) in random batches."""
    return valid_changes(draw, st.integers(0, 9), (3, 10), 2)


@spark_examples(3)
@given(batches=changes())
def test_random_batches_give_full_and_one_batch_results(tmp_path_factory, engine, batches) -> None:
    """Hypothesis: stateless in random batches == full refresh block for block == one batch's state."""
    records = [r for batch in batches for r in batch]
    incremental = make(tmp_path_factory.mktemp("inc"))
    full = make(tmp_path_factory.mktemp("full"))
    one = make(tmp_path_factory.mktemp("one"))
    run(incremental, engine, batches)
    run(full, engine, batches, full_refresh=True)
    run(one, engine, [records])
    assert block_hashes(incremental) == block_hashes(full)
    assert current_rows(incremental.open("d")) == current_rows(one.open("d"))
    assert current_rows(incremental.open("d")) == expected_rows(current_rows(incremental.open("r")))
    assert all(reproduce_all(incremental, "d", engine))
