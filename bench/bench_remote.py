"""Benchmark: what a remote workspace on S3 moves through the driver (issue 33, point 6).

Starts moto's S3 server on 127.0.0.1 (in this process), generates a project of ``--roots`` roots (FilesGlob
CSV, Append and Snapshot merges alternating, a high-entropy ``payload`` column so the Parquet files are about
the size of the data) each with a grouped derivative (a count and sum per category), and runs the real CLI
(``odfproj --verbose run``, one subprocess each) from CI-like runners that share the workspace
``s3://bench/ws``. Each run's last line says what it moved (``remote workspace ...: N request(s), X read, Y
written``, counted by ``storage.object_store.TRANSFERS``); the script reports:

1. the first run (ingest everything, upload it) and the data the store then holds;
2. a no-op run from a fresh runner (a clone of the project, an empty cache);
3. an update after one new small file per root, on the runner that did 1 (its cache holds everything);
4. the same update on a fresh runner ("a fresh runner's first update").

Usage (by hand; not a test):

    .venv/bin/python bench/bench_remote.py [--roots 4] [--rows 4000000] [--work DIR]
    .venv/bin/python bench/bench_remote.py --quick      # 2 roots x 20,000 rows, a smoke run
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.manifests
from tests import manifests

BUCKET = "bench"
URL = f"s3://{BUCKET}/ws"
LINE = re.compile(r"remote workspace \S+: (\d+) request\(s\), ([\d.]+ \w+) read, ([\d.]+ \w+) written")

#: The roots' columns; ``payload`` is 48 random hex characters a row, so the files do not compress away.
COLUMNS = ("id BIGINT", "cat STRING", "amount BIGINT", "payload STRING")
TOTALS = (
    "SELECT cat, max(event_time) AS event_time, count(*) AS n, sum(amount) AS total FROM src GROUP BY cat"
)


def write_csv(path: Path, start: int, rows: int, seed: int) -> None:
    """``rows`` rows with ids from ``start``: 16 categories, and 48 random hex characters per row."""
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = 1_000_000
    with pacsv.CSVWriter(path, _SCHEMA) as writer:
        for first in range(0, rows, chunk):
            n = min(chunk, rows - first)
            payload = rng.integers(0, 256, size=(n, 24), dtype=np.uint8)
            table = pa.table(
                {
                    "id": pa.array(np.arange(start + first, start + first + n, dtype=np.int64)),
                    "cat": pa.array([f"c{i}" for i in rng.integers(0, 16, size=n)]),
                    "amount": pa.array(rng.integers(0, 1000, size=n, dtype=np.int64)),
                    "payload": pa.array([bytes(row).hex() for row in payload]),
                },
                schema=_SCHEMA,
            )
            writer.write_table(table)


_SCHEMA = pa.schema(
    [("id", pa.int64()), ("cat", pa.string()), ("amount", pa.int64()), ("payload", pa.string())]
)


def generate(root: Path, roots: int, rows: int) -> list[str]:
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: bench-remote\n")
    names = []
    for i in range(roots):
        name = f"root{i}"
        merge = None if i % 2 == 0 else {"kind": "Snapshot", "primaryKey": ("id",)}
        root_text = manifests.root(name, path=f"data/{name}/*.csv", schema=COLUMNS, merge=merge)
        (root / "datasets" / f"{name}.yaml").write_text(root_text)
        totals = manifests.derivative(f"{name}.totals", {"src": name}, TOTALS)
        (root / "datasets" / f"{name}.totals.yaml").write_text(totals)
        write_csv(root / "data" / name / "0001.csv", 0, rows, seed=i)
        names.append(name)
    return names


def add_file_per_root(project: Path, names: list[str], rows: int, step: int) -> None:
    """One small new file per root: new rows for an Append root, the next snapshot for a Snapshot root
    (the old snapshot plus ``rows`` rows: a Snapshot root's file is the whole table)."""
    for i, name in enumerate(names):
        folder = project / "data" / name
        if i % 2 == 0:
            write_csv(folder / f"{step:04d}.csv", 10**9 + step * rows, rows, seed=1000 + step)
        else:
            latest = sorted(folder.glob("*.csv"))[-1]
            target = folder / f"{step:04d}.csv"
            shutil.copyfile(latest, target)
            extra = target.with_suffix(".extra")
            write_csv(extra, 10**9 + step * rows, rows, seed=2000 + step)
            with target.open("ab") as out, extra.open("rb") as more:
                more.readline()  # its header
                shutil.copyfileobj(more, out)
            extra.unlink()


def run(project: Path, env: dict[str, str], what: str) -> dict[str, object]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _WITH_PEAK, "--verbose", "run"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(
            f"{what}: odfproj run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    found = LINE.findall(done.stderr + done.stdout)
    if not found:
        sys.exit(f"{what}: no transfer line in the output:\n{done.stderr[-2000:]}")
    requests, read, written = found[-1]
    peak = re.findall(r"peak-rss-kib (\d+)", done.stderr)
    return {
        "what": what,
        "seconds": seconds,
        "requests": int(requests),
        "read": read,
        "written": written,
        "peak_mb": int(peak[-1]) / 1024 if peak else float("nan"),
    }


#: ``odfproj ARGS`` in this interpreter, printing the process's peak RSS (the driver's Python side; the
#: JVM is a process of its own) on stderr as it exits. VmHWM, not ``ru_maxrss``, which on Linux keeps the
#: forking parent's peak across ``exec`` (this script's, with the S3 server's objects in memory).
_WITH_PEAK = (
    "import atexit, runpy, sys\n"
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            sys.stderr.write('peak-rss-kib %d\\n' % int(line.split()[1]))\n"
    "atexit.register(_peak)\n"
    "sys.argv = ['odfproj', *sys.argv[1:]]\n"
    "runpy.run_module('odfproj', run_name='__main__')\n"
)


def clone(project: Path, to: Path) -> Path:
    shutil.copytree(project, to, ignore=shutil.ignore_patterns(".odf"))
    return to


def store_bytes(prefix: str) -> tuple[int, int]:
    import boto3

    total = count = 0
    for page in boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for item in page.get("Contents", []):
            if "/data/" in item["Key"]:
                total += item["Size"]
                count += 1
    return total, count


def start_store() -> tuple[object, dict[str, str]]:
    """moto's S3 server on 127.0.0.1 in this process, with the bucket ``bench``; the server and the AWS
    variables that point at it (also set in this process's environment)."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    aws = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "AKIABENCHREMOTE",
        "AWS_SECRET_ACCESS_KEY": "bench-remote-secret",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    }
    os.environ.update(aws)
    import boto3

    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return server, aws


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roots", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows of each root's first file")
    parser.add_argument("--new-rows", type=int, default=1000, help="rows of each root's new file")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.roots, args.rows = 2, 20_000

    server, aws = start_store()
    env = {**os.environ, **aws, "ODFPROJ_WORKSPACE": URL, "ODFPROJ_WARM_ENGINE": "off"}
    work = Path(tempfile.mkdtemp(prefix="bench-remote-", dir=args.work))
    try:
        first = work / "runner1"
        names = generate(first, args.roots, args.rows)
        results = [run(first, env, "first run (ingest everything)")]
        data, objects = store_bytes("ws/datasets/")
        results.append(run(clone(first, work / "runner2"), env, "no-op run, fresh runner"))
        add_file_per_root(first, names, args.new_rows, 2)
        fresh = clone(first, work / "runner3")  # before runner 1's update: the same new files
        results.append(run(first, env, "update, one new file per root (warm cache)"))
        add_file_per_root(fresh, names, args.new_rows, 3)
        results.append(run(fresh, env, "update, one new file per root (fresh runner)"))
        load = os.getloadavg()
        print(
            f"# bench_remote {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} cores, "
            f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
        print(
            f"# {args.roots} roots x {args.rows:,} rows (+ a grouped derivative each); the store holds "
            f"{data / 2**20:.1f} MiB in {objects} data files"
        )
        print("| run | seconds | requests | read by the driver | written by the driver | driver peak RSS |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in results:
            print(
                f"| {r['what']} | {r['seconds']:.1f} | {r['requests']} | {r['read']} | {r['written']} "
                f"| {r['peak_mb']:.0f} MB |"
            )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
