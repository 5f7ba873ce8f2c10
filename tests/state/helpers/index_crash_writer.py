"""Commit changelog blocks and advance the state index after each, as ingest does, until killed.

Usage: ``python -m tests.state.helpers.index_crash_writer WORKSPACE DATASET LOG SCRATCH``. Prints
``ready`` before the first commit. Each round opens the index at the head (as the Snapshot merge does
to read the previous state), appends one block of random ``+A/-R/-C/+C`` records, advances the
stored index with ``advance_state_index`` (the function ingest's ``commit_batch`` calls) and logs the head.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from odfproj.state.dataset_index import open_state_index
from odfproj.state.frames import advance_state_index
from odfproj.storage.workspace import Workspace
from tests.state.changelogs import KEY_COLUMNS, commit_history


def main() -> None:
    root, name, log_path, scratch = sys.argv[1:5]
    dataset = Workspace(Path(root)).open(name)
    rng = random.Random(os.getpid())
    print("ready", flush=True)
    with open(log_path, "a", encoding="ascii") as log:
        n = 0
        while True:
            index = open_state_index(dataset, KEY_COLUMNS)
            records = [
                (
                    rng.randrange(4),
                    (rng.choice(["eu", "us", None]), rng.choice([0, 1, 2, None])),
                    rng.randrange(99),
                )
                for _ in range(rng.randint(1, 6))
            ]
            head = commit_history(dataset, [records], Path(scratch) / f"{os.getpid()}-{n}")[-1]
            advance_state_index(dataset, KEY_COLUMNS, index)
            log.write(f"{head}\n")
            log.flush()
            n += 1


if __name__ == "__main__":
    main()
