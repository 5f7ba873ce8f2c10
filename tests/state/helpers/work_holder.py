"""Catch a lagging state index up in memory and hold on to it (and its work folder) until killed.

Usage: ``python -m tests.state.helpers.work_holder WORKSPACE DATASET``. Opens the dataset's index
without saving it, with partitions of a few keys, so the update leaves its new partitions in a
``.work-*`` folder of the index folder; prints ``ready <work folder>`` and sleeps: a reader caught in
the middle of an update, as far as anyone else can tell.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from odfproj.state.dataset_index import open_state_index
from odfproj.storage.workspace import Workspace
from tests.state.changelogs import KEY_COLUMNS, small_partitions


def main() -> None:
    root, name = sys.argv[1:3]
    dataset = Workspace(Path(root)).open(name)
    with small_partitions(2, 1):
        index = open_state_index(dataset, KEY_COLUMNS, persist=False)
    print("ready", index.key_store.work_dir(), flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
