"""Benchmark: a preview environment of one changed query on bench_dag's 50 datasets, and its publish.

Generates bench_dag's project (10 roots, 40 derivatives in layers of 10), runs it on production once, then
raises the ``qty >`` threshold of one layer-2 filter derivative and measures, each in its own copy:

1. ``odfproj run --env pr-1``: builds the change and its downstream in an environment (wall time).
2. The same change run on production, what the environment is measured against (target: the
   environment costs no more): plain ``odfproj run``, the same command without ``--env`` (it too plans
   every dataset to find the changed part), and ``odfproj run --select CHANGED+``, the changed part
   alone when the user names it (the stricter comparison: it plans two datasets, not fifty).
3. The environment's own bytes (objects in ``envs/pr-1/``) against production's, and production's files,
   hashed before and after 1. (they must be identical).
4. ``odfproj publish pr-1`` (wall time, target under 2 s) and the data bytes it copied: every published
   object must be a hard link of the environment's (link count 2), so 0 bytes.

1. and 2. are repeated ``--rounds`` times on fresh copies, in rotating order; each ratio reported is
the median of the rounds'. The runs are cold (``ODFPROJ_WARM_ENGINE=off``) unless ``--warm``. Run by
hand; not a test:

    .venv/bin/python bench/bench_env.py [--rows 400] [--rounds 3] [--warm]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
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


def env_run(project: Path, env: dict[str, str]) -> tuple[float, float]:
    """``run --env pr-1`` on ``project`` (wall, driver CPU), checking production's files are untouched."""
    before = files(project / ".odf")
    wall, cpu, out = cpu_timed(
        [str(ODFPROJ), "run", "--project", str(project), "--env", "pr-1", "--threads", "2"], env, "run --env"
    )
    assert files(project / ".odf") == before, "production's files changed"
    print(f"  run --env pr-1: {wall:.1f} s, {cpu:.2f} s driver CPU; {out.strip().splitlines()[-3]}")
    return wall, cpu


def direct_run(project: Path, env: dict[str, str], selected: bool) -> tuple[float, float]:
    """The change run on production (wall, driver CPU): ``run --select CHANGED+`` (``selected``: the
    changed part alone, told what it is) or plain ``run`` (the same command as in the environment,
    which finds the changed part by planning every dataset)."""
    select = ["--select", f"{CHANGED}+"] if selected else []
    wall, cpu, _ = cpu_timed(
        [str(ODFPROJ), "run", "--project", str(project), *select, "--threads", "2"],
        env,
        "run on production",
    )
    print(f"  run {' '.join(select) or '(all)'} on production: {wall:.1f} s, {cpu:.2f} s driver CPU")
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three runs, in rotating order")
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
        change(first)
        rounds = []
        for i in range(args.rounds):
            # Each round on fresh copies of the same changed project; the order rotates, so no run is
            # always the one that finds the page cache warm.
            copies = {kind: tmp / f"{kind}-{i}" for kind in ("env", "selected", "plain")}
            for folder in copies.values():
                shutil.copytree(first, folder, symlinks=True)
            kinds = ["env", "selected", "plain"]
            order = kinds[i % 3 :] + kinds[: i % 3]
            print(f"round {i + 1} (load {os.getloadavg()[0]:.2f}):")
            figures_of = {}
            for kind in order:
                if kind == "env":
                    figures_of[kind] = env_run(copies[kind], env)
                else:
                    figures_of[kind] = direct_run(copies[kind], env, selected=kind == "selected")
            rounds.append(figures_of)
        loads["after_rounds"] = os.getloadavg()[0]

        def ratios(against: str, what: int) -> list[float]:
            return sorted(r["env"][what] / r[against][what] for r in rounds)

        measured = tmp / "env-0"
        own = object_bytes(measured / ".odf" / "envs" / "pr-1")
        production = object_bytes(measured / ".odf")
        print(
            f"environment's own objects: {own[0]} files, {own[1]} bytes; production's: {production[0]}, {production[1]}"
        )
        started = time.perf_counter()
        _, out, _ = timed_run(
            [str(ODFPROJ), "publish", "pr-1", "--project", str(measured)], env=env, what="publish"
        )
        publish_wall = time.perf_counter() - started
        published = [
            p
            for p in (measured / ".odf" / "envs" / "pr-1").glob("datasets/*/*/*")
            if p.parent.name in ("blocks", "data", "checkpoints")
        ]
        copied = sum(p.stat().st_size for p in published if p.stat().st_nlink < 2)
        print(f"publish: {publish_wall:.2f} s (CLI, including start-up); data bytes copied: {copied}")
        print(out.strip().splitlines()[-1])
        figures = {
            "env_run_s": [round(r["env"][0], 2) for r in rounds],
            "selected_on_production_s": [round(r["selected"][0], 2) for r in rounds],
            "plain_on_production_s": [round(r["plain"][0], 2) for r in rounds],
            "median_ratio_vs_selected": round(statistics.median(ratios("selected", 0)), 2),
            "median_ratio_vs_plain": round(statistics.median(ratios("plain", 0)), 2),
            "median_cpu_ratio_vs_selected": round(statistics.median(ratios("selected", 1)), 2),
            "median_cpu_ratio_vs_plain": round(statistics.median(ratios("plain", 1)), 2),
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
