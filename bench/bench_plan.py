"""Benchmark: `odfproj plan` on a generated project of N manifests whose chains already match.

Generates a project (N/5 roots, the rest derivatives reading one or two earlier datasets), applies it
once through the library, then runs `odfproj plan` in fresh processes and reports wall time, peak
RSS (of the plan process) and whether anything imported pyspark (no JVM may start). Run by hand:

    .venv/bin/python bench/bench_plan.py [--datasets 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
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


# The plan process: the `odfproj` command's own entry point, then a report of whether pyspark was imported.
PLAN_SCRIPT = """
import sys
from odfproj.cli.start import main
sys.argv = ["odfproj", "plan", "--project", sys.argv[1]]
try:
    main()
except SystemExit as e:
    if e.code:
        raise
finally:
    print("PYSPARK_IMPORTED=" + str("pyspark" in sys.modules), file=sys.stderr)
"""


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


def run_plan(root: Path) -> tuple[float, float, bool, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PLAN_SCRIPT, str(root)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"plan failed: {proc.stderr}")
    rss_mb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    summary = proc.stdout.strip().splitlines()[-1]
    return wall, rss_mb, "PYSPARK_IMPORTED=True" in proc.stderr, summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        generate(root, args.datasets)
        t0 = time.perf_counter()
        apply_all(root)
        print(f"generated and applied {args.datasets} datasets in {time.perf_counter() - t0:.1f} s")
        # A process that does nothing but start: the fixed cost inside every plan's wall time.
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import odfproj.cli.main"], check=True)
        startup = time.perf_counter() - start
        runs = [run_plan(root) for _ in range(args.repeat)]
        walls = sorted(r[0] for r in runs)
        result = {
            "datasets": args.datasets,
            "plan_wall_s_best": round(walls[0], 3),
            "plan_wall_s_median": round(walls[len(walls) // 2], 3),
            "import_only_wall_s": round(startup, 3),
            "peak_rss_mb": round(max(r[1] for r in runs), 1),
            "pyspark_imported": any(r[2] for r in runs),
            "summary": runs[-1][3],
            "python": platform.python_version(),
            "cpus": len(__import__("os").sched_getaffinity(0)),
        }
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
