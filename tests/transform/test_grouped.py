"""The grouped path on real Spark: per-group partials merged with new rows write exactly the full path's blocks."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odfproj.state.group_state import group_state_directory
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
#: Every mergeable aggregate, a filter, HAVING (on an alias and on an aggregate) and an expression over both.
QUERY = (
    "SELECT k, count(*) AS n, count(v) AS nv, sum(v) AS total, min(v) AS lo, max(v) + 1 AS hi, "
    "max(event_time) AS event_time FROM r WHERE v IS NULL OR v <> 3 GROUP BY k "
    "HAVING n < 5 AND coalesce(sum(v), 0) >= 0"
)
#: A global aggregate: one row, always there.
GLOBAL = "SELECT count(*) AS n, sum(v) AS total, min(v) AS lo, max(event_time) AS event_time FROM r"


def expected_rows(root_rows: list[tuple]) -> list[tuple]:
    """QUERY over the root's current rows ``(event_time, k, v)``, in plain Python."""
    groups: dict[str, list[tuple]] = {}
    for t, k, v in root_rows:
        if v is None or v != 3:
            groups.setdefault(k, []).append((t, v))
    out = []
    for k, rows in groups.items():
        values = [v for _, v in rows if v is not None]
        total = sum(values) if values else None
        if len(rows) < 5 and (total or 0) >= 0:
            hi = max(values) + 1 if values else None
            lo = min(values) if values else None
            out.append((max(t for t, _ in rows), k, len(rows), len(values), total, lo, hi))
    return sorted(out, key=repr)


def expected_global(root_rows: list[tuple]) -> list[tuple]:
    values = [v for _, _, v in root_rows if v is not None]
    latest: datetime | None = max((t for t, _, _ in root_rows), default=None)
    return [(latest, len(root_rows), sum(values) if values else None, min(values) if values else None)]


def make(ws_dir: Path, query: str = QUERY) -> Workspace:
    ws = Workspace(ws_dir)
    root = create_root(ws, "r", ROOT_SCHEMA)
    create_derivative(ws, "d", {"r": root}, (None, query))
    return ws


FIRST = [
    (A, 0, "a", 1),
    (A, 4, "a", 5),
    (A, 4, "a", 5),
    (A, 1, "b", 7),
    (A, 1, "b", 7),
    (A, 2, "c", 9),
    (A, 3, "d", 4),
    (A, 2, None, 2),
]
#: Retracts one of two identical rows, raises a's max by a correction, adds a group, empties d, and adds
#: to the group of the null key.
SECOND = [(R, 1, "b", 7), (CF, 4, "a", 5), (CT, 5, "a", 8), (A, 6, "e", 6), (R, 3, "d", 4), (A, 6, None, 5)]


def test_changed_groups_only_are_retracted_and_appended(tmp_path, engine) -> None:
    """A regression pin: SECOND touches a, b, d, e and the null key; c emits nothing; d disappears."""
    ws, full = make(tmp_path / "ws"), make(tmp_path / "full")
    assert run(ws, engine, [FIRST, SECOND]) == ["full", "grouped"]
    assert run(full, engine, [FIRST, SECOND], full_refresh=True) == ["full", "full"]
    assert block_hashes(ws) == block_hashes(full)
    second = read_records(ws.open("d")).filter(pc.field("offset") >= 5).to_pylist()  # FIRST gave 5
    got = sorted(((r["op"], r["event_time"], r["k"], r["n"], r["total"], r["lo"]) for r in second), key=repr)
    assert got == sorted(
        [
            (R, hours(2), None, 1, 2, 2),
            (A, hours(6), None, 2, 7, 2),
            (R, hours(4), "a", 3, 11, 1),
            (A, hours(5), "a", 3, 14, 1),
            (R, hours(1), "b", 2, 14, 7),
            (A, hours(1), "b", 1, 7, 7),
            (R, hours(3), "d", 1, 4, 4),
            (A, hours(6), "e", 1, 6, 6),
        ],
        key=repr,
    )
    assert current_rows(ws.open("d")) == expected_rows(current_rows(ws.open("r")))
    assert all(reproduce_all(ws, "d", engine))


