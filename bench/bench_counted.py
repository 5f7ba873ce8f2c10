"""A/B in one process: an ingest numbered from the read phase's counts, against the same numbered by a count job.

Since session 26, an Append (or a Ledger of one event time) of a CSV read line by line is numbered from
the records per split that the driver counts on its pass over the file (``ingest.csv_lines``), with no
Spark job counting them. This benchmark ingests ``bench_scale.py``'s CSV both ways, alternated in one
process and one JVM (so the JIT and the machine's drift weigh on both alike), and prints each ingest's
wall time, the JVM's CPU time (``/proc/<pid>/stat``) and the driver's. The counted side gets the read
phase's proof that records are lines, without the counts: what the pipeline did before.

Usage: ``.venv/bin/python bench/bench_counted.py [--rows N] [--rounds R] [--merge append|ledger]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale


def _jvm_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="pairs, each side first in turn")
    parser.add_argument("--merge", choices=("append", "ledger"), default="append")
    args = parser.parse_args()

    from pyspark import SparkContext

    from odfproj.ingest import read
    from odfproj.ingest.csv_lines import LineScan
    from odfproj.odf import model
    from odfproj.storage.workspace import Workspace

    folder = Path(tempfile.mkdtemp(prefix="odfproj-bench-counted-"))
    try:
        project = folder / "project"
        (project / "data").mkdir(parents=True)
        csv = project / "data" / "rows.csv"
        bench_scale.generate(csv, args.rows)
        holder, engine = bench_scale._engine(None, csv)
        spark = holder.get()
        spark.range(1000).selectExpr("id * 2 AS x").collect()  # warm-up: JVM, codegen, first job
        jvm = SparkContext._gateway.proc.pid
        counted_scan = read.scan_lines

        def without_counts(*a, **k) -> LineScan:
            return LineScan(counted_scan(*a, **k).records_are_lines)

        print(f"{args.rows:,} rows, {csv.stat().st_size / 1e6:.0f} MB, {args.merge}, {os.cpu_count()} CPUs")
        merge = bench_scale._merges()[args.merge]
        try:
            for i in range(args.rounds):
                for side in ("counted", "predicted") if i % 2 == 0 else ("predicted", "counted"):
                    read.scan_lines = counted_scan if side == "predicted" else without_counts
                    ws = Workspace(folder / f"ws-{i}-{side}")
                    dataset = ws.create(
                        "bench.counted", model.DatasetKind.Root, events=[bench_scale._source(merge)]
                    )
                    cpu, driver, start = _jvm_cpu(jvm), time.process_time(), time.perf_counter()
                    bench_scale.ingest_polling_(dataset, engine, project)
                    print(
                        f"{side}: {time.perf_counter() - start:.1f} s, JVM CPU {_jvm_cpu(jvm) - cpu:.1f} s, "
                        f"driver CPU {time.process_time() - driver:.1f} s, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    shutil.rmtree(folder / f"ws-{i}-{side}", ignore_errors=True)
        finally:
            read.scan_lines = counted_scan
            holder.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
