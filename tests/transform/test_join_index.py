"""The join index on real Spark: a term reads the other side by join key, never its history, and a
missing, stale, damaged or foreign index costs time, never a wrong block."""

from __future__ import annotations

import itertools
import json
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odfproj.state.join_index import join_index_directory
from odfproj.storage.workspace import Workspace
from odfproj.transform import coordinator
from odfproj.transform.coordinator import TransformOutcome, update_derivative
from tests.transform import test_grouped_joins as grouped_joins
from tests.transform.helpers import (
    T0,
    A,
    add_records,
    create_derivative,
    create_root,
    current_rows,
    schema_with,
    spark_examples,
)
from tests.transform.test_joins import (
    DIMS,
    FACTS,
    MORE_DIMS,
    MORE_FACTS,
    ROOT_SCHEMA,
    Round,
    block_hashes,
    expected_rows,
    make,
    modes,
    root_changes,
)

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True, scope="module")
def _index_at_any_size():
    """These inputs hold a few rows: the index is kept from the first join update, whatever the size."""
    kept = coordinator.JOIN_INDEX_MIN_RECORDS
    coordinator.JOIN_INDEX_MIN_RECORDS = 0
    yield
    coordinator.JOIN_INDEX_MIN_RECORDS = kept


#: A second dimension change, and facts that meet it.
LAST_DIMS = [(0, 7, "c", 41), (1, 6, "c", 40)]
LAST_FACTS = [(0, 8, "c", 2)]


def run(
    ws: Workspace, engine, rounds: list[Round], *, full_refresh: bool = False, minute: int = 1
) -> list[TransformOutcome]:
    """test_joins' rounds, the first at ``minute`` (a later call goes on where the last one stopped)."""
    outcomes = []
    for n, batches in enumerate(rounds, start=minute):
        now = T0 + timedelta(minutes=n)
        for alias, records in batches.items():
            if records:
                add_records(ws.open(alias), ws.root / "scratch", records, now)
        outcomes.append(update_derivative(ws, "j", engine, now, full_refresh=full_refresh))
    return outcomes


def index_head(ws: Workspace) -> str | None:
    """The head the derivative's join index is stamped with (``None``: no index)."""
    manifest = join_index_directory(ws.open("j")) / "manifest.json"
    return json.loads(manifest.read_bytes())["head"] if manifest.exists() else None


def head(ws: Workspace) -> str:
    found = ws.open("j").head()
    assert found is not None
    return found.to_multibase()


def test_a_dimension_update_reads_no_history_of_the_facts(tmp_path, engine) -> None:
    """With every data file of the facts and of the derivative gone, dimension-only updates still
    write the full path's blocks: the facts they meet come from the join index by key."""
    ws, full = make(tmp_path / "ws", "inner"), make(tmp_path / "full", "inner")
    first = [{"e": FACTS, "d": DIMS}, {"e": MORE_FACTS}]
    assert modes(run(ws, engine, first)) == ["full", "join"]
    assert index_head(ws) == head(ws)  # built by the first join update, advanced after its commit
    facts = current_rows(ws.open("e"))
    for name in ("e", "j"):
        for path in ws.open(name).layout.data_dir.iterdir():
            path.unlink()
    later = [{"d": MORE_DIMS}, {"d": LAST_DIMS}]
    assert modes(run(ws, engine, later, minute=3)) == ["join", "join"]
    assert index_head(ws) == head(ws)
    run(full, engine, first + later, full_refresh=True)
    assert block_hashes(ws) == block_hashes(full)
    assert expected_rows("inner", {"e": facts, "d": current_rows(ws.open("d"))}) == current_rows(
        full.open("j")
    )


def test_an_aggregation_over_a_join_reads_the_facts_through_the_index(tmp_path, engine) -> None:
    """A GROUP BY over a join: with every data file of the facts and of the derivative gone, dimension
    updates still write the full path's blocks (the facts they meet from the join index, the groups
    from the group state)."""
    ws, full = grouped_joins.make(tmp_path / "ws", "inner"), grouped_joins.make(tmp_path / "full", "inner")
    first = [{"e": grouped_joins.FACTS, "d": grouped_joins.DIMS}, {"e": grouped_joins.MORE_FACTS}]
    assert modes(run(ws, engine, first)) == ["full", grouped_joins.GROUPED_JOIN]
    assert index_head(ws) == head(ws)
    for name in ("e", "j"):
        for path in ws.open(name).layout.data_dir.iterdir():
            path.unlink()
    # Only new dimension rows: a withdrawn one could take a group's min or max, which the full path redoes.
    later = [{"d": [(A, 5, "c", 30)]}, {"d": [(A, 6, "a", 8), (A, 7, "c", 31)]}]
    assert modes(run(ws, engine, later, minute=3)) == [grouped_joins.GROUPED_JOIN] * 2
    assert index_head(ws) == head(ws)
    run(full, engine, first + later, full_refresh=True)
    assert block_hashes(ws) == block_hashes(full)


