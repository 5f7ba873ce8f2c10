"""The join path on real Spark: only new records joined with the other inputs' states, the full path's blocks."""

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
from odfproj.transform.coordinator import TransformOutcome, update_derivative
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
#: Every root: ``e`` the facts, ``d`` and ``f`` dimension-like (any of them may retract and correct).
ROOT_SCHEMA = schema_with(("k", pa.string()), ("v", pa.int64()))
QUERIES = {
    "inner": "SELECT e.event_time, e.k, e.v, d.v AS dv FROM e JOIN d ON e.k = d.k",
    "left": "SELECT e.event_time, e.k, e.v, d.v AS dv FROM e LEFT JOIN d ON e.k = d.k AND d.v > 2",
    "three-way": "SELECT e.event_time, e.k, e.v, d.v AS dv, g.v AS fv FROM e JOIN d ON e.k = d.k "
    "JOIN (SELECT k, v FROM f WHERE v <> 4) g ON g.k = d.k",
}
ROOTS = {"inner": "ed", "left": "ed", "three-way": "edf"}


def expected_rows(shape: str, rows: dict[str, list[tuple]]) -> list[tuple]:
    """The query of ``shape`` over the roots' current rows ``(event_time, k, v)``, in plain Python."""
    out = []
    for t, k, v in rows["e"]:
        matches = [dv for _, dk, dv in rows["d"] if dk == k and (shape != "left" or dv > 2)]
        if shape == "three-way":
            out += [(t, k, v, dv, fv) for dv in matches for _, fk, fv in rows["f"] if fk == k and fv != 4]
        else:
            out += [(t, k, v, dv) for dv in matches] or ([(t, k, v, None)] if shape == "left" else [])
    return sorted(out, key=repr)


def make(ws_dir: Path, shape: str) -> Workspace:
    ws = Workspace(ws_dir)
    roots = {alias: create_root(ws, alias, ROOT_SCHEMA) for alias in ROOTS[shape]}
    create_derivative(ws, "j", roots, (None, QUERIES[shape]))
    return ws


#: One round: the records each root gets (roots left out get none), then one update of the derivative.
Round = dict[str, list[tuple]]


def run(ws: Workspace, engine, rounds: list[Round], *, full_refresh: bool = False) -> list[TransformOutcome]:
    outcomes = []
    for n, batches in enumerate(rounds, start=1):
        now = T0 + timedelta(minutes=n)
        for alias, records in batches.items():
            if records:
                add_records(ws.open(alias), ws.root / "scratch", records, now)
        outcomes.append(update_derivative(ws, "j", engine, now, full_refresh=full_refresh))
    return outcomes


def modes(outcomes: list[TransformOutcome]) -> list[str]:
    return [o.mode for o in outcomes]


def block_hashes(ws: Workspace) -> list[tuple]:
    """Every ExecuteTransform's data (logical hash, offsets) or None: what must not depend on the path."""
    return [
        (e.new_data.logical_hash, e.new_data.offset_interval) if e.new_data is not None else None
        for e in data_events(ws.open("j"))
    ]


def roots_rows(ws: Workspace, shape: str) -> dict[str, list[tuple]]:
    return {alias: current_rows(ws.open(alias)) for alias in ROOTS[shape]}


FACTS = [(A, 0, "a", 1), (A, 1, "b", 7), (A, 1, "b", 7), (A, 2, "c", 9)]
DIMS = [(A, 0, "a", 10), (A, 0, "b", 20), (A, 0, "b", 21)]
#: New facts that retract one of two identical rows and correct another (-C carries the old row).
MORE_FACTS = [(R, 1, "b", 7), (CF, 0, "a", 1), (CT, 3, "c", 5), (A, 4, "a", 6)]
#: A dimension change: one row corrected (b 20 -> a 30), one retracted, one added.
MORE_DIMS = [(CF, 0, "b", 20), (CT, 5, "a", 30), (R, 0, "a", 10), (A, 6, "c", 40)]


def test_new_facts_are_joined_with_the_dimension_state(tmp_path, engine) -> None:
    """A regression pin: the join block of MORE_FACTS retracts and appends exactly the joined rows."""
    ws = make(tmp_path / "ws", "inner")
    outcomes = run(ws, engine, [{"e": FACTS, "d": DIMS}, {"e": MORE_FACTS}])
    assert modes(outcomes) == ["full", "join"]
    second = read_records(ws.open("j")).filter(pc.field("offset") >= 5).to_pylist()  # the first gave 5
    got = sorted(((r["op"], r["event_time"], r["k"], r["v"], r["dv"]) for r in second), key=repr)
    assert got == sorted(
        [
            (R, hours(1), "b", 7, 20),
            (R, hours(1), "b", 7, 21),
            (R, hours(0), "a", 1, 10),
            (A, hours(4), "a", 6, 10),
        ],
        key=repr,
    )
    assert current_rows(ws.open("j")) == expected_rows("inner", roots_rows(ws, "inner"))
    assert all(reproduce_all(ws, "j", engine))


