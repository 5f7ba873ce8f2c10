"""Child process of the kill tests: push a workspace to a repository URL, saying when it starts.

Usage: python -m tests.remote.helpers.sync_child WORKSPACE REPO_URL
Prints ``started`` once imports are done and the push begins, then ``done <seconds>``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from odfproj.remote.repository import push
from odfproj.remote.store import open_store
from odfproj.storage.workspace import Workspace


def main() -> None:
    workspace, url = Path(sys.argv[1]), sys.argv[2]
    store = open_store(url)
    print("started", flush=True)
    began = time.monotonic()
    push(Workspace(workspace), [], store)
    print(f"done {time.monotonic() - began:.3f}", flush=True)


if __name__ == "__main__":
    main()