def test_a_stale_damaged_or_foreign_index_is_caught_up_or_rebuilt(tmp_path, engine) -> None:
    ws, full = make(tmp_path / "ws", "inner"), make(tmp_path / "full", "inner")
    rounds: list[Round] = [{"e": FACTS, "d": DIMS}, {"e": MORE_FACTS}]
    run(ws, engine, rounds)
    directory = join_index_directory(ws.open("j"))
    behind = tmp_path / "behind"
    shutil.copytree(directory, behind)
    rounds.append({"d": MORE_DIMS})
    run(ws, engine, rounds[2:], minute=3)
    # A crash between the commit and the index's write: the index still describes the block before.
    shutil.rmtree(directory)
    shutil.copytree(behind, directory)
    rounds.append({"e": LAST_FACTS, "d": LAST_DIMS})
    assert modes(run(ws, engine, rounds[3:], minute=4)) == ["join"]
    assert index_head(ws) == head(ws)
    # A damaged run: its size no longer matches the manifest.
    run_file = next(directory.rglob("*.parquet"))
    run_file.write_bytes(run_file.read_bytes()[:-8])
    rounds.append({"d": [(0, 9, "a", 50)]})
    assert modes(run(ws, engine, rounds[4:], minute=5)) == ["join"]
    assert index_head(ws) == head(ws)
    # A foreign index: another derivative's (other inputs, another chain) copied over this one's.
    other = make(tmp_path / "other", "inner")
    run(other, engine, [{"e": FACTS, "d": DIMS}, {"e": LAST_FACTS}])
    shutil.rmtree(directory)
    shutil.copytree(join_index_directory(other.open("j")), directory)
    rounds.append({"e": [(1, 8, "c", 2)], "d": [(0, 10, "c", 3)]})
    assert modes(run(ws, engine, rounds[5:], minute=6)) == ["join"]
    assert index_head(ws) == head(ws)
    run(full, engine, rounds, full_refresh=True)
    assert block_hashes(ws) == block_hashes(full)
    assert current_rows(ws.open("j")) == expected_rows("inner", {a: current_rows(ws.open(a)) for a in "ed"})


#: Shapes the index covers beyond test_joins' (which run through it too): an int key joined with a
#: bigint one through a renaming subquery, and a snowflake (the outer dimension meets the facts only
#: through the inner one, so its term reads the facts whole).
SHAPES = {
    "typed": (
        "SELECT e.event_time, e.k, e.v, m.nk FROM e JOIN (SELECT k AS nk, w AS key FROM n) m ON e.v = m.key",
        {"e": ROOT_SCHEMA, "n": schema_with(("k", pa.string()), ("w", pa.int32()))},
    ),
    "snowflake": (
        "SELECT e.event_time, e.k, e.v, d.v AS dv, f.k AS fk FROM e JOIN d ON e.k = d.k JOIN f ON d.v = f.v",
        {"e": ROOT_SCHEMA, "d": ROOT_SCHEMA, "f": ROOT_SCHEMA},
    ),
}


def shape_rows(shape: str, rows: dict[str, list[tuple]]) -> list[tuple]:
    """The query of ``shape`` over the roots' current rows ``(event_time, k, v)``, in plain Python."""
    if shape == "typed":
        out = [(t, k, v, nk) for t, k, v in rows["e"] for _, nk, w in rows["n"] if w == v]
    else:
        out = [
            (t, k, v, dv, fk)
            for t, k, v in rows["e"]
            for _, dk, dv in rows["d"]
            if dk == k
            for _, fk, fv in rows["f"]
            if fv == dv
        ]
    return sorted(out, key=repr)


def make_shape(ws_dir: Path, shape: str) -> Workspace:
    ws = Workspace(ws_dir)
    query, schemas = SHAPES[shape]
    roots = {alias: create_root(ws, alias, schema) for alias, schema in schemas.items()}
    create_derivative(ws, "j", roots, (None, query))
    return ws


@st.composite
def shape_scenarios(draw) -> tuple[str, list[Round]]:
    shape = draw(st.sampled_from(sorted(SHAPES)))
    rounds = draw(st.integers(2, 3))
    per_root = {alias: draw(root_changes(rounds)) for alias in SHAPES[shape][1]}
    return shape, [{alias: per_root[alias][i] for alias in per_root} for i in range(rounds)]


@spark_examples(3)
@given(drawn=shape_scenarios())
def test_random_batches_through_the_index_give_full_and_one_batch_results(
    tmp_path_factory, engine, drawn
) -> None:
    """Hypothesis: random batch splits, every root retracting and correcting rows and several changing
    in one update, == full refresh block for block == one batch == plain Python; the index kept current."""
    shape, rounds = drawn
    aliases = list(SHAPES[shape][1])
    incremental = make_shape(tmp_path_factory.mktemp("inc"), shape)
    full = make_shape(tmp_path_factory.mktemp("full"), shape)
    one = make_shape(tmp_path_factory.mktemp("one"), shape)
    outcomes = run(incremental, engine, rounds)
    run(full, engine, rounds, full_refresh=True)
    run(one, engine, [{a: list(itertools.chain(*(r[a] for r in rounds))) for a in aliases}])
    assert block_hashes(incremental) == block_hashes(full)
    assert current_rows(incremental.open("j")) == current_rows(one.open("j"))
    rows = {alias: current_rows(incremental.open(alias)) for alias in aliases}
    assert current_rows(incremental.open("j")) == shape_rows(shape, rows)
    if any(o.mode == "join" and o.committed for o in outcomes):  # built by the first join update
        assert index_head(incremental) == head(incremental)
