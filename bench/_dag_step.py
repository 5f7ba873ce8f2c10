"""One step of the "one fresh Spark process per dataset operation" baseline of ``bench_dag.py``.

Models the reference implementation's Spark engine, which runs one ``spark-submit`` per step: this
process starts its own SparkSession (a new JVM) before anything else, brings exactly one dataset up to
date (``ingest_polling`` for a root, ``update_derivative`` for a derivative), stops the session and
exits. The definitions must already be applied (``odfproj apply``). Usage:

    .venv/bin/python bench/_dag_step.py PROJECT_DIR DATASET

Prints one JSON line: the dataset, what was done, records added and the in-process seconds.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    project, name = Path(argv[0]), argv[1]

    from odfproj.engine.session import SparkSessionHolder
    from odfproj.engine.spark import SparkEngine
    from odfproj.ingest.pipeline import ingest_polling
    from odfproj.odf import model
    from odfproj.project.config import load_project, spark_settings
    from odfproj.storage.workspace import Workspace
    from odfproj.transform.coordinator import update_derivative

    config = load_project(project)
    holder = SparkSessionHolder(spark_settings(config, None))
    imported = time.perf_counter()
    holder.get()  # one step = one JVM, whatever the step has to do (as spark-submit)
    session_up = time.perf_counter()
    engine = SparkEngine(holder)
    workspace = Workspace(config.workspace())
    try:
        with workspace.lock(purpose="bench _dag_step"):
            dataset = workspace.open(name)
            if dataset.projection().kind is model.DatasetKind.Derivative:
                work = "transform"
                records = update_derivative(workspace, name, engine, datetime.now(UTC)).records
            else:
                work = "ingest"
                records = ingest_polling(dataset, engine, project_root=config.root).records_added
        done = time.perf_counter()
    finally:
        holder.stop()
    print(
        json.dumps(
            {
                "dataset": name,
                "work": work,
                "records": records,
                "import_s": round(imported - started, 3),
                "session_s": round(session_up - imported, 3),
                "work_s": round(done - session_up, 3),
                "total_s": round(time.perf_counter() - started, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
