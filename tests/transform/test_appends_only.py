"""New records that only append withdraw nothing: the incremental paths skip the query over withdrawn rows.

``state.frames.only_appends`` judges a slice from its files' footers (the ``op`` column's statistics),
and a stateless update or a join term then runs its query once, over the rows added. The blocks stay
the full path's (the property tests of test_incremental/test_joins cover random batches with
retractions; here: that the shortcut is taken exactly when it may be).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.state.frames import ChangelogView, changelog_between, only_appends
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


def test_a_file_without_statistics_is_not_taken_for_appends_only(tmp_path) -> None:
    ws = Workspace(tmp_path / "ws")
    root = create_root(ws, "r", ROOT)
    add_records(root, tmp_path / "s", APPENDS, hours(1))
    view = _view(ws)
    bare = tmp_path / "bare.parquet"
    pq.write_table(pq.read_table(view.data_paths[0]), bare, write_statistics=False)
    assert not only_appends(
        ChangelogView(view.dataset, view.block_hash, view.offset, view.schema, (bare,), None)
    )
    assert not only_appends(
        ChangelogView(view.dataset, view.block_hash, view.offset, view.schema, (tmp_path / "gone",), None)
    )


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
