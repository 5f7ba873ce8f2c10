"""Benchmark of root ingestion (odfproj.ingest.pipeline) against plain PySpark, in one process.

Scenarios (data generated into a temporary folder):

* **Append**: a 1,000,000-row CSV (id BIGINT, name STRING, value DOUBLE, city STRING) ingested by
  ``ingest_polling`` (FilesGlob, Append merge: fetch, strict FAILFAST read, event time, offsets, Parquet
  files written by Spark tasks, logical + physical hashes streamed from them, atomic commit) versus plain
  ``spark.read.csv(path, schema).write.parquet(out)`` on the same file. Both are run ``--repeat``
  times after a warm-up job (JVM start excluded); the best of each is compared (target ratio <= 1.5).
* **Snapshot**: a 1,000,000-row snapshot ingested with the Snapshot merge strategy, then a second
  snapshot of the same keys with 1% of the rows changed; the second ingest (current state from the
  whole history, full outer join, -C/+C rows) is timed.

Usage: ``.venv/bin/python bench/bench_ingest.py [--rows N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf import model
from odfproj.storage.workspace import Workspace

SCHEMA = ("id BIGINT", "name STRING", "value DOUBLE", "city STRING")
CITIES = np.array(["Oslo", "Lima", "Pune", "Kyiv", "Accra", "Quito", "Hanoi", "Perth"])


def write_csv(path: Path, rows: int, *, changed: float = 0.0, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    values = np.round(rng.random(rows) * 1000, 3)
    if changed:
        picked = np.random.default_rng(seed + 1).choice(rows, size=int(rows * changed), replace=False)
        values[picked] += 1.0
    table = pa.table(
        {
            "id": ids,
            "name": pa.array([f"name-{i}" for i in range(rows)]),
            "value": values,
            "city": CITIES[ids % len(CITIES)],
        }
    )
    pacsv.write_csv(table, path)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    holder = SparkSessionHolder(
        SparkSettings(
            master="local[2]", conf={"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "4"}
        )
    )
    engine = SparkEngine(holder)
    spark = holder.get()
    tmp = Path(tempfile.mkdtemp(prefix="odfproj-bench-ingest-"))
    try:
        project = tmp / "project"
        (project / "data").mkdir(parents=True)
        csv = project / "data" / "rows.csv"
        write_csv(csv, args.rows)
        size_mb = csv.stat().st_size / 1e6
        print(f"CSV: {args.rows:,} rows, {size_mb:.1f} MB")

        spark.range(1000).selectExpr("id * 2 AS x").collect()  # warm-up: JVM, codegen, first job

        ddl = ", ".join(SCHEMA)
        plain: list[float] = []
        for i in range(args.repeat):
            out = tmp / f"plain-{i}"
            plain.append(
                timed(
                    lambda out=out: spark.read.csv(str(csv), header=True, schema=ddl).write.parquet(str(out))
                )
            )
        ours: list[float] = []
        records = 0
        for i in range(args.repeat):
            ws = Workspace(tmp / f"ws-{i}")
            ds = ws.create(
                "bench.append",
                model.DatasetKind.Root,
                events=[
                    model.SetPollingSource(
                        fetch=model.FetchStepFilesGlob(path="data/rows.csv"),
                        read=model.ReadStepCsv(header=True, schema=SCHEMA),
                        merge=model.MergeStrategyAppend(),
                    )
                ],
            )
            start = time.perf_counter()
            result = ingest_polling(ds, engine, project_root=project)
            ours.append(time.perf_counter() - start)
            records = result.records_added
        assert records == args.rows, records
        print(f"plain PySpark read.csv -> write.parquet: best {min(plain):.2f} s  (runs: {_fmt(plain)})")
        print(f"odfproj ingest, Append:                 best {min(ours):.2f} s  (runs: {_fmt(ours)})")
        print(f"ratio (best/best): {min(ours) / min(plain):.2f}")

        # --- Snapshot with 1% changed rows --------------------------------------------------
        snap_project = tmp / "snap"
        (snap_project / "data").mkdir(parents=True)
        write_csv(snap_project / "data" / "snap-2026-01-01.csv", args.rows)
        ws = Workspace(tmp / "ws-snap")
        ds = ws.create(
            "bench.snapshot",
            model.DatasetKind.Root,
            events=[
                model.SetPollingSource(
                    fetch=model.FetchStepFilesGlob(
                        path="data/snap-*.csv",
                        event_time=model.EventTimeSourceFromPath(
                            pattern=r"snap-(\d{4}-\d{2}-\d{2})\.csv", timestamp_format="%Y-%m-%d"
                        ),
                    ),
                    read=model.ReadStepCsv(header=True, schema=SCHEMA),
                    merge=model.MergeStrategySnapshot(primary_key=("id",)),
                )
            ],
        )
        start = time.perf_counter()
        first = ingest_polling(ds, engine, project_root=snap_project)
        first_seconds = time.perf_counter() - start
        write_csv(snap_project / "data" / "snap-2026-01-02.csv", args.rows, changed=0.01)
        start = time.perf_counter()
        second = ingest_polling(ds, engine, project_root=snap_project)
        second_seconds = time.perf_counter() - start
        print(f"Snapshot, first snapshot ({first.records_added:,} +A rows): {first_seconds:.2f} s")
        print(
            f"Snapshot, second snapshot with 1% changed ({second.records_added:,} -C/+C rows): "
            f"{second_seconds:.2f} s"
        )
    finally:
        holder.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
