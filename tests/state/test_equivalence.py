"""The index's answers equal the reference projection: at the head, after every block, at every time."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from odfproj.state import index as index_module
from odfproj.state import key_partitions as key_partitions_module
from odfproj.state.index import StateIndex, bitmap_to_numpy, build, update
from odfproj.state.keys import hash_keys
from odfproj.state.persistence import load_index, save_index
from tests.state.changelogs import (
    KEY_COLUMNS,
    block_times,
    change_batches,
    histories,
    key_entries,
    reference_states,
)


def offsets(bitmap) -> set[int]:
    return set(bitmap_to_numpy(bitmap).tolist())


def check_against_reference(index: StateIndex, blocks, times) -> None:
    expected = reference_states(blocks)
    final = expected[-1] if expected else {}
    assert offsets(index.current_offsets()) == set(final.values())
    assert len(index.key_store) == len(final)
    # As at every block, by sequence number and by block hash.
    assert offsets(index.offsets_after_block(-1)) == set()
    for k, state in enumerate(expected):
        assert offsets(index.offsets_after_block(k)) == set(state.values()), f"after block {k}"
        assert offsets(index.offsets_as_at(index.log.entries[k].block_hash)) == set(state.values())
    # As at every system time: a block's time, just before it, and before the first block.
    if times:
        assert offsets(index.offsets_as_at(times[0] - timedelta(microseconds=1))) == set()
    for k, t in enumerate(times):
        last = max(i for i, other in enumerate(times) if other <= t)  # equal times: the last such block
        assert offsets(index.offsets_as_at(t)) == set(expected[last].values())
        assert offsets(index.offsets_as_at(t + timedelta(milliseconds=500))) == set(expected[last].values())
        if k:
            before = max(i for i, other in enumerate(times) if other < t) if t > times[0] else -1
            want = set(expected[before].values()) if before >= 0 else set()
            assert offsets(index.offsets_as_at(t - timedelta(microseconds=1))) == want
    # The key store answers the merge's question: the current row of each key.
    if final:
        keys = list(final)
        table = pa.table({"region": [k[0] for k in keys], "code": pa.array([k[1] for k in keys], pa.int64())})
        assert index.current_rows(table).tolist() == [final[k] for k in keys]


GAPS = st.lists(st.integers(0, 2), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(blocks=histories(), gaps=GAPS, base_interval=st.integers(1, 4))
def test_index_equals_reference_projection(blocks, gaps, base_interval) -> None:
    times = block_times(len(blocks), gaps)
    index = build(KEY_COLUMNS, change_batches(blocks, times), base_interval=base_interval)
    check_against_reference(index, blocks, times)


@settings(max_examples=60, deadline=None)
@given(blocks=histories(), gaps=GAPS, base_interval=st.integers(1, 4), split=st.integers(0, 12))
def test_incremental_update_through_disk_equals_reference(blocks, gaps, base_interval, split) -> None:
    """Build part of the history, store it, load it, update with the rest, store and load again."""
    times = block_times(len(blocks), gaps)
    batches = change_batches(blocks, times)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "state-index"
        index = build(KEY_COLUMNS, batches[:split], base_interval=base_interval)
        save_index(index, directory)
        index = update(load_index(directory, KEY_COLUMNS), batches[split:])
        save_index(index, directory)
        index = load_index(directory, KEY_COLUMNS)
    check_against_reference(index, blocks, times)


@settings(max_examples=80, deadline=None)
@given(blocks=histories(), gaps=GAPS, buckets=st.sampled_from([1, 2, 5]))
def test_hash_collisions_never_change_the_answer(blocks, gaps, buckets) -> None:
    """With a hash of only ``buckets`` values, almost every pair of keys collides; answers must not change."""

    def colliding(keys: pa.Table) -> np.ndarray:
        return hash_keys(keys) % np.uint64(buckets)

    times = block_times(len(blocks), gaps)
    with (
        mock.patch.object(index_module, "hash_keys", colliding),
        mock.patch.object(key_partitions_module, "hash_keys", colliding),
    ):
        index = build(KEY_COLUMNS, change_batches(blocks, times), base_interval=3)
        check_against_reference(index, blocks, times)


def _partitioned(index: StateIndex, partition_keys: int, spill_rows: int) -> StateIndex:
    index.key_store.partition_keys = partition_keys
    index.key_store.spill_rows = spill_rows
    return index


@settings(max_examples=30, deadline=None)
@given(
    blocks=histories(),
    gaps=GAPS,
    split=st.integers(0, 12),
    partition_keys=st.sampled_from([1, 2, 3]),
    spill_rows=st.sampled_from([0, 1, 4]),
)
def test_partitioned_key_store_through_disk_equals_reference(
    blocks, gaps, split, partition_keys, spill_rows
) -> None:
    """A key store cut into many partitions on disk, its changes spilled in sorted runs, answers the same.

    With a partition size of 1 to 3 keys and spills every 0 to 4 rows, every path of the bounded
    update is taken: partitions doubling, a partition split while it has no change, runs on disk,
    partitions merging as keys are retracted.
    """
    times = block_times(len(blocks), gaps)
    batches = change_batches(blocks, times)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "state-index"
        index = _partitioned(StateIndex(KEY_COLUMNS, 2, work_parent=directory), partition_keys, spill_rows)
        update(index, batches[:split])
        save_index(index, directory)
        index = _partitioned(load_index(directory, KEY_COLUMNS), partition_keys, spill_rows)
        update(index, batches[split:])
        save_index(index, directory)
        reference = build(KEY_COLUMNS, batches, base_interval=2)
        assert len(index.key_store) == len(reference.key_store)
        if len(reference.key_store) > partition_keys:
            assert index.key_store.bits > 0  # the store really is partitioned
        store = index.key_store  # and partitions left under a quarter full on average were merged
        assert store.bits == 0 or len(store) * 4 >= partition_keys << store.bits
        on_disk = {p.name for p in directory.iterdir()}
        assert not [n for n in on_disk if n.startswith(".work") or n.startswith("pending")]
        index = load_index(directory, KEY_COLUMNS)
        assert key_entries(index) == key_entries(reference)
        check_against_reference(index, blocks, times)
