"""Benchmark of ``odfproj watch``'s re-plan cycle: a manifest edit on a 100-dataset project (no query changed).

Generates the project of ``bench_plan.py`` (20% roots, the rest derivatives with one or two inputs),
applies it, then, like ``watch`` after a save, edits one manifest's description and times
``Watcher.changed_files`` + ``Watcher.cycle`` in-process (the watch loop's work after its debounce).
Prints best and median of ``--repeat`` cycles, and checks each plan shows exactly that one update and
that no Spark session exists (no query changed, no ``--apply``).

Usage: ``.venv/bin/python bench/bench_watch.py [--datasets 100] [--repeat 9]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_plan import apply_all, generate

from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest
from odfproj.project.config import load_project
from odfproj.run.watch import Watcher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odfproj-bench-watch-") as scratch:
        root = Path(scratch) / "project"
        generate(root, args.datasets)
        apply_all(root)
        watcher = Watcher(load_project(root), PlanRequest())
        edited = sorted((root / "datasets").glob("*.yaml"))[-1]  # a derivative
        original = edited.read_text()
        seconds = []
        for n in range(args.repeat):
            edited.write_text(original.replace("Generated derivative", f"Generated derivative, edit {n}"))
            start = time.perf_counter()
            changed = watcher.changed_files([edited])
            cycle = watcher.cycle(changed)
            seconds.append(time.perf_counter() - start)
            assert cycle.error is None, cycle.error
            assert cycle.plan is not None
            updates = [s.dataset for s in cycle.plan.definitions if s.action is Action.UPDATE]
            assert len(updates) == 1 and changed == (edited,), (updates, changed)
        assert "pyspark" not in sys.modules, "a plan without query changes must not touch Spark"
    print(
        f"{args.datasets} datasets, {args.repeat} edits: re-plan cycle best {min(seconds):.3f} s, "
        f"median {statistics.median(seconds):.3f} s, worst {max(seconds):.3f} s; pyspark not imported"
    )


if __name__ == "__main__":
    main()
