"""Key store partitions split when the keys grow and merge when they shrink, answers unchanged.

A partition count doubles once the keys outgrow ``partition_keys`` per partition and halves (neighbours
``2i``, ``2i+1`` merged) once they hold under a quarter of it on average. These tests use a partition
size of a few keys, so a few dozen keys take every path; answers are compared with a from-scratch
build that keeps the whole store in one partition.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from odfproj.state.dataset_index import index_directory, open_state_index, rebuild_state_index
from odfproj.state.index import StateIndex, build, update
from odfproj.state.persistence import load_index, read_manifest, save_index
from odfproj.state.read import read_state
from odfproj.storage.dataset import Dataset
from tests.state.changelogs import (
    KEY_COLUMNS,
    block_times,
    change_batches,
    commit_history,
    key_entries,
    offsets,
    same_index,
    small_partitions,
)

PARTITION_KEYS = 4


def adds(keys: range) -> list:
    return [(0, ("k", i), i) for i in keys]


def retracts(keys: range) -> list:
    return [(1, ("k", i), i) for i in keys]


def test_partitions_merge_below_a_quarter_and_hold_exactly_what_a_fresh_build_holds(tmp_path: Path) -> None:
    directory = tmp_path / "state-index"
    blocks = [adds(range(40)), retracts(range(36))]
    batches = change_batches(blocks, block_times(len(blocks)))
    with small_partitions(PARTITION_KEYS, 8):
        index = update(StateIndex(KEY_COLUMNS, 2, work_parent=directory), batches[:1])
        save_index(index, directory)
        grown = load_index(directory, KEY_COLUMNS)
        assert grown.key_store.bits == 4  # 40 keys in partitions of 4: 16 of them (at most 64 keys)
        before = [offsets(grown.offsets_after_block(k)) for k in (-1, 0)]
        update(grown, batches[1:])
        save_index(grown, directory)
        shrunk = load_index(directory, KEY_COLUMNS)
    # 4 keys left: under a quarter of 4 keys a partition on average in 16 or 8 partitions; 1 each in 4.
    assert shrunk.key_store.bits == 2 < 4
    assert read_manifest(directory).key_bits == 2
    assert [len(p) for p in shrunk.key_store.partitions()] == [
        count for _, count in read_manifest(directory).keys
    ]
    fresh = build(KEY_COLUMNS, batches, base_interval=2)
    assert fresh.key_store.bits == 0
    same_index(shrunk, fresh)  # current and past states, and every (hash, row) in hash order
    assert [offsets(shrunk.offsets_after_block(k)) for k in (-1, 0)] == before
    survivors = pa.table({"region": ["k"] * 40, "code": pa.array(range(40), pa.int64())})
    assert shrunk.current_rows(survivors).tolist() == [-1] * 36 + [36, 37, 38, 39]
    # The partitions the update wrote before the merge superseded them are gone with the work folder.
    names = {p.name for p in directory.iterdir()}
    assert names <= read_manifest(directory).file_names()  # the manifest, the lock, the files it names


def test_merges_go_down_to_one_partition_in_memory(tmp_path: Path) -> None:
    directory = tmp_path / "state-index"
    blocks = [adds(range(40)), retracts(range(40)), adds(range(100, 102))]
    batches = change_batches(blocks, block_times(len(blocks)))
    with small_partitions(PARTITION_KEYS, 8):
        index = update(StateIndex(KEY_COLUMNS, 2, work_parent=directory), batches[:1])
        assert index.key_store.bits == 4
        update(index, batches[1:2])
        assert index.key_store.bits == 0 and len(index.key_store) == 0
        update(index, batches[2:])
        save_index(index, directory)
        stored = load_index(directory, KEY_COLUMNS)
    assert stored.key_store.bits == 0
    same_index(stored, build(KEY_COLUMNS, batches, base_interval=2))


def test_keys_coming_and_going_at_a_boundary_never_flap(tmp_path: Path) -> None:
    """9 keys split 2 partitions into 4; going down to 7 and back does not merge them and split again.

    (Merging under half of ``partition_keys`` would: 7 keys in 4 partitions are under 2 a partition.)
    """
    blocks = [adds(range(9))]
    for _ in range(6):
        blocks += [retracts(range(7, 9)), adds(range(7, 9))]
    batches = change_batches(blocks, block_times(len(blocks)))
    with small_partitions(PARTITION_KEYS, 8):
        index = StateIndex(KEY_COLUMNS, 2, work_parent=tmp_path / "state-index")
        seen = set()
        for batch in batches:
            update(index, [batch])
            seen.add(index.key_store.bits)
    assert seen == {2}
    assert key_entries(index) == key_entries(build(KEY_COLUMNS, batches, base_interval=2))


def test_a_dataset_whose_keys_are_retracted_merges_and_reads_the_same(
    dataset: Dataset, scratch: Path
) -> None:
    """Through the stored dataset, as ingest keeps it: open, commit, open; reads before and after agree."""
    with small_partitions(PARTITION_KEYS, 8):
        heads = commit_history(dataset, [adds(range(40))], scratch / "a")
        grown = open_state_index(dataset, KEY_COLUMNS)
        assert grown.key_store.bits == 4
        before = read_state(dataset, key_columns=KEY_COLUMNS)
        commit_history(dataset, [retracts(range(2, 40)), None], scratch / "b")  # a Snapshot that lost 38 keys
        shrunk = open_state_index(dataset, KEY_COLUMNS)
        assert shrunk.key_store.bits == 1
        assert read_manifest(index_directory(dataset)).key_bits == 1
        reloaded = load_index(index_directory(dataset), KEY_COLUMNS)
        same_index(reloaded, rebuild_state_index(dataset, KEY_COLUMNS))
        # As at the block before the retractions, the merged index reads what the split one read.
        assert read_state(dataset, as_at=heads[-1], key_columns=KEY_COLUMNS).equals(before)
        now = read_state(dataset, key_columns=KEY_COLUMNS)
    assert now.column("code").to_pylist() == [0, 1]
    assert {p.name for p in index_directory(dataset).iterdir()} <= read_manifest(
        index_directory(dataset)
    ).file_names()


def test_a_first_update_of_keys_seen_once_stores_what_applying_block_by_block_stores(
    tmp_path: Path, monkeypatch
) -> None:
    """Empty partitions given each key once are built in one sort (a first Ledger or Snapshot); the
    files must be the very bytes the block-by-block merge writes, and the answers the same."""
    from odfproj.state import key_partitions

    blocks = [adds(range(0, 30)), [*adds(range(30, 50)), *retracts(range(60, 65))], adds(range(50, 60))]
    batches = change_batches(blocks, block_times(len(blocks)))
    built = {}
    for way in ("one sort", "block by block"):
        if way == "block by block":
            monkeypatch.setattr(key_partitions, "_first_keys", lambda empty, changes: None)
        with small_partitions(PARTITION_KEYS, 8):
            index = update(StateIndex(KEY_COLUMNS, 2, work_parent=tmp_path / way), batches)
        assert index.key_store.bits > 2  # several partitions, each given keys of three blocks
        built[way] = index
    same_index(built["one sort"], built["block by block"])
    files = {
        way: [key_partitions.encode_keys(p) for p in i.key_store.partitions()] for way, i in built.items()
    }
    assert files["one sort"] == files["block by block"]
    assert [offsets(built["one sort"].offsets_after_block(k)) for k in range(3)] == [
        offsets(built["block by block"].offsets_after_block(k)) for k in range(3)
    ]
