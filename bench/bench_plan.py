"""Benchmark: `odfproj plan` and `odfproj validate` on generated projects of N manifests whose chains match.

Generates a project per size (N/5 roots, the rest derivatives reading one or two earlier datasets), applies
it once through the library, then runs each command in fresh processes through the `odfproj` entry point.
The first run of each command fills the parse cache (project.parse_cache; a private XDG_CACHE_HOME, so
every size starts cold); the timed runs after it are what a developer's or CI runner's second command
costs. Reports, per size and command, the cold first run, median and best wall time, the peak RSS of
the process and whether anything imported pyspark (no JVM may start). Run by hand:

    .venv/bin/python bench/bench_plan.py [--datasets 1000,10000] [--repeat 5] [--work DIR]

``--work DIR`` keeps the generated, applied projects in DIR and reuses them on the next run (applying
10,000 manifests takes minutes). Python bytecode is written and used as in an installed package
(PYTHONDONTWRITEBYTECODE is cleared for the timed processes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.manifests
from tests import manifests

COLUMNS = ("id BIGINT", "city STRING", "value DOUBLE", "event_time TIMESTAMP")


def _root(name: str) -> str:
    return manifests.root(
        name,
        path=f"data/{name}/*.csv",
        schema=COLUMNS,
        merge=manifests.ledger("id"),
        extra=[
            {"kind": "SetVocab", "eventTimeColumn": "event_time"},
            manifests.set_info("Generated root {{ var('suffix') }}", ("bench", "root")),
        ],
    )


def _derivative(name: str, inputs: list[str]) -> str:
    return manifests.derivative(
        name,
        {f"in{j}": p for j, p in enumerate(inputs)},
        "SELECT id, city, value * 2 AS value, event_time FROM in0",
        extra=[manifests.set_info("Generated derivative", ("bench",))],
    )


# The command's process: the `odfproj` command's own entry point, then a report of whether pyspark was imported.
COMMAND_SCRIPT = """
import sys
from odfproj.cli.start import main
sys.argv = ["odfproj", sys.argv[1], "--project", sys.argv[2]]
try:
    main()
except SystemExit as e:
    if e.code:
        raise
finally:
    print("PYSPARK_IMPORTED=" + str("pyspark" in sys.modules), file=sys.stderr)
"""
COMMANDS = ("plan", "validate")
_APPLIED = ".bench-applied"


def generate(root: Path, count: int) -> None:
    rng = random.Random(42)
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: bench\nvars:\n  suffix: v1\n")
    names: list[str] = []
    for i in range(count):
        name = f"org.bench.ds{i:05d}"
        if i < count // 5 or not names:
            text = _root(name)
        else:
            picks = rng.sample(names, k=min(len(names), rng.choice((1, 2))))
            text = _derivative(name, picks)
        (root / "datasets" / f"{name}.yaml").write_text(text)
        names.append(name)


def apply_all(root: Path) -> None:
    from odfproj.plan.sources import PlanRequest, plan_project
    from odfproj.project.config import load_project
    from odfproj.run.apply import apply_plan
    from odfproj.storage.workspace import Workspace

    config = load_project(root)
    plan, _ = plan_project(config, PlanRequest())
    workspace = Workspace(config.workspace())
    with workspace.lock():
        apply_plan(plan, workspace)


def prepared(work: Path, count: int) -> Path:
    """The applied project of ``count`` manifests under ``work``, generated and applied unless it already is."""
    root = work / f"bench-{count}"
    if (root / _APPLIED).exists():
        print(f"reusing the applied project of {count} datasets in {root}")
        return root
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    generate(root, count)
    apply_all(root)
    (root / _APPLIED).write_text("")
    print(f"generated and applied {count} datasets in {time.perf_counter() - start:.1f} s")
    return root


def run_command(command: str, root: Path, env: dict[str, str]) -> tuple[float, float, bool, str, float]:
    """One fresh process: wall time (s), its own peak RSS (MB), whether pyspark was imported, its last
    line, and its CPU time (user + sys, s: the figure to trust when other work shares the machine)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", COMMAND_SCRIPT, command, str(root)], stdout=out, stderr=err, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (ru_maxrss in KB on Linux)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{command} failed: {stderr}")
    summary = (stdout.strip().splitlines() or [""])[-1]
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss / 1024, "PYSPARK_IMPORTED=True" in stderr, summary, cpu


def measure(command: str, root: Path, env: dict[str, str], repeat: int) -> dict[str, object]:
    cold = run_command(command, root, env)  # fills the parse cache and the bytecode caches
    runs = [run_command(command, root, env) for _ in range(repeat)]
    walls = sorted(r[0] for r in runs)
    return {
        "first_run_s": round(cold[0], 3),
        "wall_s_median": round(statistics.median(walls), 3),
        "wall_s_best": round(walls[0], 3),
        "wall_s_runs": [round(r[0], 2) for r in runs],  # in order: a slow stretch shows as one
        # Each run's CPU time (user + sys), in the same order: a slow run whose CPU time grew with its wall
        # time did more work or ran on a slower CPU; one whose wall time grew alone waited (CPU, disk).
        "cpu_s_runs": [round(r[4], 2) for r in runs],
        "cpu_s_median": round(statistics.median(r[4] for r in runs), 3),
        "peak_rss_mb": round(max(r[1] for r in (cold, *runs)), 1),
        "pyspark_imported": any(r[2] for r in (cold, *runs)),
        "summary": runs[-1][3],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", default="1000,10000", help="comma-separated project sizes")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--work", type=Path, default=None, help="keep (and reuse) the applied projects here")
    args = parser.parse_args()
    sizes = [int(n) for n in args.datasets.split(",")]
    commands = [c for c in args.commands.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "xdg-cache")  # every size starts with no parse cache
        # A process that does nothing but start: the fixed cost inside every command's wall time.
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import odfproj.cli.main"], check=True, env=env)
        results: dict[str, object] = {"import_only_wall_s": round(time.perf_counter() - start, 3)}
        for count in sizes:
            root = prepared(work, count)
            for command in commands:
                results[f"{command} {count}"] = measure(command, root, env, args.repeat)
                print(f"{command} {count}: {json.dumps(results[f'{command} {count}'])}", flush=True)
        results.update(
            python=platform.python_version(),
            cpus=len(os.sched_getaffinity(0)),
            loadavg=Path("/proc/loadavg").read_text().split()[:3],
        )
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
