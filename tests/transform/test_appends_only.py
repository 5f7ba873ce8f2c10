"""New records that only append withdraw nothing: the incremental paths skip the query over withdrawn rows.

``state.frames.only_appends`` judges a slice from its files' footers (the ``op`` column's statistics),
and a stateless update or a join term then runs its query once, over the rows added; nothing is netted
(no grouping of the input's rows, none of the result's), and an input whose whole history appends is
read by the full path as its rows. The blocks stay the full path's (the property tests of
test_incremental/test_joins cover random batches with retractions; here: that the shortcut is taken
exactly when it may be, and that its values are the grouping's, ``-0.0`` and NaN included).
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.state.frames import ChangelogView, changelog_between, only_appends
from odfproj.state.projections import grouping_values
from odfproj.storage.workspace import Workspace
from odfproj.transform.reproduce import reproduce_all
from tests.transform.helpers import (
    CF,
    CT,
    A,
    R,
    add_records,
    block_hashes,
    create_derivative,
    create_root,
    hours,
    read_records,
    schema_with,
)
from tests.transform.helpers import update_after_each as run

ROOT = schema_with(("k", pa.string()), ("v", pa.int64()))
DIM = schema_with(("k", pa.string()), ("label", pa.string()))
APPENDS = [(A, 0, "a", 1), (A, 1, "b", 7), (A, 1, "b", 7)]
WITHDRAWS = [(R, 1, "b", 7), (CF, 0, "a", 1), (CT, 2, "a", 8)]


def _view(ws: Workspace, after: int | None = None) -> ChangelogView:
    dataset = ws.open("r")
    p = dataset.projection()
    return changelog_between(dataset, p.head, after, p.last_offset)


def test_only_appends_reads_the_op_statistics_of_the_slice_files(tmp_path) -> None:
    ws = Workspace(tmp_path / "ws")
    root = create_root(ws, "r", ROOT)
    assert only_appends(_view(ws))  # no records: nothing withdrawn
    add_records(root, tmp_path / "s", APPENDS, hours(1))
    assert only_appends(_view(ws))
    add_records(root, tmp_path / "s", [(A, 2, "c", 3), (R, 0, "a", 1)], hours(2))
    assert not only_appends(_view(ws))  # the new file holds a retraction
    assert not only_appends(_view(ws, after=2))  # the slice of new records only: the same
    add_records(root, tmp_path / "s", [(A, 3, "d", 4)], hours(3))
    assert only_appends(_view(ws, after=4))  # the files of earlier records are not asked
    assert not only_appends(_view(ws, after=3))  # a file that holds a -R anywhere says no


def _appended(tmp_path) -> ChangelogView:
    """The view of a root holding one file of appends."""
    ws = Workspace(tmp_path / "ws")
    add_records(create_root(ws, "r", ROOT), tmp_path / "s", APPENDS, hours(1))
    return _view(ws)


def _with_files(view: ChangelogView, *paths) -> ChangelogView:
    return ChangelogView(view.dataset, view.block_hash, view.offset, view.schema, paths, None)


def test_a_file_without_statistics_is_not_taken_for_appends_only(tmp_path) -> None:
    view = _appended(tmp_path)
    bare = tmp_path / "bare.parquet"
    pq.write_table(pq.read_table(view.data_paths[0]), bare, write_statistics=False)
    assert not only_appends(_with_files(view, bare))
    assert not only_appends(_with_files(view, tmp_path / "gone"))


def test_a_file_judged_once_is_judged_again_when_it_changes(tmp_path) -> None:
    view = _appended(tmp_path)
    copy = tmp_path / "copy.parquet"
    table = pq.read_table(view.data_paths[0])
    pq.write_table(table, copy)
    mine = _with_files(view, copy)
    assert only_appends(mine)
    ops = table.column("op").to_pylist()
    pq.write_table(table.set_column(1, "op", pa.array([*ops[:-1], int(R)], pa.int32())), copy)
    assert not only_appends(mine)


@pytest.mark.spark
def test_the_full_path_nets_only_the_inputs_that_withdraw(tmp_path, engine, monkeypatch) -> None:
    import odfproj.state.projections as projections

    netted: list[int] = []
    original = projections.multiset_state
    monkeypatch.setattr(projections, "multiset_state", lambda h: netted.append(1) or original(h))
    ws = Workspace(tmp_path / "ws")
    query = "SELECT MAX(event_time) AS event_time, k, SUM(v) AS v FROM r GROUP BY k"
    create_derivative(ws, "d", {"r": create_root(ws, "r", ROOT)}, (None, query))
    assert run(ws, engine, [APPENDS], full_refresh=True) == ["full"]
    assert not netted  # the input's history appends only: its rows are its state
    assert run(ws, engine, [WITHDRAWS], full_refresh=True, minute=2) == ["full"]
    assert netted
    rows = [(r["op"], r["k"], r["v"]) for r in read_records(ws.open("d")).to_pylist()]
    assert sorted(rows)[-2:] == [(R, "b", 14), (A, "a", 8)] or (R, "b", 14) in rows
    assert all(reproduce_all(ws, "d", engine))


@pytest.fixture
def queries(engine, monkeypatch) -> list[dict]:
    """The inputs of every query the engine runs (how many queries an update builds)."""
    seen: list[dict] = []
    original = SparkEngine.query

    def counting(self, inputs, transform):
        seen.append(dict(inputs))
        return original(self, inputs, transform)

    monkeypatch.setattr(SparkEngine, "query", counting)
    return seen


@pytest.mark.spark
def test_a_stateless_update_of_appends_runs_its_query_once(tmp_path, engine, queries) -> None:
    ws = Workspace(tmp_path / "ws")
    root = create_root(ws, "r", ROOT)
    create_derivative(ws, "d", {"r": root}, (None, "SELECT event_time, k, v * 2 AS w FROM r WHERE v > 1"))
    control = Workspace(tmp_path / "control")
    create_derivative(
        control,
        "d",
        {"r": create_root(control, "r", ROOT)},
        (None, "SELECT event_time, k, v * 2 AS w FROM r WHERE v > 1"),
    )
    assert run(ws, engine, [APPENDS]) == ["full"]
    queries.clear()
    assert run(ws, engine, [[(A, 2, "c", 5)]], minute=2) == ["stateless"]
    assert len(queries) == 1  # the rows added; none withdrawn, so no second query
    queries.clear()
    assert run(ws, engine, [WITHDRAWS], minute=3) == ["stateless"]
    assert len(queries) == 2
    assert run(control, engine, [APPENDS, [(A, 2, "c", 5)], WITHDRAWS], full_refresh=True) == ["full"] * 3
    assert block_hashes(ws) == block_hashes(control)
    assert all(reproduce_all(ws, "d", engine))


@pytest.mark.spark
def test_a_join_term_of_appends_builds_no_withdrawn_query(tmp_path, engine, queries) -> None:
    ws = Workspace(tmp_path / "ws")
    root, dim = create_root(ws, "r", ROOT), create_root(ws, "m", DIM)
    query = "SELECT r.event_time, r.k, r.v, m.label FROM r JOIN m ON r.k = m.k"
    create_derivative(ws, "d", {"r": root, "m": dim}, (None, query))
    add_records(dim, tmp_path / "s", [(A, 0, "a", "alpha"), (A, 0, "b", "beta")], hours(1))
    assert run(ws, engine, [APPENDS, [(A, 2, "a", 5)]]) == ["full", "join"]  # the mode is known now
    queries.clear()
    assert run(ws, engine, [[(A, 3, "b", 9)]], minute=3) == ["join"]
    assert [sorted(q) for q in queries] == [["m", "r"]]  # one term, added rows only
    queries.clear()
    assert run(ws, engine, [WITHDRAWS], minute=4) == ["join"]
    assert len(queries) == 2  # the term's added and withdrawn rows
    rows = sorted((r["op"], r["k"], r["v"]) for r in read_records(ws.open("d")).to_pylist())
    assert rows.count((R, "b", 7)) == 1 and (A, "a", 5) in rows
    assert all(reproduce_all(ws, "d", engine))


#: A NaN other than Java's canonical one (``0x7ff8000000000000``): Spark's grouping rewrites it.
ODD_NAN = struct.unpack(">d", bytes.fromhex("7ff8000000000123"))[0]


def _bits(value: float | None) -> str | None:
    return None if value is None else struct.pack(">d", value).hex()


@pytest.mark.spark
def test_grouping_values_are_the_values_a_grouping_gives_back(engine) -> None:
    from pyspark.sql import types as T

    session = engine.session
    schema = "k string, d double, f float, s struct<x: double>, a array<float>, m map<string, double>"
    rows = [("a", -0.0, -0.0, None, None, None), ("b", ODD_NAN, float("nan"), None, None, None)]
    rows += [("c", 1.5, 2.5, None, None, None), ("d", None, None, None, None, None)]
    frame = session.createDataFrame(rows, schema)
    values = grouping_values(frame, ["k", "d", "f"])
    assert values is not None
    mine = {r["k"]: (_bits(r["d"]), _bits(r["f"])) for r in frame.select(*values).collect()}
    grouped = frame.groupBy("k", "d", "f").count().collect()
    assert mine == {r["k"]: (_bits(r["d"]), _bits(r["f"])) for r in grouped}
    assert mine["a"] == ("0" * 16, "0" * 16)  # -0.0 is 0.0
    assert mine["b"] == ("7ff8000000000000", "7ff8000000000000")  # the one canonical NaN
    assert frame.select(*values).schema == frame.select("k", "d", "f").schema  # names and types kept
    for nested in ("s", "a", "m"):  # a float inside a struct, array or map: the caller must group
        assert grouping_values(frame, ["k", nested]) is None
    plain = session.createDataFrame([], T.StructType([T.StructField("s", T.StructType([]))]))
    assert grouping_values(plain, ["s"]) is not None


FLOATS = schema_with(("k", pa.string()), ("v", pa.float64()))


@pytest.mark.spark
def test_appended_floats_reach_queries_and_files_as_a_grouping_gives_them(tmp_path, engine) -> None:
    """``-0.0`` and an odd NaN in appends: the query sees ``0.0`` and the canonical NaN, as it does
    over a state that was netted, and a ``-0.0`` the query makes is written ``0.0``, as a netting writes
    it; on the first (full) run over an input that only appends and on the stateless path after it."""
    ws = Workspace(tmp_path / "ws")
    root = create_root(ws, "r", FLOATS)
    query = "SELECT event_time, k, CAST(v AS STRING) AS s, -v AS n, v FROM r"
    create_derivative(ws, "d", {"r": root}, (None, query))
    first = [(A, 0, "a", -0.0), (A, 0, "b", ODD_NAN), (A, 0, "c", 1.0)]
    assert run(ws, engine, [first, [(A, 1, "e", -0.0), (A, 1, "f", ODD_NAN)]]) == ["full", "stateless"]
    rows = read_records(ws.open("d")).to_pylist()
    assert sorted((r["k"], r["s"]) for r in rows) == [
        ("a", "0.0"), ("b", "NaN"), ("c", "1.0"), ("e", "0.0"), ("f", "NaN")
    ]  # fmt: skip
    for r in rows:
        if r["k"] != "c":
            assert {_bits(r["n"]), _bits(r["v"])} <= {"0" * 16, "7ff8000000000000"}, r
    control = Workspace(tmp_path / "control")
    create_derivative(control, "d", {"r": create_root(control, "r", FLOATS)}, (None, query))
    withdrawn = [(A, 1, "e", -0.0), (A, 1, "f", ODD_NAN), (A, 2, "x", 0.5), (R, 2, "x", 0.5)]
    assert run(control, engine, [first, withdrawn], full_refresh=True) == ["full", "full"]
    assert sorted(map(str, read_records(ws.open("d")).drop_columns(["system_time"]).to_pylist())) == sorted(
        map(str, read_records(control.open("d")).drop_columns(["system_time"]).to_pylist())
    )  # the control's input withdraws (netted state): the same records
    assert all(reproduce_all(ws, "d", engine))


CONSTANT_QUERIES = {
    "stateless": "SELECT event_time, k, v FROM r UNION ALL SELECT TIMESTAMP'2020-01-01 00:00:00', 'c', 0",
    "grouped": (
        "SELECT MAX(event_time) AS event_time, k, COUNT(*) AS n FROM "
        "(SELECT event_time, k FROM r UNION ALL SELECT TIMESTAMP'2020-01-01 00:00:00', 'c') GROUP BY k"
    ),
    "join": (
        "SELECT x.event_time, x.k, m.label FROM "
        "(SELECT event_time, k FROM r UNION ALL SELECT TIMESTAMP'2020-01-01 00:00:00', 'a') x "
        "JOIN m ON x.k = m.k"
    ),
}


@pytest.mark.spark
@pytest.mark.parametrize("mode", sorted(CONSTANT_QUERIES))
def test_a_constant_relation_is_counted_once_however_the_appends_come(tmp_path, engine, mode) -> None:
    """A constant's rows are in the query over the added rows and in the one over the withdrawn rows,
    and cancel only if both run: appends that withdraw nothing still run the second query then."""

    def make(root: str) -> Workspace:
        ws = Workspace(tmp_path / root)
        inputs = {"r": create_root(ws, "r", ROOT), "m": create_root(ws, "m", DIM)}
        add_records(
            inputs["m"], tmp_path / root / "s", [(A, 0, "a", "alpha"), (A, 0, "c", "gamma")], hours(1)
        )
        used = {k: v for k, v in inputs.items() if k == "r" or mode == "join"}
        create_derivative(ws, "d", used, (None, CONSTANT_QUERIES[mode]))
        return ws

    batches = [APPENDS, [(A, 2, "c", 5)], [(A, 3, "a", 6)]]
    ws, control = make("ws"), make("control")
    assert run(ws, engine, batches) == ["full", mode, mode]
    assert run(control, engine, batches, full_refresh=True) == ["full"] * 3
    assert block_hashes(ws) == block_hashes(control)
    assert all(reproduce_all(ws, "d", engine))
