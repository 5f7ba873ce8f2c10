"""A grouped aggregation over a join on real Spark: the join's delta merged into per-group partials writes
exactly the full path's blocks."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odfproj.storage.workspace import Workspace
from odfproj.transform.reproduce import reproduce_all
from tests.transform import test_joins as joins
from tests.transform.helpers import (
    CF,
    CT,
    A,
    R,
    create_derivative,
    create_root,
    current_rows,
    data_events,
    hours,
    read_records,
    schema_with,
    spark_examples,
)
from tests.transform.test_joins import Round, block_hashes, modes, root_changes, run

pytestmark = pytest.mark.spark

GROUPED_JOIN = "grouped over a join"
ROOT_SCHEMA = schema_with(("k", pa.string()), ("v", pa.int64()))
#: Per shape: the roots, and the query's steps. Each groups the rows of ``test_joins``'s join of that shape.
SHAPES: dict[str, tuple[str, tuple[tuple[str | None, str], ...]]] = {
    "inner": (
        "ed",
        (
            (
                None,
                "SELECT e.k, count(*) AS n, sum(e.v) AS total, min(d.v) AS lo, max(d.v) AS hi, "
                "max(e.event_time) AS event_time FROM e JOIN d ON e.k = d.k GROUP BY e.k",
            ),
        ),
    ),
    "left": (
        "ed",
        (
            (
                None,
                "SELECT e.k, count(*) AS n, count(d.v) AS matched, min(d.v) AS lo, "
                "max(e.event_time) AS event_time FROM e LEFT JOIN d ON e.k = d.k AND d.v > 2 "
                "GROUP BY e.k HAVING n < 4",
            ),
        ),
    ),
    "three-way": (
        "edf",
        (
            (
                None,
                "SELECT count(*) AS n, sum(e.v * g.v) AS total, max(d.v) AS hi, max(e.event_time) AS event_time "
                "FROM e JOIN d ON e.k = d.k JOIN (SELECT k, v FROM f WHERE v <> 4) g ON g.k = d.k",
            ),
        ),
    ),
    "steps": (
        "ed",
        (
            ("j", "SELECT e.event_time, e.k, e.v, d.v AS dv FROM e JOIN d ON e.k = d.k"),
            (
                None,
                "SELECT dv, count(*) AS n, sum(v) AS total, max(event_time) AS event_time FROM j GROUP BY dv",
            ),
        ),
    ),
}
#: The join of ``test_joins`` each shape aggregates.
JOINED = {"inner": "inner", "left": "left", "three-way": "three-way", "steps": "inner"}


def _least(values: list) -> object:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _most(values: list) -> object:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def expected_rows(shape: str, rows: dict[str, list[tuple]]) -> list[tuple]:
    """The query of ``shape`` over the roots' current rows, in plain Python (``event_time`` first)."""
    joined = joins.expected_rows(JOINED[shape], rows)
    if shape == "three-way":  # a global aggregate: one row, always
        total = [v * fv for _, _, v, _, fv in joined]
        hi = _most([dv for _, _, _, dv, _ in joined])
        return [(_most([t for t, *_ in joined]), len(joined), sum(total) if total else None, hi)]
    groups: dict[object, list[tuple]] = {}
    for row in joined:
        groups.setdefault(row[3] if shape == "steps" else row[1], []).append(row)
    out = []
    for key, members in groups.items():
        latest = max(t for t, *_ in members)
        values = [v for _, _, v, _ in members]
        dims = [dv for _, _, _, dv in members]
        if shape == "inner":
            out.append((latest, key, len(members), sum(values), _least(dims), _most(dims)))
        elif shape == "left" and len(members) < 4:
            out.append((latest, key, len(members), sum(dv is not None for dv in dims), _least(dims)))
        elif shape == "steps":
            out.append((latest, key, len(members), sum(values)))
    return sorted(out, key=repr)


def make(ws_dir: Path, shape: str) -> Workspace:
    ws = Workspace(ws_dir)
    roots = {alias: create_root(ws, alias, ROOT_SCHEMA) for alias in SHAPES[shape][0]}
    create_derivative(ws, "j", roots, *SHAPES[shape][1])
    return ws


def roots_rows(ws: Workspace, shape: str) -> dict[str, list[tuple]]:
    return {alias: current_rows(ws.open(alias)) for alias in SHAPES[shape][0]}


FACTS = [(A, 0, "b", 2), (A, 1, "b", 3), (A, 2, "c", 9)]
DIMS = [(A, 0, "b", 20), (A, 0, "b", 21), (A, 0, "a", 5)]
#: A fact of the new group ``a`` arrives while ``a``'s dimension row is corrected (5 -> 7): the join's
#: two terms add and withdraw the row (a, 5), which must not reach ``a``'s min; a fact of ``b`` is
#: retracted and its dimension loses a row, another is corrected.
MORE_FACTS = [(A, 3, "a", 4), (R, 0, "b", 2), (CF, 1, "b", 3), (CT, 4, "b", 6)]
MORE_DIMS = [(CF, 0, "a", 5), (CT, 1, "a", 7), (R, 0, "b", 20)]