def test_both_sides_changing_telescope_to_the_full_result(tmp_path, engine) -> None:
    """New facts and a changed dimension in one update: both terms, no row counted twice."""
    incremental, full = make(tmp_path / "inc", "inner"), make(tmp_path / "full", "inner")
    rounds = [{"e": FACTS, "d": DIMS}, {"e": MORE_FACTS, "d": MORE_DIMS}]
    assert modes(run(incremental, engine, rounds)) == ["full", "join"]
    assert modes(run(full, engine, rounds, full_refresh=True)) == ["full", "full"]
    assert block_hashes(incremental) == block_hashes(full)
    assert current_rows(incremental.open("j")) == expected_rows("inner", roots_rows(incremental, "inner"))


def test_no_history_of_the_growing_input_nor_the_derivative_is_read(tmp_path, engine) -> None:
    """With the facts' consumed files and the derivative's own files gone, a facts-only update still works."""
    ws = make(tmp_path / "ws", "inner")
    run(ws, engine, [{"e": FACTS, "d": DIMS}])
    for name in ("e", "j"):
        for path in ws.open(name).layout.data_dir.iterdir():
            path.unlink()
    assert modes(run(ws, engine, [{"e": MORE_FACTS}])) == ["join"]
    assert [e.new_data.offset_interval.end for e in data_events(ws.open("j"))] == [4, 8]


def test_a_left_join_is_incremental_only_in_its_preserved_side(tmp_path, engine) -> None:
    ws = make(tmp_path / "ws", "left")
    outcomes = run(ws, engine, [{"e": FACTS, "d": DIMS}, {"e": MORE_FACTS}, {"d": MORE_DIMS}])
    assert modes(outcomes) == ["full", "join", "full"]
    assert outcomes[2].reason.endswith(
        "(full: input d on the optional side of an outer join has new records)"
    )
    assert current_rows(ws.open("j")) == expected_rows("left", roots_rows(ws, "left"))
    assert all(reproduce_all(ws, "j", engine))


@st.composite
def root_changes(draw, rounds: int) -> list[list[tuple]]:
    """Valid records of one root split over ``rounds``: a few rows, then changes that are mostly
    retractions and corrections of current rows (what a join path can get wrong); keys ``a``/``b`` so
    that rows of the roots meet often."""
    current: list[tuple] = []
    groups: list[list[tuple]] = []
    kinds = ["add"] * draw(st.integers(1, 3))
    kinds += draw(st.lists(st.sampled_from(("add", "retract", "correct", "correct")), min_size=1, max_size=4))
    for kind in kinds:
        new = (draw(st.integers(0, 5)), draw(st.sampled_from("ab")), draw(st.integers(0, 6)))
        if kind == "add" or not current:
            current.append(new)
            groups.append([(A, *new)])
            continue
        old = current.pop(draw(st.integers(0, len(current) - 1)))
        if kind == "retract":
            groups.append([(R, *old)])
        else:  # a -C/+C pair stays in one batch
            current.append(new)
            groups.append([(CF, *old), (CT, *new)])
    # Which round each group lands in, in order: a root may get nothing in some rounds.
    where = sorted(draw(st.lists(st.integers(0, rounds - 1), min_size=len(groups), max_size=len(groups))))
    return [[r for g, n in zip(groups, where, strict=True) if n == i for r in g] for i in range(rounds)]


@st.composite
def scenarios(draw) -> tuple[str, list[Round]]:
    shape = draw(st.sampled_from(sorted(QUERIES)))
    rounds = draw(st.integers(2, 3))
    per_root = {alias: draw(root_changes(rounds)) for alias in ROOTS[shape]}
    return shape, [{alias: per_root[alias][i] for alias in per_root} for i in range(rounds)]


@spark_examples(3)
@given(drawn=scenarios())
def test_random_batches_give_full_and_one_batch_results(tmp_path_factory, engine, drawn) -> None:
    """Hypothesis: joins in random batch splits on every side == full refresh block for block == one batch."""
    shape, rounds = drawn
    incremental = make(tmp_path_factory.mktemp("inc"), shape)
    full = make(tmp_path_factory.mktemp("full"), shape)
    one = make(tmp_path_factory.mktemp("one"), shape)
    outcomes = run(incremental, engine, rounds)
    run(full, engine, rounds, full_refresh=True)
    run(one, engine, [{alias: list(itertools.chain(*(r[alias] for r in rounds))) for alias in ROOTS[shape]}])
    assert block_hashes(incremental) == block_hashes(full)
    assert current_rows(incremental.open("j")) == current_rows(one.open("j"))
    assert current_rows(incremental.open("j")) == expected_rows(shape, roots_rows(incremental, shape))
    assert all(reproduce_all(incremental, "j", engine))
    has_data = False
    for outcome in outcomes:  # once the derivative has data, every update with new records is a join one
        if has_data and outcome.mode:
            assert outcome.mode == "join" or outcome.why_full, outcome
        has_data = has_data or outcome.records > 0
