"""Benchmark of the warm engine (issue 17 point 6): everyday commands cold vs on a warm server.

A small project (a pushed root of a few rows, and a derivative counting them) is made in a temporary
folder and run once. Then, in interleaved rounds (cold, warm, cold, warm...; the machine's load changes
between runs, so the ratio is taken within one round), each command is timed as a user runs it,
``python -m odfproj ...`` in a fresh process, from start to exit:

* ``sql``: a GROUP BY over the derivative's input;
* ``plan``: with the derivative's query changed (not applied), so the plan checks it in the engine;
* ``ingest``: two NdJson lines pushed into the root.

The cold runs get ``--cold`` (a JVM each); the warm ones ``--warm`` on a server of the benchmark's own
(``ODFPROJ_ENGINE_DIR`` in the temporary folder), started before the rounds (its start is timed and
printed apart) and stopped at the end. Every warm output is compared with the cold one of its round.

Usage: ``.venv/bin/python bench/bench_warm.py [--rounds N]``; prints date, machine and load with the table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: visits
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: main
      read:
        kind: NdJson
        schema:
          - id BIGINT
          - city STRING
      merge:
        kind: Append
"""

DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: visits.by-city
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: visits
          alias: v
      transform:
        kind: Sql
        engine: spark
        query: SELECT max(event_time) AS event_time, city, count(*) AS n FROM v GROUP BY city
"""

SQL = "SELECT city, count(*) AS n FROM `visits` GROUP BY city ORDER BY city"
LINES = b'{"id": 1, "city": "Oslo"}\n{"id": 2, "city": "Lima"}\n'


def odfproj(root: Path, env: dict[str, str], *args: str, stdin: bytes | None = None) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "odfproj", *args],
        cwd=root,
        env=env,
        input=stdin,
        capture_output=True,
        check=False,
    )
    elapsed = time.perf_counter() - began
    if done.returncode not in (0, 2):  # plan --detailed-exitcode is not used: 0 expected
        raise SystemExit(f"odfproj {' '.join(args)} failed:\n{done.stderr.decode()}")
    return elapsed, done.stdout.decode()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    base = Path(tempfile.mkdtemp(prefix="bench-warm-"))
    root = base / "proj"
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: bench-warm\n")
    (root / "datasets" / "visits.yaml").write_text(ROOT)
    (root / "datasets" / "visits.by-city.yaml").write_text(DERIVATIVE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_") and k != "ODFPROJ_WARM_ENGINE"}
    env["ODFPROJ_ENGINE_DIR"] = str(base / "engine")
    print(
        f"date {time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())}; {platform.node()}: {os.cpu_count()} cores, "
        f"{platform.platform()}, Python {platform.python_version()}; load before: {load()}"
    )
    seconds, _ = odfproj(root, env, "--cold", "ingest", "visits", "-", stdin=LINES * 2)
    seconds2, _ = odfproj(root, env, "--cold", "run")
    print(f"setup: cold ingest {seconds:.1f} s, cold run {seconds2:.1f} s")
    (root / "datasets" / "visits.by-city.yaml").write_text(
        DERIVATIVE.replace("count(*) AS n", "count(id) AS n")
    )
    began = time.perf_counter()
    odfproj(root, env, "engine", "start")
    print(f"warm engine start: {time.perf_counter() - began:.1f} s (load {load()})")
    commands = {
        "sql": (("sql", SQL), None),
        "plan (one changed query)": (("plan",), None),
        "ingest (two lines)": (("ingest", "visits", "-"), LINES),
    }
    times: dict[str, dict[str, list[float]]] = {name: {"cold": [], "warm": []} for name in commands}
    try:
        for n in range(1, rounds + 1):
            for name, (args, stdin) in commands.items():
                cold, cold_out = odfproj(root, env, "--cold", *args, stdin=stdin)
                warm, warm_out = odfproj(root, env, "--warm", *args, stdin=stdin)
                if warm_out != cold_out and name != "ingest (two lines)":  # ingest says its new offsets
                    raise SystemExit(f"{name}: warm output differs from cold:\n{cold_out}\n---\n{warm_out}")
                times[name]["cold"].append(cold)
                times[name]["warm"].append(warm)
                print(
                    f"round {n} {name}: cold {cold:.1f} s, warm {warm:.1f} s, ratio {cold / warm:.1f} (load {load()})"
                )
    finally:
        odfproj(root, env, "engine", "stop")
    print("\n| command | cold median (s) | warm median (s) | cold / warm (median of per-round ratios) |")
    print("| --- | --- | --- | --- |")
    for name, runs in times.items():
        ratios = [c / w for c, w in zip(runs["cold"], runs["warm"], strict=True)]
        print(
            f"| {name} | {statistics.median(runs['cold']):.1f} | {statistics.median(runs['warm']):.1f} | "
            f"{statistics.median(ratios):.1f} |"
        )
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
