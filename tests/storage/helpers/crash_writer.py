"""Commit AddData blocks with data and checkpoint files in a loop, until killed.

Usage: ``python -m tests.storage.helpers.crash_writer WORKSPACE DATASET LOG SCRATCH``. Prints ``ready``
when it is about to start committing, then after every successful commit appends the new head to LOG
(flushed and fsynced), so the test knows the last head that certainly committed.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import BASE_TIME, Writer


def main() -> None:
    root, name, log_path, scratch = sys.argv[1:5]
    dataset = Workspace(Path(root)).open(name)
    writer = Writer(dataset, Path(scratch))
    print("ready", flush=True)
    with open(log_path, "a", encoding="ascii") as log:
        n = 0
        while True:
            sequence = dataset.projection().sequence_number
            head = writer.add_data(
                1 + n % 4,
                watermark=BASE_TIME + timedelta(seconds=sequence),
                checkpoint=f"{os.getpid()}-{n}".encode(),
            )
            log.write(f"{head}\n")
            log.flush()
            os.fsync(log.fileno())
            n += 1


if __name__ == "__main__":
    main()
