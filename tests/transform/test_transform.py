"""Derivative transforms on real Spark: batch invariance, idle runs, reproducibility."""

from __future__ import annotations

import itertools
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.errors import InvalidQueryError
from odfproj.odf import model
from odfproj.storage.objects import logical_hash, physical_hash
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import plan_inputs, update_derivative
from odfproj.transform.reproduce import reproduce_all, reproduce_transform
from tests.transform.helpers import (
    T0,
    add_records,
    create_derivative,
    create_root,
    current_rows,
    hours,
    schema_with,
    set_transform,
)

pytestmark = pytest.mark.spark

ORDERS_SCHEMA = schema_with(("city", pa.string()), ("amount", pa.int64()))
CITIES_SCHEMA = schema_with(("city", pa.string()), ("country", pa.string()))
A, R, CF, CT = 0, 1, 2, 3

#: The source changes in the order they happened: (root, records); a -C/+C pair stays in one change.
CHANGES: list[tuple[str, list[tuple]]] = [
    ("cities", [(A, 0, "paris", "FR"), (A, 0, "lyon", "FR")]),
    ("orders", [(A, 1, "paris", 5)]),
    ("cities", [(A, 0, "berlin", "DE")]),
    ("orders", [(A, 2, "lyon", 20), (A, 3, "berlin", 30)]),
    ("cities", [(CF, 0, "berlin", "DE"), (CT, 2, "berlin", "GER")]),
    ("cities", [(R, 0, "paris", "FR")]),
    ("orders", [(A, 5, "paris", 50), (A, 5, "paris", 50)]),  # an exact duplicate: states are multisets
    ("cities", [(A, 3, "rome", "IT"), (A, 3, "paris", "FR")]),
    ("orders", [(A, 6, "lyon", None), (A, 7, "rome", 15)]),
]

DERIVATIVES = ("filtered", "joined", "by-country")


def build(ws_dir: Path, steps: list[list[tuple[str, list[tuple]]]]) -> Workspace:
    """Roots and derivatives in a new workspace; after each step (a list of changes) every derivative runs."""

    ws = Workspace(ws_dir)
    roots = {
        "orders": create_root(ws, "orders", ORDERS_SCHEMA),
        "cities": create_root(ws, "cities", CITIES_SCHEMA),
    }
    create_derivative(
        ws,
        "filtered",
        {"orders": roots["orders"]},
        (None, "SELECT event_time, city, amount FROM orders WHERE amount > 10"),
    )
    create_derivative(
        ws,
        "joined",
        {"o": roots["orders"], "c": roots["cities"]},
        (None, "SELECT o.event_time, o.city, c.country, o.amount FROM o JOIN c ON o.city = c.city"),
    )
    create_derivative(
        ws,
        "by-country",
        {"orders": roots["orders"], "cities": roots["cities"]},
        ("j", "SELECT o.event_time, c.country, o.amount FROM orders o JOIN cities c ON o.city = c.city"),
        (
            None,
            "SELECT max(event_time) AS event_time, country, count(*) AS orders, sum(amount) AS total "
            "FROM j GROUP BY country",
        ),
    )
    return ws


def run_steps(
    ws: Workspace,
    engine,
    steps: list[list[tuple[str, list[tuple]]]],
    *,
    derivatives: tuple[str, ...] = DERIVATIVES,
    row_by_row: bool = False,
) -> None:
    """Commit each step's records to the roots (one AddData per root, or per record), then run derivatives."""
    for n, step in enumerate(steps, start=1):
        now = T0 + timedelta(minutes=n)
        for root in ("orders", "cities"):
            records = [r for name, records in step if name == root for r in records]
            batches = [[r] for r in records] if row_by_row else [records] if records else []
            for batch in batches:
                mark = max(r[1] for r in batch)
                add_records(ws.open(root), ws.root / "scratch", batch, now, watermark=mark)
        for name in derivatives:
            update_derivative(ws, name, engine, now)


