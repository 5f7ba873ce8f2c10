"""The child of the kill tests: push a workspace to a repository URL, saying when it starts.

Run by a ``forkserver`` that has imported odfproj and boto3 once, so each child starts in
milliseconds and a kill costs no interpreter start-up.
"""

from __future__ import annotations

import os
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from odfproj.remote.repository import push
from odfproj.storage.object_store import open_store
from odfproj.storage.workspace import Workspace


def push_and_report(workspace: str, url: str, env: dict[str, str], channel: Connection) -> None:
    """Push, sending ``"started"`` when the push begins and the seconds it took when it ends.

    ``env`` is the test's ``AWS_*`` environment: a forkserver's children inherit the server's, not the test's.
    Temporary folders go beside the workspace: a killed push leaves its scratch copy behind, and the
    machine's /tmp is not the test's to litter.
    """
    os.environ.update(env)
    scratch = Path(workspace).parent / "tmp"
    scratch.mkdir(exist_ok=True)
    tempfile.tempdir = str(scratch)
    store = open_store(url)
    channel.send("started")
    began = time.monotonic()
    push(Workspace(Path(workspace)), [], store)
    channel.send(time.monotonic() - began)
