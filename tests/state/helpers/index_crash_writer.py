"""Commit changelog blocks and advance the state index after each, as ingest does, until killed.

Usage: ``python -m tests.state.helpers.index_crash_writer WORKSPACE DATASET LOG SCRATCH``. Prints
``ready`` before the first commit. Each round opens the index at the head (as the Snapshot merge does
to read the previous state), appends one block of random ``+A/-R/-C/+C`` records (one in four
retracts every key instead), advances the stored index with ``advance_state_index`` (the function
ingest's ``commit_batch`` calls) and logs the head. The key store's partitions hold 2 keys and its
changes spill past 3 rows (``CRASH_PARTITIONS``), so updates split, merge and spill in a work folder.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from odfproj.state.dataset_index import open_state_index
from odfproj.state.frames import advance_state_index
from odfproj.storage.workspace import Workspace
from tests.state.changelogs import KEY_COLUMNS, commit_history, small_partitions

#: Keys per partition and spilled rows of the writer's key stores (and of the test's, to compare).
CRASH_PARTITIONS = (2, 3)
REGIONS, CODES = ["eu", "us", None], [0, 1, 2, None]


def main() -> None:
    root, name, log_path, scratch = sys.argv[1:5]
    dataset = Workspace(Path(root)).open(name)
    rng = random.Random(os.getpid())
    print("ready", flush=True)
    with open(log_path, "a", encoding="ascii") as log, small_partitions(*CRASH_PARTITIONS):
        n = 0
        while True:
            index = open_state_index(dataset, KEY_COLUMNS)
            if rng.randrange(4) == 0:  # every key retracted: the partitions merge
                records = [(1, (region, code), 0) for region in REGIONS for code in CODES]
            else:
                records = [
                    (rng.randrange(4), (rng.choice(REGIONS), rng.choice(CODES)), rng.randrange(99))
                    for _ in range(rng.randint(1, 8))
                ]
            head = commit_history(dataset, [records], Path(scratch) / f"{os.getpid()}-{n}")[-1]
            advance_state_index(dataset, KEY_COLUMNS, index)
            log.write(f"{head}\n")
            log.flush()
            n += 1


if __name__ == "__main__":
    main()
