"""Long histories: 10,000+ blocks build, persist, reload, and answer as-at reads from nearby bases."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from odfproj.state.index import StateIndex, bitmap_to_numpy, build
from odfproj.state.persistence import load_index, read_manifest, save_index
from tests.state.changelogs import KEY_COLUMNS, block_times, change_batches, reference_states

BLOCKS = 10_050


def small_history(count: int, seed: int = 7) -> list:
    """Blocks of 1-4 snapshot-style records over 210 keys; two blocks in three carry no data.

    Metadata-only blocks keep the test to a few seconds (a data block costs ~1 ms of Arrow calls)
    while the log, the bases and as-at lookups still span 10,000+ blocks.
    """
    rng = random.Random(seed)
    live: dict = {}
    blocks = []
    for n in range(count):
        if n % 3:
            blocks.append(None)
            continue
        records = []
        for key in {(rng.choice(["eu", "us", None]), rng.randrange(70)) for _ in range(rng.randint(1, 2))}:
            if key in live and rng.random() < 0.3:
                records.append((1, key, live.pop(key)))
            elif key in live:
                records += [(2, key, live[key]), (3, key, n)]
                live[key] = n
            else:
                records.append((0, key, n))
                live[key] = n
        blocks.append(records)
    return blocks


def test_ten_thousand_blocks(tmp_path: Path) -> None:
    blocks = small_history(BLOCKS)
    times = block_times(len(blocks), [1, 0, 2])
    index = build(KEY_COLUMNS, change_batches(blocks, times), base_interval=64)
    expected = reference_states(blocks)
    assert set(bitmap_to_numpy(index.current_offsets()).tolist()) == set(expected[-1].values())

    directory = tmp_path / "state-index"
    save_index(index, directory)
    manifest = read_manifest(directory)
    assert manifest.block_count == BLOCKS and len(manifest.bases) == BLOCKS // 64
    loaded = load_index(directory, KEY_COLUMNS)

    # As-at reads anywhere in history replay at most half a base interval of entries.
    rng = random.Random(3)
    for k in [0, 1, 63, 64, 5000, BLOCKS - 2, BLOCKS - 1, *(rng.randrange(BLOCKS) for _ in range(300))]:
        got = bitmap_to_numpy(loaded.offsets_after_block(k))
        assert np.array_equal(got, np.sort(np.fromiter(expected[k].values(), np.int64))), k
        assert bitmap_to_numpy(loaded.offsets_as_at(loaded.log.entries[k].block_hash)).size == got.size

    # One more block after a reload: only the open segment and the current files are rewritten.
    sealed = {f.name for f in manifest.segments[:-1]}
    more = small_history(BLOCKS + 5)[BLOCKS:]
    tail = change_batches(blocks + more, block_times(BLOCKS + 5, [1, 0, 2]))[BLOCKS:]
    for batch in tail:
        loaded.apply(batch)
    after = save_index(loaded, directory)
    assert sealed <= {f.name for f in after.segments}
    assert isinstance(load_index(directory, KEY_COLUMNS), StateIndex)
