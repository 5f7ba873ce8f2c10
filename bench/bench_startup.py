"""Benchmark: how long `odfproj` takes to start, for the help and for a command that needs no JVM.

Times, in fresh processes, `odfproj --help`, `odfproj plan --help` and `odfproj validate` on
example_project/, each the median (and min-max) of N runs, from the process's start to its exit; the
commands run through the console entry point (`odfproj.cli.start:main`), as the `odfproj` script runs
them. Prints the date, the cores and the load average at the start, for bench/README.md. Run by hand:

    .venv/bin/python bench/bench_startup.py [--runs 11] [--importtime] [--against DIR]

`--importtime` also prints each command's slowest imports (`python -X importtime`, cumulative);
`--against DIR` also times the odfproj package in DIR (e.g. an older commit from `git archive`), its
runs interleaved with this checkout's, so that before and after share the machine's load.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "example_project"

#: The console script's own entry point (run with ``-P``: the working folder is not put on ``sys.path``).
ENTRY = "import sys; sys.argv = ['odfproj', *sys.argv[1:]]; from odfproj.cli.start import main; main()"

#: label, arguments, working folder.
COMMANDS: tuple[tuple[str, tuple[str, ...], Path], ...] = (
    ("odfproj --help", ("--help",), REPO),
    ("odfproj plan --help", ("plan", "--help"), REPO),
    ("odfproj validate (example_project/)", ("validate",), EXAMPLE),
)


def _environment(source: Path) -> dict[str, str]:
    """The environment of a command that imports odfproj from ``source``."""
    env = {k: v for k, v in os.environ.items() if k != "ODFPROJ_WORKSPACE"}
    env["ODFPROJ_WARM_ENGINE"] = "off"  # none of these needs Spark; never find or start a server
    env["PYTHONPATH"] = str(source)
    return env


def _once(args: tuple[str, ...], cwd: Path, env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-P", "-c", ENTRY, *args], cwd=cwd, env=env, capture_output=True, check=False
    )
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"odfproj {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return took


def _importtime(args: tuple[str, ...], cwd: Path, env: dict[str, str], top: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-P", "-X", "importtime", "-c", ENTRY, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, own, cumulative, name = (part.strip() for part in line.replace("import time:", "|").split("|"))
        rows.append((int(cumulative), int(own), name))
    rows.sort(reverse=True)
    total = sum(own for _, own, _ in rows)
    lines = [f"    {len(rows)} modules, {total / 1000:.0f} ms of imports in all; slowest (cumulative ms):"]
    lines += [f"    {cumulative / 1000:7.1f}  {name}" for cumulative, _, name in rows[:top]]
    return lines


def _figures(times: list[float]) -> str:
    return f"median {statistics.median(times):.3f} s  (min {min(times):.3f}, max {max(times):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11, help="runs per command (default 11)")
    parser.add_argument("--importtime", action="store_true", help="also show each command's slowest imports")
    parser.add_argument("--top", type=int, default=12, help="with --importtime: how many imports")
    parser.add_argument("--against", type=Path, help="also time the odfproj package in this folder")
    options = parser.parse_args()
    sources: dict[str, dict[str, str]] = {"this checkout": _environment(REPO)}
    if options.against is not None:
        sources[str(options.against)] = _environment(options.against.resolve())
    load = os.getloadavg()
    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"load average at the start: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    print(f"{options.runs} runs per command and source, each a fresh process, sources interleaved\n")
    for label, args, cwd in COMMANDS:
        times: dict[str, list[float]] = {source: [] for source in sources}
        for env in sources.values():
            _once(args, cwd, env)  # warm the file cache and the bytecode, not measured
        for _ in range(options.runs):
            for source, env in sources.items():
                times[source].append(_once(args, cwd, env))
        print(label)
        for source, env in sources.items():
            print(f"  {source:36} {_figures(times[source])}")
            if options.importtime:
                print("\n".join(_importtime(args, cwd, env, options.top)))
    print(f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
