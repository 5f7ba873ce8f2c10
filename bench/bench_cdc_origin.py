"""Benchmark: what naming a CDC refusal's records by file and line costs a ChangelogStream batch that passes.

Two timings on one Spark session (local[2]), alternated so that a loaded machine weighs on both sides alike:

* **merge**: ``merge_changelog_stream`` of a batch of N ``+A`` records (default 1,000,000; materialised
  first, as the ingest reads a CDC batch) against no state, run to the end (Spark's ``noop`` sink), with
  the code of ``--before`` (a copy of ``odfproj/ingest/cdc.py`` before the change, loaded under another
  module name) and with the current one, given a ``RecordOrigin`` as the ingest passes it: for one file,
  and for two files, where each record carries its file's name (``RECORD_FILE``);
* **read**: ``read_files`` of the same records as two CSV files, materialised, without and with the
  ``file_column`` that gives each record its file's name (what a push of several files adds).

Usage: ``.venv/bin/python bench/bench_cdc_origin.py --before OLD_CDC_PY [--rows N] [--repeats R]``
(``git show COMMIT:odfproj/ingest/cdc.py > /tmp/cdc_before.py`` for ``OLD_CDC_PY``).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.ingest.cdc import RECORD_FILE, RecordOrigin, merge_changelog_stream
from odfproj.ingest.read import read_files
from odfproj.odf import model

SCHEMA = ("op STRING", "id BIGINT", "name STRING")


def write_csv(path: Path, first: int, count: int) -> None:
    with open(path, "w") as f:
        f.write("op,id,name\n")
        f.writelines(f"+A,{i},name-{i}\n" for i in range(first, first + count))


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="odfproj/ingest/cdc.py before the change")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("cdc_before", args.before)
    assert spec is not None and spec.loader is not None
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)

    from pyspark.sql import functions as F

    spark = SparkSessionHolder(SparkSettings(master="local[2]", app_name="bench-cdc")).get()
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / "a.csv", Path(tmp) / "b.csv"]
        write_csv(files[0], 0, args.rows // 2)
        write_csv(files[1], args.rows // 2, args.rows - args.rows // 2)
        step = model.ReadStepCsv(header=True, schema=SCHEMA)
        at = F.lit("2026-01-01 00:00:00").cast("timestamp").alias("event_time")
        plain = read_files(spark, step, files).select("*", at).localCheckpoint(eager=True)
        carrying = (
            read_files(spark, step, files, file_column=RECORD_FILE)
            .select("*", at)
            .localCheckpoint(eager=True)
        )
        never = RecordOrigin(lambda i, n: f"file {i} line {n}")

        def merged(merge: Callable, batch, **kwargs) -> Callable[[], None]:
            return lambda: merge(batch, None, ["id"], **kwargs).write.format("noop").mode("overwrite").save()

        cases = {
            "merge, before": merged(before.merge_changelog_stream, plain),
            "merge, one file": merged(merge_changelog_stream, plain, origin=never),
            "merge, two files": merged(
                merge_changelog_stream, carrying, origin=RecordOrigin(never.locate, RECORD_FILE)
            ),
            "read, two files": lambda: read_files(spark, step, files),
            "read, two files + file column": lambda: read_files(spark, step, files, file_column=RECORD_FILE),
        }
        for run in cases.values():  # warm-up
            run()
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, run in cases.items():
                times[name].append(timed(run))
    for name, values in times.items():
        print(
            f"{name:>30}: {args.rows:,} rows, median {statistics.median(values):.2f} s "
            f"(min {min(values):.2f}, max {max(values):.2f}, {args.repeats} runs)"
        )


if __name__ == "__main__":
    main()
