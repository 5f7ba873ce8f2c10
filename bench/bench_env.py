"""Benchmark: a preview environment of one changed query on bench_dag's 50 datasets, and its publish.

Generates bench_dag's project (10 roots, 40 derivatives in layers of 10), runs it on production once, then
raises the ``qty >`` threshold of one layer-2 filter derivative and measures, each in its own copy:

1. ``odfproj run --env pr-1``: builds the change and its downstream in an environment (wall time).
2. ``odfproj run --select CHANGED+`` on production: the changed part's own cost, what the environment is
   measured against (target: the environment costs no more).
3. The environment's own bytes (objects in ``envs/pr-1/``) against production's, and production's files,
   hashed before and after 1. (they must be identical).
4. ``odfproj publish pr-1`` (wall time, target under 2 s) and the data bytes it copied: every published
   object must be a hard link of the environment's (link count 2), so 0 bytes.

Both runs are cold (``ODFPROJ_WARM_ENGINE=off``) unless ``--warm``. Run by hand; not a test:

    .venv/bin/python bench/bench_env.py [--rows 400] [--warm]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_dag import ODFPROJ, _env, copy_project, generate, odfproj_run, timed_run

CHANGED = "org.bench.derived-12"


def files(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and relative.parts[0] not in ("envs", "logs") and path.name != ".lock":
            out[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def object_bytes(root: Path) -> tuple[int, int]:
    """(files, bytes) of the blocks, slices and checkpoints under ``root``'s datasets."""
    count = size = 0
    for kind in ("blocks", "data", "checkpoints"):
        for path in root.glob(f"datasets/*/{kind}/*"):
            count += 1
            size += path.stat().st_size
    return count, size


def cpu_timed(cmd: list[str], env: dict[str, str], what: str) -> tuple[float, float, str]:
    """(wall, CPU seconds of the odfproj process, out): what the environment adds is driver work
    (pinning, forking, derived records), and CPU time is what a loaded machine distorts least. Spark's
    JVM is not counted: it is not reaped as this process's child, and both runs give it the same job."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, out, _ = timed_run(cmd, env=env, what=what)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def change(project: Path) -> None:
    path = project / "datasets" / f"{CHANGED}.yaml"
    text = path.read_text()
    path.write_text(re.sub(r"qty > (\d+)", lambda m: f"qty > {int(m.group(1)) + 3}", text, count=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--warm", action="store_true", help="let the runs use the warm engine")
    args = parser.parse_args()
    env = _env(ODFPROJ_WARM_ENGINE="on" if args.warm else "off")
    tmp = Path(tempfile.mkdtemp(prefix="odfproj-bench-env-"))
    try:
        dag = generate(tmp / "template", 10, 40, 10, args.rows, args.seed)
        assert next(n.kind for n in dag.nodes if n.name == CHANGED) == "filter"
        first = copy_project(dag.root, tmp / "production")
        loads = {"start": os.getloadavg()[0]}
        full_wall, _ = odfproj_run(first, 2, env=env)
        print(f"production's first run: {full_wall:.1f} s")
        direct = tmp / "direct"
        shutil.copytree(first, direct, symlinks=True)
        change(first)
        change(direct)

        before = files(first / ".odf")
        env_wall, env_cpu, out = cpu_timed(
            [str(ODFPROJ), "run", "--project", str(first), "--env", "pr-1", "--threads", "2"],
            env,
            "run --env",
        )
        loads["after_env_run"] = os.getloadavg()[0]
        print(f"run --env pr-1: {env_wall:.1f} s, {env_cpu:.2f} s driver CPU; {out.strip().splitlines()[-3]}")
        assert files(first / ".odf") == before, "production's files changed"
        direct_wall, direct_cpu, out = cpu_timed(
            [str(ODFPROJ), "run", "--project", str(direct), "--select", f"{CHANGED}+", "--threads", "2"],
            env,
            "run --select on production",
        )
        loads["after_direct_run"] = os.getloadavg()[0]
        print(
            f"run --select {CHANGED}+ on production: {direct_wall:.1f} s, {direct_cpu:.2f} s driver CPU; "
            f"{out.strip().splitlines()[-3]}"
        )
        own = object_bytes(first / ".odf" / "envs" / "pr-1")
        production = object_bytes(first / ".odf")
        print(
            f"environment's own objects: {own[0]} files, {own[1]} bytes; production's: {production[0]}, {production[1]}"
        )

        started = time.perf_counter()
        _, out, _ = timed_run(
            [str(ODFPROJ), "publish", "pr-1", "--project", str(first)], env=env, what="publish"
        )
        publish_wall = time.perf_counter() - started
        published = [
            p
            for p in (first / ".odf" / "envs" / "pr-1").glob("datasets/*/*/*")
            if p.parent.name in ("blocks", "data", "checkpoints")
        ]
        copied = sum(p.stat().st_size for p in published if p.stat().st_nlink < 2)
        print(f"publish: {publish_wall:.2f} s (CLI, including start-up); data bytes copied: {copied}")
        print(out.strip().splitlines()[-1])
        figures = {
            "env_run_s": round(env_wall, 2),
            "changed_part_on_production_s": round(direct_wall, 2),
            "ratio": round(env_wall / direct_wall, 2),
            "env_run_driver_cpu_s": round(env_cpu, 2),
            "changed_part_driver_cpu_s": round(direct_cpu, 2),
            "driver_cpu_ratio": round(env_cpu / direct_cpu, 2),
            "env_own_files": own[0],
            "env_own_bytes": own[1],
            "production_bytes": production[1],
            "publish_s": round(publish_wall, 2),
            "publish_bytes_copied": copied,
            "load_average_1min": {k: round(v, 2) for k, v in loads.items()},
        }
        print(json.dumps(figures))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