def chunks(n: int) -> list[list[tuple[str, list[tuple]]]]:
    """``CHANGES`` split into ``n`` consecutive batches of nearly equal size."""
    bounds = [round(i * len(CHANGES) / n) for i in range(n + 1)]
    return [CHANGES[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory, engine) -> dict[str, Workspace]:
    built = {}
    modes = (("one", chunks(1), False), ("four", chunks(4), False), ("rows", [[c] for c in CHANGES], True))
    for label, steps, row_by_row in modes:
        started = time.monotonic()
        ws = build(tmp_path_factory.mktemp(label), steps)
        run_steps(ws, engine, steps, row_by_row=row_by_row)
        built[label] = ws
        print(f"{label}: {len(steps)} steps in {time.monotonic() - started:.1f}s")
    return built


def test_results_do_not_depend_on_batching(workspaces) -> None:
    expected_filtered = sorted(
        [
            (hours(2), "lyon", 20),
            (hours(3), "berlin", 30),
            (hours(5), "paris", 50),
            (hours(5), "paris", 50),
            (hours(7), "rome", 15),
        ],
        key=repr,
    )
    expected_joined = sorted(
        [
            (hours(1), "paris", "FR", 5),
            (hours(2), "lyon", "FR", 20),
            (hours(3), "berlin", "GER", 30),
            (hours(5), "paris", "FR", 50),
            (hours(5), "paris", "FR", 50),
            (hours(6), "lyon", "FR", None),
            (hours(7), "rome", "IT", 15),
        ],
        key=repr,
    )
    expected_by_country = sorted(
        [(hours(6), "FR", 5, 125), (hours(3), "GER", 1, 30), (hours(7), "IT", 1, 15)], key=repr
    )
    for label, ws in workspaces.items():
        assert current_rows(ws.open("filtered")) == expected_filtered, label
        assert current_rows(ws.open("joined")) == expected_joined, label
        assert current_rows(ws.open("by-country")) == expected_by_country, label


def test_intermediate_changes_are_retracted_not_rewritten(workspaces) -> None:
    ws = workspaces["rows"]
    records = pq.read_table(ws.open("by-country").layout.data_dir)  # every slice of the derivative
    ops = set(records.column("op").to_pylist())
    assert ops == {0, 1}  # +A for new rows, -R for rows that went away
    p = ws.open("joined").projection()
    assert p.watermark == hours(3)  # the least of the inputs' watermarks (cities stops at 3h)


def test_no_new_input_data_commits_nothing(workspaces, engine) -> None:
    ws = workspaces["four"]
    for name in DERIVATIVES:
        before = ws.open(name).head()
        outcome = update_derivative(ws, name, engine, T0 + timedelta(days=1))
        assert (outcome.committed, outcome.records) == (False, 0), name
        assert ws.open(name).head() == before


def test_recorded_transforms_reproduce(workspaces, engine) -> None:
    ws = workspaces["four"]
    for name in ("joined", "by-country"):  # "filtered" is reproduced by the tests below
        results = reproduce_all(ws, name, engine)
        assert results and all(results), [r.message for r in results if not r]


def test_reproduce_detects_a_bogus_result(tmp_path, engine) -> None:
    steps = chunks(2)
    ws = build(tmp_path / "ws", steps)
    run_steps(ws, engine, steps[:1], derivatives=("filtered",))
    add_records(ws.open("orders"), tmp_path, [(A, 9, "paris", 99)], T0 + timedelta(hours=1))
    derivative = ws.open("filtered")
    p = derivative.projection()
    slices = plan_inputs(ws, derivative)
    start = p.last_offset + 1
    bogus = tmp_path / "bogus.parquet"  # the right row count and shape, a wrong amount
    table = pa.table(
        {
            "offset": pa.array([start], pa.int64()),
            "op": pa.array([0], pa.int32()),
            "system_time": pa.array([T0 + timedelta(hours=1)], pa.timestamp("ms", tz="UTC")),
            "event_time": pa.array([hours(9)], pa.timestamp("ms", tz="UTC")),
            "city": pa.array(["paris"]),
            "amount": pa.array([98], pa.int64()),
        },
        schema=p.arrow_schema,
    )
    pq.write_table(table, bogus)
    event = model.ExecuteTransform(
        query_inputs=tuple(s.query_input for s in slices),
        prev_offset=p.last_offset,
        new_data=model.DataSlice(
            logical_hash=logical_hash(bogus),
            physical_hash=physical_hash(bogus),
            offset_interval=model.OffsetInterval(start=start, end=start),
            size=bogus.stat().st_size,
        ),
        new_watermark=p.watermark,
    )
    head = derivative.append(
        [event], expected_head=p.head, system_time=T0 + timedelta(hours=1), data_file=bogus
    )
    result = reproduce_transform(ws, "filtered", head, engine)
    assert not result
    assert f"block {p.sequence_number + 1}" in result.message and str(head) in result.message
    earlier = reproduce_all(ws, "filtered", engine)[:-1]
    assert earlier and all(earlier)


def test_a_changed_query_is_recomputed(tmp_path, engine) -> None:
    steps = chunks(1)
    ws = build(tmp_path / "ws", steps)
    run_steps(ws, engine, steps, derivatives=("filtered",))
    derivative = ws.open("filtered")
    orders = ws.open("orders")
    derivative.append(
        [
            set_transform(
                {"orders": orders}, (None, "SELECT event_time, city, amount FROM orders WHERE amount > 25")
            )
        ],
        system_time=T0 + timedelta(hours=2),
    )
    outcome = update_derivative(ws, "filtered", engine, T0 + timedelta(hours=2))
    assert outcome.committed and outcome.records == 2  # -R lyon 20 and -R rome 15
    assert current_rows(derivative) == sorted(
        [(hours(3), "berlin", 30), (hours(5), "paris", 50), (hours(5), "paris", 50)], key=repr
    )
    assert all(reproduce_all(ws, "filtered", engine))


def test_a_query_without_event_time_is_refused(tmp_path, engine) -> None:
    ws = build(tmp_path / "ws", [])
    orders = ws.open("orders")
    add_records(orders, tmp_path, [(A, 1, "paris", 5)], T0 + timedelta(minutes=1))
    ws.create(
        "no-time",
        model.DatasetKind.Derivative,
        events=[set_transform({"orders": orders}, (None, "SELECT city FROM orders"))],
        system_time=T0,
    )
    before = ws.open("no-time").head()
    with pytest.raises(InvalidQueryError, match="event_time"):
        update_derivative(ws, "no-time", engine, T0 + timedelta(minutes=2))
    assert ws.open("no-time").head() == before
