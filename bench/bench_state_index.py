"""Benchmark of the Opal-style state index (odfproj.state): flat incremental updates, fast current reads.

Scenario: a Snapshot-merged dataset of 1,000,000 keys; 30 snapshots, each changing 1% of the keys
(half corrected with -C/+C pairs, a quarter retracted, a quarter new keys appended). Every snapshot's
changelog is built with numpy/pyarrow (no Spark) and written as one Parquet file, like one AddData
block. Figures printed:

* per snapshot: time to fold the block into the index (``update``, reading only offset/op/key
  columns of the new file), and time to persist it (``save_index``: open log segment, current bitmap,
  key store); the 30th/2nd ratio shows whether update time stays flat as history grows;
* current-state read through the index (files filtered by the current bitmap) vs a reference
  latest-per-key projection over the whole changelog, computed with pyarrow ``group_by`` (max offset
  per key, then keep rows whose op is +A/+C: what ``row_number() over (partition by key order by
  offset desc) = 1`` does in SQL; DuckDB is not a dependency), checked to give the same rows;
* an as-at read (state after snapshot 15) through the index;
* peak RSS of the process.

Usage: ``.venv/bin/python bench/bench_state_index.py [--keys N] [--snapshots S] [--churn F]``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from odfproj.odf.multiformats import Multihash
from odfproj.state.index import ChangeBatch, StateIndex, update
from odfproj.state.persistence import save_index
from odfproj.state.read import read_valid_rows

TS = pa.timestamp("ms", tz="UTC")
T0 = datetime(2026, 11, 1, tzinfo=UTC)
KEY = "id"
SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("op", pa.int32(), nullable=False),
        pa.field("system_time", TS, nullable=False),
        pa.field("event_time", TS),
        pa.field(KEY, pa.int64()),
        pa.field("value", pa.int64()),
        pa.field("label", pa.string()),
    ]
)


def changelog_table(
    start: int, ops: np.ndarray, ids: np.ndarray, values: np.ndarray, when: datetime
) -> pa.Table:
    n = len(ops)
    ms = int(when.timestamp() * 1000)
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(start, start + n, dtype=np.int64)),
            pa.array(ops.astype(np.int32)),
            pa.array(np.full(n, ms, np.int64)).cast(TS),
            pa.array(np.full(n, ms, np.int64)).cast(TS),
            pa.array(ids),
            pa.array(values),
            pc.binary_join_element_wise("k", pc.cast(pa.array(ids), pa.string()), ""),
        ],
        schema=SCHEMA,
    )


class SnapshotSource:
    """Live key -> value state, and the changelog each new snapshot produces against it."""

    def __init__(self, keys: int, seed: int = 42) -> None:
        self.rng = np.random.default_rng(seed)
        self.ids = np.arange(keys, dtype=np.int64)
        self.values = self.rng.integers(0, 1_000_000, keys)
        self.next_id = keys

    def first(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.zeros(len(self.ids), np.int32), self.ids.copy(), self.values.copy()

    def next(self, churn: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(self.ids)
        changed = max(4, int(n * churn))
        pick = self.rng.choice(n, size=changed, replace=False)
        correct, retract = pick[: changed // 2], pick[changed // 2 : changed * 3 // 4]
        inserts = changed - len(correct) - len(retract)
        new_values = self.rng.integers(0, 1_000_000, len(correct))
        # -C (old values) immediately followed by +C (new values), then -R, then +A.
        c_ops = np.tile(np.array([2, 3], np.int32), len(correct))
        c_ids = np.repeat(self.ids[correct], 2)
        c_vals = np.column_stack([self.values[correct], new_values]).ravel()
        new_ids = np.arange(self.next_id, self.next_id + inserts, dtype=np.int64)
        new_vals = self.rng.integers(0, 1_000_000, inserts)
        ops = np.concatenate([c_ops, np.ones(len(retract), np.int32), np.zeros(inserts, np.int32)])
        ids = np.concatenate([c_ids, self.ids[retract], new_ids])
        values = np.concatenate([c_vals, self.values[retract], new_vals])
        self.values[correct] = new_values
        keep = np.ones(n, bool)
        keep[retract] = False
        self.ids = np.concatenate([self.ids[keep], new_ids])
        self.values = np.concatenate([self.values[keep], new_vals])
        self.next_id += inserts
        return ops, ids, values


def reference_current_state(files: list[Path]) -> pa.Table:
    """Latest row per key over the whole changelog, without the index (pyarrow group_by + take)."""
    changelog = pa.concat_tables([pq.read_table(f) for f in files]).combine_chunks()
    last = changelog.group_by(KEY, use_threads=False).aggregate([("offset", "max")]).column("offset_max")
    rows = changelog.take(pc.subtract(last, changelog.column("offset")[0]))  # offsets are dense
    rows = rows.filter(pc.is_in(rows.column("op"), pa.array([0, 3], pa.int32())))
    return rows.sort_by("offset").drop_columns(["op", "system_time"])


def index_read(files: list[tuple[Path, int, int]], valid) -> pa.Table:
    schema = pq.read_schema(files[0][0])
    columns = pa.schema([schema.field(c) for c in ("offset", "event_time", KEY, "value", "label")])
    parts = [p for path, s, e in files if (p := read_valid_rows(path, columns, valid, s, e)) is not None]
    return pa.concat_tables(parts)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--snapshots", type=int, default=30)
    parser.add_argument("--churn", type=float, default=0.01)
    args = parser.parse_args()

    source = SnapshotSource(args.keys)
    index = StateIndex([KEY])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files: list[tuple[Path, int, int]] = []
        start = 0
        update_s: list[float] = []
        save_s: list[float] = []
        print(f"keys={args.keys} snapshots={args.snapshots} churn={args.churn:.2%}")
        print(f"{'snapshot':>8} {'records':>9} {'update ms':>10} {'save ms':>8} {'valid rows':>11}")
        for snap in range(args.snapshots):
            ops, ids, values = source.first() if snap == 0 else source.next(args.churn)
            when = T0 + timedelta(hours=snap)
            path = root / f"{snap:03d}.parquet"
            pq.write_table(changelog_table(start, ops, ids, values, when), path)
            end = start + len(ops) - 1
            t = time.perf_counter()
            records = pq.read_table(path, columns=["offset", "op", KEY])
            batch = ChangeBatch(snap, Multihash.sha3_256(str(snap).encode()), when, (start, end), records)
            update(index, [batch])
            update_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            save_index(index, root / "state-index")
            save_s.append(time.perf_counter() - t)
            files.append((path, start, end))
            start = end + 1
            print(
                f"{snap + 1:>8} {len(ops):>9} {update_s[-1] * 1000:>10.1f} {save_s[-1] * 1000:>8.1f} {len(index.current):>11}"
            )
        steady = update_s[1:]
        print(
            f"update after the first snapshot: median {np.median(steady) * 1000:.1f} ms, "
            f"snapshot {args.snapshots} / snapshot 2 = {update_s[-1] / update_s[1]:.2f}, "
            f"mean of last 5 / mean of snapshots 2-6 = {np.mean(update_s[-5:]) / np.mean(update_s[1:6]):.2f}"
        )
        print(f"save after the first snapshot: median {np.median(save_s[1:]) * 1000:.1f} ms")
        assert len(index.current) == len(source.ids)

        t = time.perf_counter()
        via_index = index_read(files, index.current_offsets())
        index_s = time.perf_counter() - t
        t = time.perf_counter()
        reference = reference_current_state([f for f, _, _ in files])
        reference_s = time.perf_counter() - t
        assert via_index.equals(reference), "index read differs from the reference projection"
        print(
            f"current state ({via_index.num_rows} rows): index {index_s * 1000:.0f} ms, "
            f"reference group_by over {start} changelog rows {reference_s * 1000:.0f} ms "
            f"({reference_s / index_s:.1f}x), same rows"
        )
        middle = args.snapshots // 2
        t = time.perf_counter()
        valid = index.offsets_as_at(T0 + timedelta(hours=middle - 1))
        as_at_bitmap_s = time.perf_counter() - t
        as_at = index_read(files[:middle], valid)
        as_at_s = time.perf_counter() - t
        print(
            f"as-at snapshot {middle} ({as_at.num_rows} rows): bitmap {as_at_bitmap_s * 1000:.1f} ms, "
            f"with read {as_at_s * 1000:.0f} ms"
        )
        print(f"peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
