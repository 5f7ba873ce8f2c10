"""Benchmark of the Snapshot merge: previous state from the state index vs re-reading all history.

Scenario (issue 7): a Snapshot-merged root of N keys (default 1,000,000) receives S full snapshots
(default 30), each changing a fraction of the keys (default 1%: half of them corrected, a quarter
removed, a quarter new). Every snapshot goes through the real ingest commit
(``odfproj.ingest.pipeline.commit_batch``: merge, Parquet part, hashes, atomic commit, state index
advanced). Before each commit, on the same dataset and the same new snapshot, the merge step alone is
timed both ways, each ending in ``toArrow()`` of the records to append:

* **index**: the previous state read through the state index (``read_current_state``: valid rows
  picked by bitmap, files with none not opened) and diffed with the snapshot;
* **history**: every data file re-read and projected to the latest row per key with a window
  (``changelog.current_state``), then diffed: the approach before the index.

The two must produce the same records (checked). Printed: a per-snapshot table and the 30th/2nd ratio
of each approach; ``--plot FILE.png`` also draws them (needs matplotlib: ``pip install -e '.[bench]'``).

Usage: ``.venv/bin/python bench/bench_snapshot_merge.py [--keys N] [--snapshots S] [--churn F]
[--plot bench/snapshot_merge.png]``.
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

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.ingest.merge import merge_snapshot
from odfproj.ingest.pipeline import commit_batch, with_event_time
from odfproj.odf import model
from odfproj.odf.data_schema import Vocab
from odfproj.state.frames import read_current_state, read_history
from odfproj.storage.workspace import Workspace

T0 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)  # after the Seed
KEY = "id"


def snapshots(keys: int, count: int, churn: float, seed: int = 7):
    """Yield ``count`` full snapshots as Arrow tables (id, value, label), each ``churn`` away from the last."""
    rng = np.random.default_rng(seed)
    ids = np.arange(keys, dtype=np.int64)
    values = rng.integers(0, 1_000_000, keys)
    next_id = keys
    for n in range(count):
        if n:
            changed = max(4, int(keys * churn))
            picks = rng.choice(len(ids), changed * 3 // 4, replace=False)
            corrected, removed = picks[: changed // 2], picks[changed // 2 :]
            values = values.copy()
            values[corrected] = rng.integers(0, 1_000_000, len(corrected))
            keep = np.ones(len(ids), bool)
            keep[removed] = False
            added = np.arange(next_id, next_id + changed // 4, dtype=np.int64)
            next_id += len(added)
            ids = np.concatenate([ids[keep], added])
            values = np.concatenate([values[keep], rng.integers(0, 1_000_000, len(added))])
        labels = pc.cast(pa.array(values % 97), pa.string())
        yield pa.table({KEY: pa.array(ids), "value": pa.array(values), "label": labels})


def timed(action, *args):
    start = time.perf_counter()
    result = action(*args)
    return time.perf_counter() - start, result


def merge_by_index(engine, dataset, projection, prepared) -> pa.Table:
    """The pipeline's path: the previous state through the state index."""
    with tempfile.TemporaryDirectory(prefix="odfproj-bench-state-") as scratch:
        _, state = read_current_state(engine.session, dataset, (KEY,), Vocab(), Path(scratch))
        return merge_snapshot(prepared, None, (KEY,), state=state).toArrow()


def merge_by_history(engine, dataset, projection, prepared) -> pa.Table:
    """The path before the index: every data file re-read, latest row per key by a window."""
    history = read_history(engine.session, dataset, projection, Vocab())
    return merge_snapshot(prepared, history, (KEY,)).toArrow()


def sorted_records(table: pa.Table) -> pa.Table:
    return table.sort_by([(KEY, "ascending"), ("op", "ascending")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--snapshots", type=int, default=30)
    parser.add_argument("--churn", type=float, default=0.01)
    parser.add_argument("--plot", type=Path, default=None, help="write a PNG of merge time per snapshot")
    args = parser.parse_args()

    holder = SparkSessionHolder(
        SparkSettings(
            master="local[2]", conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "6g"}
        )
    )
    engine = SparkEngine(holder)
    strategy = model.MergeStrategySnapshot(primary_key=(KEY,))
    vocab = Vocab()
    rows: list[tuple[int, float, float, float, int]] = []
    with tempfile.TemporaryDirectory(prefix="odfproj-bench-merge-") as scratch:
        workspace = Workspace(Path(scratch) / "ws")
        dataset = workspace.create("bench.snapshots", model.DatasetKind.Root)
        for n, snapshot in enumerate(snapshots(args.keys, args.snapshots, args.churn)):
            path = Path(scratch) / f"snapshot-{n}.parquet"
            pq.write_table(snapshot, path)
            batch = engine.session.read.parquet(str(path))
            stamp = T0 + timedelta(days=n)
            index_s = history_s = float("nan")
            projection = dataset.projection()
            if projection.has_data:
                prepared, _ = with_event_time(batch, vocab, stamp)

                index_s, from_index = timed(merge_by_index, engine, dataset, projection, prepared)
                history_s, from_history = timed(merge_by_history, engine, dataset, projection, prepared)
                if not sorted_records(from_index).equals(sorted_records(from_history)):
                    raise SystemExit(f"snapshot {n}: the two merges disagree")
            commit_s, item = timed(
                lambda batch=batch, stamp=stamp, n=n: commit_batch(
                    dataset,
                    engine,
                    batch,
                    merge_strategy=strategy,
                    display_name=f"snapshot {n}",
                    source="bench",
                    event_time=stamp,
                    source_state=None,
                    system_time=stamp,
                    work_dir=Path(scratch),
                )
            )
            records = item.records if item is not None else 0
            rows.append((n + 1, index_s, history_s, commit_s, records))
            print(
                f"snapshot {n + 1:>2}: merge via index {index_s:6.2f} s, via history {history_s:6.2f} s, "
                f"commit {commit_s:6.2f} s, {records:>9,} records",
                flush=True,
            )
            path.unlink()
    holder.stop()

    second, last = rows[1], rows[-1]
    print()
    print(f"keys {args.keys:,}, snapshots {args.snapshots}, churn {args.churn:.1%}")
    print(f"merge via index:   2nd {second[1]:.2f} s, last {last[1]:.2f} s, ratio {last[1] / second[1]:.2f}")
    print(f"merge via history: 2nd {second[2]:.2f} s, last {last[2]:.2f} s, ratio {last[2] / second[2]:.2f}")
    print(f"full commit (index path): 2nd {second[3]:.2f} s, last {last[3]:.2f} s")
    print(
        f"peak RSS of the Python process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    if args.plot is not None:
        plot(rows, args, args.plot)


def plot(rows: list[tuple[int, float, float, float, int]], args: argparse.Namespace, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib: .venv/bin/pip install -e '.[bench]'") from None
    xs = [r[0] for r in rows[1:]]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(xs, [r[2] for r in rows[1:]], marker="o", label="previous state by re-reading history (window)")
    ax.plot(xs, [r[1] for r in rows[1:]], marker="o", label="previous state from the state index (bitmap)")
    ax.set_xlabel("snapshot")
    ax.set_ylabel("Snapshot merge time (s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Snapshot merge, {args.keys:,} keys, {args.churn:.0%} churn per snapshot")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)
    print(f"plot written to {out}")


if __name__ == "__main__":
    main()
