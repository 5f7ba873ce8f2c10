"""Scale benchmark: a big CSV ingest and derivatives over it, with a 1 GB Spark driver and a bounded Python process.

What it measures (``--rows``, default 20,000,000 rows of id BIGINT, name STRING, value DOUBLE, city STRING):

* **Append**, **Ledger** (``primaryKey: [id]``) and **Snapshot** (``primaryKey: [id]``) ingest of the CSV
  into an empty dataset (``ingest_polling``: FilesGlob, FAILFAST read, merge, offsets by per-partition
  counts, files written by Spark tasks, streamed hashes, one atomic commit), each interleaved with
  plain ``spark.read.csv(...).write.parquet(...)`` of the same file (A, B, A, B ...: the machine is
  shared, so the ratio is taken between neighbours in one run, with the load average at each pair).
* **Columns**, the floors of an ingest: the plain job, the same job writing the four columns ODF stores
  before the data (an offset per record, the op, the system and event times, with odfproj's types: an
  Append's least work), and that sorted by ``id`` (a Snapshot's least: its records are in key order),
  interleaved likewise. Not a scenario of the default set: ``--scenarios columns``.
* **Derivatives** over the Append dataset: a filter (``WHERE value >= 500``) and an aggregation
  (``GROUP BY city``), each brought up to date once (``update_derivative``).

Every scenario runs in its own worker process with ``spark.driver.memory=1g``, so the peak RSS of
the Python process (``getrusage(RUSAGE_SELF)``) and of its children (the JVM: ``RUSAGE_CHILDREN``,
read after the session is stopped and the JVM reaped) are reported separately. The CSV is generated
by another process beforehand, so its generation does not count.

Usage: ``.venv/bin/python bench/bench_scale.py [--rows N] [--repeat R] [--rows-per-file N]``
(try ``--rows 1000000`` first).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

SCHEMA = ("id BIGINT", "name STRING", "value DOUBLE", "city STRING")
CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Accra", "Quito", "Hanoi", "Perth"]
CHUNK = 1_000_000


def generate(path: Path, rows: int) -> None:
    """Write the CSV in chunks of a million rows (bounded memory)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(1)
    cities = np.array(CITIES)
    schema = pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("value", pa.float64()), ("city", pa.string())]
    )
    with pacsv.CSVWriter(path, schema) as writer:
        for start in range(0, rows, CHUNK):
            ids = np.arange(start, min(rows, start + CHUNK), dtype=np.int64)
            writer.write_table(
                pa.table(
                    {
                        "id": ids,
                        "name": pa.array([f"name-{i}" for i in ids]),
                        "value": np.round(rng.random(len(ids)) * 1000, 3),
                        "city": cities[ids % len(cities)],
                    },
                    schema=schema,
                )
            )


def _engine(rows_per_file: int | None, csv: Path):
    """odfproj's engine as a cold ``odfproj run`` of this CSV gets it: the JVM is sized by the file
    (``SparkSessionHolder.size_work_by``), so a large one compiles for long work, as a plain PySpark
    session's JVM does (the plain job runs in the same JVM)."""
    from odfproj.engine.session import SparkSessionHolder, SparkSettings
    from odfproj.engine.spark import SparkEngine

    holder = SparkSessionHolder(
        SparkSettings(
            master="local[2]", conf={"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "4"}
        )
    )
    holder.size_work_by(lambda: csv.stat().st_size)
    return holder, SparkEngine(holder, rows_per_file=rows_per_file)


def _merges() -> dict[str, object]:
    from odfproj.odf import model

    return {
        "append": model.MergeStrategyAppend(),
        "ledger": model.MergeStrategyLedger(primary_key=("id",)),
        "snapshot": model.MergeStrategySnapshot(primary_key=("id",)),
    }


def _source(merge) -> object:
    from odfproj.odf import model

    return model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path="data/rows.csv"),
        read=model.ReadStepCsv(header=True, schema=SCHEMA),
        merge=merge,
    )