def test_no_history_is_read(tmp_path, engine) -> None:
    """With the consumed input files and the derivative's own files gone, the grouped update still works."""
    ws = make(tmp_path / "ws")
    run(ws, engine, [FIRST])
    for name in ("r", "d"):
        for path in ws.open(name).layout.data_dir.iterdir():
            path.unlink()
    assert run(ws, engine, [SECOND]) == ["grouped"]
    assert [e.new_data.offset_interval.end for e in data_events(ws.open("d"))] == [4, 12]


def test_a_missing_or_stale_group_state_is_rebuilt(tmp_path, engine) -> None:
    """No state (deleted), then a state stamped with an older head (a crash after the commit): rebuilt."""
    ws = make(tmp_path / "ws")
    third = [(A, 7, "c", 2), (R, 2, "c", 9)]
    run(ws, engine, [FIRST])
    directory = group_state_directory(ws.open("d"))
    stale = tmp_path / "stale"
    directory.rename(stale)
    assert run(ws, engine, [SECOND], minute=2) == ["grouped"]
    stale_manifest = (stale / "manifest.json").read_bytes()
    version = stale / json.loads(stale_manifest)["version"]
    version.rename(directory / version.name)
    (directory / "manifest.json").write_bytes(stale_manifest)  # the state of FIRST's head
    assert run(ws, engine, [third], minute=3) == ["grouped"]
    assert current_rows(ws.open("d")) == expected_rows(current_rows(ws.open("r")))


def test_losing_the_last_row_at_an_extreme_takes_the_full_path(tmp_path, engine) -> None:
    """c's only min row withdrawn while another value remains: that update runs in full, the next is grouped."""
    ws = make(tmp_path / "ws")
    batches = [[*FIRST, (A, 5, "c", 11)], [(R, 2, "c", 9)], [(A, 8, "c", 1)]]
    assert run(ws, engine, batches) == ["full", "full", "grouped"]
    assert current_rows(ws.open("d")) == expected_rows(current_rows(ws.open("r")))


def test_a_global_aggregate_keeps_its_row(tmp_path, engine) -> None:
    ws = make(tmp_path / "ws", GLOBAL)
    everything_gone = [(R, *r[1:]) for r in FIRST]
    assert run(ws, engine, [FIRST, everything_gone, [(A, 9, "z", None)]]) == ["full", "grouped", "grouped"]
    assert current_rows(ws.open("d")) == [(hours(9), 1, None, None)]
    assert all(reproduce_all(ws, "d", engine))


@st.composite
def changes(draw) -> list[list[tuple]]:
    """Valid root records (retractions and corrections of rows that are current, nulls among the values)."""
    return valid_changes(draw, st.one_of(st.none(), st.integers(-3, 9)), (4, 10), 2)


@spark_examples(3)
@given(batches=changes(), query=st.sampled_from((QUERY, GLOBAL)))
def test_random_batches_give_full_and_one_batch_results(tmp_path_factory, engine, batches, query) -> None:
    """Hypothesis: grouped in random batches == full refresh block for block == one batch's state."""
    incremental = make(tmp_path_factory.mktemp("inc"), query)
    full = make(tmp_path_factory.mktemp("full"), query)
    one = make(tmp_path_factory.mktemp("one"), query)
    modes = run(incremental, engine, batches)
    run(full, engine, batches, full_refresh=True)
    run(one, engine, [[r for batch in batches for r in batch]])
    assert set(modes[1:]) <= {"grouped", "full"}
    assert block_hashes(incremental) == block_hashes(full)
    assert current_rows(incremental.open("d")) == current_rows(one.open("d"))
    expected = expected_rows if query == QUERY else expected_global
    assert current_rows(incremental.open("d")) == expected(current_rows(incremental.open("r")))
    assert all(reproduce_all(incremental, "d", engine))
