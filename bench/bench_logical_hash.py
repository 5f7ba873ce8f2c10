"""Benchmark: logical hash (arrow-digest V0 in Python) against plain SHA3-256 of the same file.

Writes a 1,000,000-row x 6-column Parquet file to a temporary directory, then times, best of N runs:

* ``sha3-256``: ``hashlib.sha3_256`` over the file's bytes (the physical hash; the ceiling),
* ``logical``: :func:`odfproj.storage.hashing.logical_digest_parquet` (decode + hash).

Rates are given per MB of file on disk and per MB of in-memory Arrow data. Run it with
``.venv/bin/python bench/bench_logical_hash.py [--rows N] [--repeat N] [--threads N]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.storage.hashing import default_threads, logical_digest_parquet
from odfproj.storage.physical_hash import physical_digest

MB = 1_000_000


def make_table(rows: int, seed: int = 42) -> pa.Table:
    """Six columns shaped like an ODF data slice: ints, floats, text, event time, sparse nulls."""
    rng = np.random.default_rng(seed)
    words = np.array([f"word-{i:05d}-" + "x" * (i % 17) for i in range(5000)])
    text = words[rng.integers(0, len(words), rows)]
    int32_nulls = rng.random(rows) < 0.10
    text_nulls = rng.random(rows) < 0.10
    start_ms = 1_700_000_000_000
    return pa.table(
        {
            "offset": pa.array(np.arange(rows, dtype=np.int64)),
            "value": pa.array(rng.normal(size=rows)),
            "name": pa.array(text, pa.string()),
            "event_time": pa.array(
                start_ms + np.sort(rng.integers(0, 10**9, rows)), pa.timestamp("ms", "UTC")
            ),
            "count": pa.array(rng.integers(-(2**31), 2**31 - 1, rows, dtype=np.int32), mask=int32_nulls),
            "comment": pa.array(np.where(text_nulls, None, text[::-1]), pa.string()),
        }
    )


def best_of(repeat: int, action: Callable[[], object]) -> float:
    """Fastest wall-clock time of ``repeat`` runs: the least disturbed by other processes."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="hashing threads (default: per CPU)")
    args = parser.parse_args()

    table = make_table(args.rows)
    arrow_mb = table.nbytes / MB
    with tempfile.TemporaryDirectory(prefix="bench-logical-hash-") as tmp:
        path = Path(tmp) / "data.parquet"
        pq.write_table(table, path, compression="snappy")
        file_mb = path.stat().st_size / MB
        raw = best_of(args.repeat, lambda: physical_digest(path))
        threads = args.threads if args.threads is not None else default_threads()
        logical = best_of(args.repeat, lambda: logical_digest_parquet(path, threads=threads))
        single = best_of(args.repeat, lambda: logical_digest_parquet(path, threads=1))

    print(
        f"python {platform.python_version()}, pyarrow {pa.__version__}, numpy {np.__version__}, "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"{args.rows:,} rows x {table.num_columns} columns: file {file_mb:.1f} MB, Arrow {arrow_mb:.1f} MB; "
        f"best of {args.repeat}"
    )
    print()
    rows = (
        ("sha3-256 (file bytes)", raw),
        (f"logical, {threads} threads", logical),
        ("logical, 1 thread", single),
    )
    print(f"| {'hash':<23} | {'seconds':>7} | {'file MB/s':>9} | {'Arrow MB/s':>10} | {'vs sha3':>7} |")
    print(f"|{'-' * 25}|{'-' * 9}|{'-' * 11}|{'-' * 12}|{'-' * 9}|")
    for name, seconds in rows:
        print(
            f"| {name:<23} | {seconds:>7.3f} | {file_mb / seconds:>9.1f} | {arrow_mb / seconds:>10.1f} "
            f"| {raw / seconds:>7.1%} |"
        )
    print()
    print(
        f"logical / sha3-256 rate (file MB): {raw / logical:.1%} with {threads} threads, {raw / single:.1%} with 1 (target >= 25%)"
    )


if __name__ == "__main__":
    main()
