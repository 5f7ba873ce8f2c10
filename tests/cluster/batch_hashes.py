"""Runs the transform batch-invariance scenario on one Spark target and prints its logical hashes.

The scenario and its check are those of ``tests/transform/test_transform.py`` (imported, not copied):
the same changes fed to three derivatives in one batch, in four and row by row must give the same
results. A separate process, as a classic target's driver is a JVM of its own. Times are fixed by
the scenario, so runs on two targets can be compared hash for hash.

    python -m tests.cluster.batch_hashes MASTER WORKDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.storage.slices import data_slices
from tests.cluster.conftest import APP_CONF
from tests.transform.test_transform import (
    CHANGES,
    DERIVATIVES,
    build,
    chunks,
    run_steps,
    test_results_do_not_depend_on_batching,
)


def main(master: str, workdir: str) -> int:
    conf = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    if master.startswith("spark://"):
        conf |= APP_CONF
    holder = SparkSessionHolder(SparkSettings(master=master, app_name="odfproj-cluster-tests", conf=conf))
    engine = SparkEngine(holder)
    modes = (("one", chunks(1), False), ("four", chunks(4), False), ("rows", [[c] for c in CHANGES], True))
    built = {}
    try:
        for label, steps, row_by_row in modes:
            ws = build(Path(workdir) / label, steps)
            run_steps(ws, engine, steps, row_by_row=row_by_row)
            built[label] = ws
    finally:
        holder.stop()
    test_results_do_not_depend_on_batching(built)  # raises AssertionError if batching changed a result
    hashes = {
        label: {name: [str(s.data.logical_hash) for s in data_slices(ws.open(name))] for name in DERIVATIVES}
        for label, ws in built.items()
    }
    print(json.dumps(hashes))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