def _usage() -> dict[str, float]:
    """Peak RSS in MB of this process and of its reaped children (ru_maxrss is in KiB on Linux)."""
    return {
        "python_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def worker(scenario: str, project: Path, work: Path, repeat: int, rows_per_file: int | None) -> dict:
    """One scenario in this process: its timings, then (after the JVM is stopped) the peak RSS figures."""
    from odfproj.odf import model
    from odfproj.storage.workspace import Workspace
    from odfproj.transform.coordinator import update_derivative

    csv = project / "data" / "rows.csv"
    holder, engine = _engine(rows_per_file, csv)
    spark = holder.get()
    merges = _merges()
    out: dict = {"scenario": scenario, "large_work": holder.settings.large_work}
    try:
        spark.range(1000).selectExpr("id * 2 AS x").collect()  # warm-up: JVM, codegen, first job
        if scenario in merges:
            merge = merges[scenario]
            plain, ours, blocks, loads = [], [], 0, []
            for i in range(repeat):
                loads.append(os.getloadavg()[0])
                target = work / f"plain-{scenario}-{i}"
                start = time.perf_counter()
                _read(spark, csv).write.parquet(str(target))
                plain.append(time.perf_counter() - start)
                shutil.rmtree(target, ignore_errors=True)
                ws = Workspace(work / f"ws-{scenario}-{i}")
                ds = ws.create("bench.scale", model.DatasetKind.Root, events=[_source(merge)])
                start = time.perf_counter()
                result = ingest_polling_(ds, engine, project)
                ours.append(time.perf_counter() - start)
                blocks = result.blocks_added
                out["records"] = result.records_added
                shutil.rmtree(work / f"ws-{scenario}-{i}", ignore_errors=True)
            out.update(plain_s=plain, odfproj_s=ours, blocks=blocks, load=loads)
        elif scenario == "columns":  # the floors: the plain job writing ODF's system columns, and sorted too
            jobs = {
                "plain": lambda: _read(spark, csv),
                "with ODF's system columns": lambda: _with_system_columns(_read(spark, csv)),
                "sorted by id, with the columns": lambda: _with_system_columns(
                    _read(spark, csv).orderBy("id")
                ),
            }
            timings: dict[str, list[float]] = {name: [] for name in jobs}
            loads = []
            for i in range(repeat):
                loads.append(os.getloadavg()[0])
                for name, frame in jobs.items():
                    target = work / f"columns-{i}"
                    start = time.perf_counter()
                    frame().write.parquet(str(target))
                    timings[name].append(time.perf_counter() - start)
                    shutil.rmtree(target, ignore_errors=True)
            out.update(floors=timings, load=loads)
        else:  # derivatives: a filter and an aggregation over an Append dataset
            ws = Workspace(work / "ws-derivatives")
            root = ws.create(
                "bench.scale", model.DatasetKind.Root, events=[_source(model.MergeStrategyAppend())]
            )
            start = time.perf_counter()
            ingest_polling_(root, engine, project)
            out["ingest_s"] = time.perf_counter() - start
            queries = {
                "filter": "SELECT * FROM src WHERE value >= 500",
                "aggregate": "SELECT city, count(*) AS n, sum(value) AS total, max(event_time) AS event_time "
                "FROM src GROUP BY city",
            }
            for name, sql in queries.items():
                ws.create(
                    name,
                    model.DatasetKind.Derivative,
                    events=[
                        model.SetTransform(
                            inputs=(
                                model.TransformInput(dataset_ref=root.dataset_id.as_did_str(), alias="src"),
                            ),
                            transform=model.TransformSql(engine="spark", query=sql),
                        )
                    ],
                )
                start = time.perf_counter()
                outcome = update_derivative(ws, name, engine, datetime.now(UTC))
                out[f"{name}_s"] = time.perf_counter() - start
                out[f"{name}_records"] = outcome.records
    finally:
        holder.stop()
        _reap_jvm()
    out.update(_usage())
    return out


def _read(spark, csv: Path):
    return spark.read.csv(str(csv), header=True, schema=", ".join(SCHEMA))


def _with_system_columns(frame):
    """``frame`` with columns of the types and values an Append stores before its own: an offset per
    record (not dense: only the cost counts), the op, and the system and event times of the batch."""
    from pyspark.sql import functions as F

    now = F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp")
    return frame.select(
        F.monotonically_increasing_id().alias("offset"),
        F.lit(0).cast("int").alias("op"),
        now.alias("system_time"),
        now.alias("event_time"),
        "*",
    )


def _reap_jvm() -> None:
    """End the gateway JVM and wait for it, so ``RUSAGE_CHILDREN`` holds its peak RSS (bench only: py4j internals)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:
        proc.stdin.close()  # the JVM exits when its stdin closes
        proc.wait(timeout=120)


def ingest_polling_(dataset, engine, project: Path):
    from odfproj.ingest.pipeline import ingest_polling

    return ingest_polling(dataset, engine, project_root=project)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)  # "--work" must not pass for the hidden "--worker"
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="A/B pairs per ingest scenario")
    parser.add_argument("--rows-per-file", type=int, default=None, help="default: odfproj's default")
    parser.add_argument("--scenarios", default="append,ledger,snapshot,derivatives")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generate(Path(args.generate), args.rows)
        return
    if args.worker:
        folder = Path(args.dir)
        result = worker(args.worker, folder / "project", folder / "work", args.repeat, args.rows_per_file)
        print("RESULT " + json.dumps(result))
        return

    tmp = Path(tempfile.mkdtemp(prefix="odfproj-bench-scale-"))
    try:
        (tmp / "project" / "data").mkdir(parents=True)
        (tmp / "work").mkdir()
        csv = tmp / "project" / "data" / "rows.csv"
        me = [sys.executable, str(Path(__file__).resolve())]
        subprocess.run([*me, "--generate", str(csv), "--rows", str(args.rows)], check=True)
        print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.uname().nodename}, {os.cpu_count()} CPUs")
        print(f"CSV: {args.rows:,} rows, {csv.stat().st_size / 1e6:.0f} MB; load average {os.getloadavg()}")
        for scenario in args.scenarios.split(","):
            command = [*me, "--worker", scenario, "--dir", str(tmp), "--repeat", str(args.repeat)]
            if args.rows_per_file is not None:
                command += ["--rows-per-file", str(args.rows_per_file)]
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
            result = json.loads(line[len("RESULT ") :])
            _report(result)
            print(f"  load average after: {os.getloadavg()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _report(r: dict) -> None:
    rss = f"Python peak RSS {r['python_peak_mb']:.0f} MB, JVM (children) peak RSS {r['children_peak_mb']:.0f} MB"
    if "floors" in r:
        plain = r["floors"]["plain"]
        for name, runs in r["floors"].items():
            ratios = ", ".join(f"{t / p:.2f}" for t, p in zip(runs, plain, strict=True))
            print(f"columns: {name} {', '.join(f'{t:.1f}' for t in runs)} s; against plain {ratios}")
        print(f"  load average (1 min) at each round {', '.join(f'{x:.1f}' for x in r['load'])}; {rss}")
        return
    if "plain_s" in r:
        pairs = ", ".join(f"{o / p:.2f}" for o, p in zip(r["odfproj_s"], r["plain_s"], strict=True))
        print(
            f"{r['scenario']}: {r['records']:,} records in {r['blocks']} blocks; odfproj "
            f"{', '.join(f'{t:.1f}' for t in r['odfproj_s'])} s, plain "
            f"{', '.join(f'{t:.1f}' for t in r['plain_s'])} s; ratio per A/B pair {pairs}; "
            f"best/best {min(r['odfproj_s']) / min(r['plain_s']):.2f}; load average (1 min) at each pair "
            f"{', '.join(f'{x:.1f}' for x in r['load'])}; {rss}; JIT for long work: {r['large_work']}"
        )
    else:
        print(
            f"derivatives: ingest {r['ingest_s']:.1f} s; filter {r['filter_s']:.1f} s "
            f"({r['filter_records']:,} records); aggregate {r['aggregate_s']:.1f} s "
            f"({r['aggregate_records']:,} records); {rss}"
        )


if __name__ == "__main__":
    main()
