"""Runs a copy of the example project on one Spark target and prints every dataset's logical hashes.

A separate process on purpose: a classic target's driver (``local[2]``, ``spark://``) is a JVM of its
own, and one process holds at most one. A workspace in a store (``ODFPROJ_WORKSPACE=s3://...``) is
locked, checked out and committed around the run, as ``odfproj run`` does. The system time is fixed, so the records (whose
``system_time`` column is hashed) of two runs on two targets can be compared hash for hash.

    python -m tests.cluster.run_example PROJECT_DIR
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from odfproj.cli.remote_ws import synced
from odfproj.engine.session import SparkSessionHolder
from odfproj.project.config import load_project, spark_settings
from odfproj.project.loader import PlanRequest
from odfproj.run.run import run_project
from odfproj.storage.slices import data_slices
from odfproj.storage.workspace import Workspace

#: The system time of every data block the run writes: after the definitions' (stamped now), so fixed
#: in the future.
SYSTEM_TIME = datetime(2100, 1, 2, 3, 4, 5, tzinfo=UTC)


def logical_hashes(workspace: Workspace) -> dict[str, list[str]]:
    """Each dataset's data slices' logical hashes, oldest first."""
    return {
        name: [str(s.data.logical_hash) for s in data_slices(workspace.open(name))]
        for name in sorted(workspace.list_datasets())
    }


def main(project_dir: str) -> int:
    config = load_project(Path(project_dir))
    # As `odfproj run` makes them: a workspace in a store ($ODFPROJ_WORKSPACE) is locked, checked out
    # and committed around the run, and its session gets the settings of data in that store.
    holder = SparkSessionHolder(spark_settings(config, None))
    try:
        with synced(config, None, writer="run"):
            result = run_project(config, PlanRequest(), holder=holder, system_time=SYSTEM_TIME)
    finally:
        holder.stop()
    failed = {r.dataset: r.message for r in result.failed}
    print(json.dumps({"failed": failed, "hashes": logical_hashes(Workspace(config.workspace(None)))}))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