def test_only_the_touched_groups_change_and_the_block_is_the_full_one(tmp_path, engine) -> None:
    """A regression pin: both sides change in one update; the new group a's min is 7, not the 5 withdrawn."""
    incremental, full = make(tmp_path / "inc", "inner"), make(tmp_path / "full", "inner")
    rounds: list[Round] = [{"e": FACTS, "d": DIMS}, {"e": MORE_FACTS, "d": MORE_DIMS}]
    assert modes(run(incremental, engine, rounds)) == ["full", GROUPED_JOIN]
    assert modes(run(full, engine, rounds, full_refresh=True)) == ["full", "full"]
    assert block_hashes(incremental) == block_hashes(full)
    second = (
        read_records(incremental.open("j")).filter(pc.field("offset") >= 1).to_pylist()
    )  # the first gave 1
    got = sorted(
        ((r["op"], r["event_time"], r["k"], r["n"], r["total"], r["lo"], r["hi"]) for r in second), key=repr
    )
    assert got == sorted(
        [(R, hours(1), "b", 4, 10, 20, 21), (A, hours(4), "b", 1, 6, 21, 21), (A, hours(3), "a", 1, 4, 7, 7)],
        key=repr,
    )
    assert current_rows(incremental.open("j")) == expected_rows("inner", roots_rows(incremental, "inner"))
    assert all(reproduce_all(incremental, "j", engine))


def test_no_history_of_the_growing_input_nor_the_derivative_is_read(tmp_path, engine) -> None:
    """With the facts' consumed files and the derivative's own files gone, a facts-only update still works."""
    ws = make(tmp_path / "ws", "inner")
    run(ws, engine, [{"e": FACTS, "d": DIMS}])
    for name in ("e", "j"):
        for path in ws.open(name).layout.data_dir.iterdir():
            path.unlink()
    assert modes(run(ws, engine, [{"e": [(A, 5, "b", 1)]}])) == [GROUPED_JOIN]
    assert [e.new_data.offset_interval.end for e in data_events(ws.open("j"))] == [0, 2]


def test_a_change_on_the_optional_side_of_a_left_join_takes_the_full_path(tmp_path, engine) -> None:
    ws = make(tmp_path / "ws", "left")
    outcomes = run(ws, engine, [{"e": FACTS, "d": DIMS}, {"e": MORE_FACTS}, {"d": MORE_DIMS}])
    assert modes(outcomes) == ["full", GROUPED_JOIN, "full"]
    assert outcomes[2].reason.endswith(
        "(full: input d on the optional side of an outer join has new records)"
    )
    assert current_rows(ws.open("j")) == expected_rows("left", roots_rows(ws, "left"))
    assert all(reproduce_all(ws, "j", engine))


@st.composite
def scenarios(draw) -> tuple[str, list[Round]]:
    shape = draw(st.sampled_from(sorted(SHAPES)))
    rounds = draw(st.integers(2, 3))
    per_root = {alias: draw(root_changes(rounds)) for alias in SHAPES[shape][0]}
    return shape, [{alias: per_root[alias][i] for alias in per_root} for i in range(rounds)]


@spark_examples(3)
@given(drawn=scenarios())
def test_random_batches_give_full_and_one_batch_results(tmp_path_factory, engine, drawn) -> None:
    """Hypothesis: grouped over joins in random batch splits == full refresh block for block == one batch."""
    shape, rounds = drawn
    aliases = SHAPES[shape][0]
    incremental = make(tmp_path_factory.mktemp("inc"), shape)
    full = make(tmp_path_factory.mktemp("full"), shape)
    one = make(tmp_path_factory.mktemp("one"), shape)
    outcomes = run(incremental, engine, rounds)
    run(full, engine, rounds, full_refresh=True)
    run(one, engine, [{alias: list(itertools.chain(*(r[alias] for r in rounds))) for alias in aliases}])
    assert block_hashes(incremental) == block_hashes(full)
    assert current_rows(incremental.open("j")) == current_rows(one.open("j"))
    assert current_rows(incremental.open("j")) == expected_rows(shape, roots_rows(incremental, shape))
    assert all(reproduce_all(incremental, "j", engine))
    has_data = False
    for outcome in outcomes:  # once the derivative has data, an update with new records is incremental
        if has_data and outcome.mode:
            assert outcome.mode == GROUPED_JOIN or outcome.why_full, outcome
        has_data = has_data or outcome.records > 0
