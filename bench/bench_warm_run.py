"""Benchmark: ``odfproj run`` cold against ``odfproj run`` on the warm engine (issue 20 point 5).

bench_dag.py's 50-dataset project (10 FilesGlob/CSV roots, Append and Ledger alternating, 40 Spark SQL
derivatives in 4 layers) is generated once; each round copies it twice, runs ``odfproj --cold run
--threads 2`` in one copy and ``odfproj --warm run --threads 2`` in the other (a server of the
benchmark's own, ``ODFPROJ_ENGINE_DIR`` in the temporary folder, started and warmed before the rounds,
its start timed apart), then writes one more CSV file per root into both copies (the next part number,
ids continuing after the root's largest, a Ledger file repeating 10 % of the previous file's ids with
new values, event times one day later: the shape of bench_dag's own files) and runs both again. Phases
alternate cold and warm within a round, so each ratio is taken under the same load. Every command is
``python -m odfproj ...`` in a fresh process, timed from start to exit; after each phase both
workspaces must hold the same records (bench_dag.compare), else the script exits 1.

Usage: ``.venv/bin/python bench/bench_warm_run.py [--rounds 2] [--quick]``; prints date, machine and load.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_dag  # the generator and the comparison of bench_dag.py


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _odfproj(root: Path, env: dict[str, str], *args: str) -> float:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "odfproj", *args], cwd=root, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(
            f"odfproj {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return seconds


def append_files(root: Path, seed: int) -> None:
    """One more CSV per root, as bench_dag writes them (see the module doc)."""
    for folder in sorted((root / "data").iterdir()):
        parts = sorted(folder.glob("part-*.csv"))
        index = len(parts)
        rng = random.Random(f"{seed}/{folder.name}/{index}")
        rows = {p: [line.split(",") for line in p.read_text().splitlines()[1:]] for p in parts}
        per_file = len(rows[parts[0]])
        first = 1 + max(int(r[1]) for p in parts for r in rows[p])
        ids = list(range(first, first + per_file))
        if int(folder.name.rsplit("-", 1)[1]) % 2 == 1:  # bench_dag: odd roots are Ledgers
            ids += rng.sample([int(r[1]) for r in rows[parts[-1]]], k=per_file // 10)
            rng.shuffle(ids)
        header = ",".join(c.split()[0] for c in bench_dag.COLUMNS)
        lines = bench_dag._csv_rows(rng, ids, bench_dag.EPOCH + timedelta(days=index))
        (folder / f"part-{index:02d}.csv").write_text("\n".join([header, *lines]) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3 roots, 5 derivatives: a smoke run")
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    roots, derivatives = (3, 5) if args.quick else (10, 40)
    print(
        f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}; load {_load()}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-warm-run-") as tmp:
        folder = Path(tmp)
        template = bench_dag.generate(folder / "template", roots, derivatives, 10, 400, args.seed)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("SPARK_") and k not in ("ODFPROJ_WARM_ENGINE", "ODFPROJ_WORKSPACE")
        }
        env["ODFPROJ_ENGINE_DIR"] = str(folder / "engine")
        began = time.perf_counter()
        _odfproj(folder, env, "engine", "start")
        print(f"server start: {time.perf_counter() - began:.1f} s (load {_load()})")
        times: dict[tuple[str, str], list[float]] = {}
        try:
            for round_ in range(1, args.rounds + 1):
                copies = {
                    how: bench_dag.copy_project(template.root, folder / f"r{round_}-{how}")
                    for how in ("cold", "warm")
                }
                for phase in ("first", "append"):
                    if phase == "append":
                        for root in copies.values():
                            append_files(root, args.seed)
                    for how in ("cold", "warm"):
                        load = _load()
                        seconds = _odfproj(
                            copies[how], env, f"--{how}", "run", "--threads", str(args.threads)
                        )
                        times.setdefault((phase, how), []).append(seconds)
                        print(
                            f"round {round_} {phase:6} {how}: {seconds:6.1f} s (load before: {load})",
                            flush=True,
                        )
                    differ, _ = bench_dag.compare(template, copies["cold"] / ".odf", copies["warm"] / ".odf")
                    if differ:
                        print(f"records differ after {phase}: {differ}", file=sys.stderr)
                        return 1
        finally:
            subprocess.run([sys.executable, "-m", "odfproj", "engine", "stop"], env=env, capture_output=True)
        print(f"\nall records equal, cold and warm; load at the end {_load()}")
        print("| phase | cold (s) | warm (s) | cold median | warm median | warm / cold (median of rounds) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for phase in ("first", "append"):
            cold, warm = times[(phase, "cold")], times[(phase, "warm")]
            ratio = statistics.median(w / c for w, c in zip(warm, cold, strict=True))
            print(
                f"| {phase} | {', '.join(f'{c:.1f}' for c in cold)} | {', '.join(f'{w:.1f}' for w in warm)} | "
                f"{statistics.median(cold):.1f} | {statistics.median(warm):.1f} | {ratio:.2f} |"
            )
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
