"""Append one-record blocks and bring the compacted copy to each new head, until killed.

Usage: ``python -m tests.state.helpers.compacted_crash_writer WORKSPACE DATASET SCRATCH``. Prints
``ready`` before the first append, then ``copied`` after each update of the copy, so that the killer
knows the writer is past its start-up. Each update adds a part and, every ``FANOUT`` blocks, merges a
run of parts: a kill lands in a part's write, a merge, the manifest's swap or the removal of leftovers.
"""

from __future__ import annotations

import sys
from pathlib import Path

from odfproj.state.compacted import compacted_copy
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import Writer


def main() -> None:
    root, name, scratch = sys.argv[1:4]
    dataset = Workspace(Path(root)).open(name)
    writer = Writer(dataset, Path(scratch))
    print("ready", flush=True)
    while True:
        writer.add_data(1)
        assert compacted_copy(dataset) is not None
        print("copied", flush=True)


if __name__ == "__main__":
    main()
