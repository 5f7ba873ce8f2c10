"""Benchmark: a big CSV ingested into a remote workspace on S3, against plain Spark writing it to the store.

Issue 33, point 6: "ingest of 20M rows into the store against plain Spark reading the CSV and writing Parquet to
the same store (target <= 1.2x)". Starts moto's S3 server on 127.0.0.1 (in this process, as
``bench_remote.py`` does), writes the CSV of ``bench_scale.py`` (``--rows``, id BIGINT, name STRING, value
DOUBLE, city STRING), and runs A/B pairs, each side a process of its own timed from its start to its exit
(JVM start, and for odfproj the checkout, lock and commit, included):

* **plain**: a session with exactly the settings ``odfproj run`` gives this project (``project.config.
  spark_settings``: local[2], the S3A connector and S3 settings of a workspace on S3, and the JIT for long
  work that a cold run reading a file this large gets, which is a plain JVM's), then
  ``spark.read.csv(file, header=True, schema=...).write.parquet("s3a://bench/plain-N")``;
* **odfproj**: ``odfproj --verbose run`` of a project with one root reading that file (``--merge``: Append,
  Ledger or Snapshot on ``id``), its workspace ``s3://bench/ws-N``, no warm engine.

The pairs alternate (A, B, A, B...) and the ratio is taken within each pair, with the load average at its
start. odfproj's peak RSS is its Python process's (VmHWM); the JVM is a process of its own. On Linux each
side's CPU-seconds are also shown, the whole machine's (``/proc/stat``: Python, JVM and the S3 server alike):
where both sides keep every core busy, the wall-time ratio cannot fall below the CPU ratio.

    .venv/bin/python bench/bench_remote_ingest.py [--rows 20000000] [--merge Append] [--repeat 2] [--plain-v2]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.manifests
from bench.bench_remote import BUCKET, run, start_store
from bench.bench_scale import SCHEMA, generate
from tests import manifests

T = TypeVar("T")

#: The plain side: the session ``odfproj run`` would make for the project, then one read and one write.
_PLAIN = """
import sys, time
from pathlib import Path
from odfproj.engine.session import SparkSessionHolder
from odfproj.project.config import load_project, spark_settings
project, target = Path(sys.argv[1]), sys.argv[2]
csv = project / "data" / "rows.csv"
holder = SparkSessionHolder(spark_settings(load_project(project), None))
holder.size_work_by(lambda: csv.stat().st_size)  # the JIT of a plain JVM for a large file, as run's
spark = holder.get()
for setting in sys.argv[4:]:  # --plain-v2: the file committer's algorithm 2 (one rename per file, not two)
    spark.conf.set(*setting.split("=", 1))
spark.read.csv(str(csv), header=True, schema=sys.argv[3]).write.parquet(target)
holder.stop()
"""


def machine_cpu_seconds() -> float | None:
    """CPU-seconds the whole machine has spent busy since boot (``/proc/stat``); ``None`` off Linux.

    Taken around each side, the difference counts every process the side keeps busy: its Python, its
    JVM and the S3 server answering it (which shares the cores). On a machine whose cores both sides
    keep busy, the ratio of wall times cannot fall below the ratio of these.
    """
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def cpu_during(step: Callable[..., T], *args: Any) -> tuple[T, float | None]:
    """``step(*args)``'s result and the machine's busy CPU-seconds while it ran (``None`` off Linux)."""
    before = machine_cpu_seconds()
    result = step(*args)
    after = machine_cpu_seconds()
    return result, (after - before if before is not None and after is not None else None)


def project_at(folder: Path, csv: Path, merge: str) -> Path:
    (folder / "datasets").mkdir(parents=True)
    (folder / "data").mkdir()
    os.link(csv, folder / "data" / "rows.csv")  # the same file, not a copy
    (folder / "odfproj.yaml").write_text("name: bench-remote-ingest\n")
    strategy = {"kind": merge, **({"primaryKey": ("id",)} if merge != "Append" else {})}
    root = manifests.root("bench.rows", path="data/rows.csv", schema=list(SCHEMA), merge=strategy)
    (folder / "datasets" / "bench.rows.yaml").write_text(root)
    return folder


#: The setting of ``--plain-v2``: Hadoop's file committer renames each task's file once, into place, instead of
#: twice (into the job's folder at task commit, then into place at job commit). On S3A a rename is a copy.
COMMITTER_V2 = (
    "mapreduce.fileoutputcommitter.algorithm.version=2"  # a session setting reaches the write's Hadoop conf
)


def plain(project: Path, env: dict[str, str], target: str, *settings: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PLAIN, str(project), target, ", ".join(SCHEMA), *settings],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"plain Spark failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--merge", choices=("Append", "Ledger", "Snapshot"), default="Append")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument(
        "--plain-v2", action="store_true", help="also time plain Spark with the file committer's algorithm 2"
    )
    args = parser.parse_args()

    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    server, aws = start_store()
    work = Path(tempfile.mkdtemp(prefix="bench-remote-ingest-", dir=args.work))
    try:
        csv = work / "rows.csv"
        generate(csv, args.rows)
        rows = []
        for i in range(args.repeat):
            project = project_at(work / f"project-{i}", csv, args.merge)
            env = {
                **os.environ,
                **aws,
                "ODFPROJ_WORKSPACE": f"s3://{BUCKET}/ws-{i}",
                "ODFPROJ_WARM_ENGINE": "off",
            }
            load = os.getloadavg()[0]
            a, a_cpu = cpu_during(plain, project, env, f"s3a://{BUCKET}/plain-{i}")
            b, b_cpu = cpu_during(run, project, env, f"odfproj run {i}")
            v2 = plain(project, env, f"s3a://{BUCKET}/plain-v2-{i}", COMMITTER_V2) if args.plain_v2 else None
            rows.append((load, a, b, v2, a_cpu, b_cpu))
            shutil.rmtree(project / ".odf", ignore_errors=True)
        load = os.getloadavg()
        print(
            f"# bench_remote_ingest {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
            f"{os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
        size = csv.stat().st_size / 2**20
        print(f"# {args.rows:,} rows ({size:.0f} MiB of CSV), {args.merge} root, workspace on moto S3")
        v2_head = " plain, committer v2 | ratio to it |" if args.plain_v2 else ""
        print(
            "| pair | load (1 min) | plain Spark to S3 | odfproj run | ratio |"
            f"{v2_head} odfproj written | driver peak RSS | machine CPU, plain | odfproj | CPU ratio |"
        )
        print("| --- " * (10 + 2 * args.plain_v2) + "|")
        for i, (load_1, a, b, v2, a_cpu, b_cpu) in enumerate(rows):
            v2_cells = f" {v2:.1f} s | {b['seconds'] / v2:.2f} |" if v2 is not None else ""
            cpu_cells = (
                f" {a_cpu:.1f} s | {b_cpu:.1f} s | {b_cpu / a_cpu:.2f} |"
                if a_cpu and b_cpu is not None
                else " n/a | n/a | n/a |"
            )
            print(
                f"| {i + 1} | {load_1:.2f} | {a:.1f} s | {b['seconds']:.1f} s | {b['seconds'] / a:.2f} |"
                f"{v2_cells} {b['written']} | {b['peak_mb']:.0f} MB |{cpu_cells}"
            )
    finally:
        server.stop()  # type: ignore[attr-defined]
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
