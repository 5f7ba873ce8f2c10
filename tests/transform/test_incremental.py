"""The stateless path on real Spark: it reads only new records and writes exactly the full path's blocks."""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import update_derivative
from odfproj.transform.reproduce import reproduce_all
from tests.transform.helpers import (
    T0,
    add_records,
    create_derivative,
    create_root,
    current_rows,
    data_events,
    hours,
    read_records,
    schema_with,
    spark_examples,
)

pytestmark = pytest.mark.spark

A, R, CF, CT = 0, 1, 2, 3
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


def run(ws: Workspace, engine, batches: list[list[tuple]], *, full_refresh: bool = False) -> list[str]:
    """Commit each batch to the root and update the derivative after it; the modes the updates took."""
    modes = []
    for n, batch in enumerate(batches, start=1):
        now = T0 + timedelta(minutes=n)
        add_records(ws.open("r"), ws.root / "scratch", batch, now)
        modes.append(update_derivative(ws, "d", engine, now, full_refresh=full_refresh).mode)
    return modes


def block_hashes(ws: Workspace) -> list[tuple]:
    """Every ExecuteTransform's data (logical hash, offsets) or None: what must not depend on the path."""
    return [
        (e.new_data.logical_hash, e.new_data.offset_interval) if e.new_data is not None else None
        for e in data_events(ws.open("d"))
    ]


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
    grouped = "SELECT max(event_time) AS event_time, k, sum(v) AS total FROM r GROUP BY k"
    ws = make(tmp_path / "ws", grouped)
    assert run(ws, engine, [FIRST, SECOND]) == ["full", "full"]
    assert sorted(r[1:] for r in current_rows(ws.open("d"))) == [
        ("a", 8),
        ("b", 7),
        ("c", 9),
        ("d", 4),
        ("e", 6),
    ]


@st.composite
def changes(draw) -> tuple[list[tuple], list[int]]:
    """Valid root records (retractions and corrections of rows that are current) and where batches end."""
    current: list[tuple] = []
    groups: list[list[tuple]] = []
    for _ in range(draw(st.integers(3, 10))):
        kind = draw(st.sampled_from(("add", "add", "retract", "correct"))) if current else "add"
        new = (draw(st.integers(0, 5)), draw(st.sampled_from("abc")), draw(st.integers(0, 9)))
        if kind == "add":
            current.append(new)
            groups.append([(A, *new)])
        else:
            old = current.pop(draw(st.integers(0, len(current) - 1)))
            if kind == "retract":
                groups.append([(R, *old)])
            else:  # a -C/+C pair stays in one batch
                current.append(new)
                groups.append([(CF, *old), (CT, *new)])
    cuts = draw(st.lists(st.integers(1, len(groups) - 1), max_size=2, unique=True)) if len(groups) > 1 else []
    bounds = [0, *sorted(cuts), len(groups)]
    batches = [[r for g in groups[a:b] for r in g] for a, b in itertools.pairwise(bounds)]
    return [r for g in groups for r in g], [len(b) for b in batches]


@spark_examples(3)
@given(drawn=changes())
def test_random_batches_give_full_and_one_batch_results(tmp_path_factory, engine, drawn) -> None:
    """Hypothesis: stateless in random batches == full refresh block for block == one batch's state."""
    records, sizes = drawn
    batches, start = [], 0
    for size in sizes:
        batches.append(records[start : start + size])
        start += size
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
