"""Hold a dataset's lock (or the workspace lock) until standard input closes.

Usage: ``python -m tests.storage.helpers.hold_lock WORKSPACE (DATASET | --workspace)``; prints
``locked`` once it holds the lock, so the test knows when to try its own write.
"""

from __future__ import annotations

import sys
from pathlib import Path

from odfproj.storage.workspace import Workspace


def main() -> None:
    workspace = Workspace(Path(sys.argv[1]))
    target = sys.argv[2]
    lock = workspace.lock() if target == "--workspace" else workspace.open(target).lock()
    with lock:
        print("locked", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
