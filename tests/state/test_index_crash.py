"""SIGKILL a writer that commits blocks and keeps the state index current: the index never disagrees.

Whatever moment the kill lands on (inside the data commit, between the commit and the index update,
in the middle of saving the index), opening the index afterwards must give exactly what a rebuild
from the chain gives, and a stored index stamped with the current head must already be right. The
writer is ``helpers/index_crash_writer.py``; it uses the same commit and index functions as ingest,
with partitions of 2 keys, so its updates split, merge and spill in a ``.work-*`` folder. Whatever
the kill left in the index folder (a work folder, temporary files, files no manifest names), the
next open that may write removes it, whether it updates the index or finds it at the head.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.state.dataset_index import index_directory, open_state_index, rebuild_state_index
from odfproj.state.errors import CorruptIndexError
from odfproj.state.persistence import load_index, read_manifest
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.state.changelogs import KEY_COLUMNS, SCHEMA, same_index, small_partitions
from tests.state.helpers.index_crash_writer import CRASH_PARTITIONS
from tests.storage.helpers.chains import set_schema

REPO = Path(__file__).resolve().parents[2]
#: Each round is a writer process, a kill and a rebuild to compare with (about 4 s on 2 cores): 16
#: rounds with small partitions reach splits, merges and leftovers in several of them.
KILLS = 16


@pytest.mark.slow
def test_sigkill_during_commits_never_leaves_an_index_that_disagrees(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    workspace.create("cities", model.DatasetKind.Root).append([set_schema(SCHEMA)])
    log = tmp_path / "heads.log"
    rng = random.Random(os.environ.get("ODFPROJ_CRASH_SEED", "5eed1dx"))
    seen = {"current": 0, "behind_or_ahead": 0, "missing_or_corrupt": 0, "left_over": 0}
    with small_partitions(*CRASH_PARTITIONS):
        _kill_rounds(workspace, log, rng, seen, tmp_path / "scratch")
        dataset = workspace.open("cities")
        same_index(open_state_index(dataset, KEY_COLUMNS), rebuild_state_index(dataset, KEY_COLUMNS))
        assert left_over(index_directory(dataset)) == set()

    blocks = len(list(workspace.open("cities").iter_blocks()))
    print(f"{blocks} blocks; after the kills the stored index was {seen}")
    assert blocks > KILLS  # the writer really committed between kills
    assert seen["current"] > 0  # commits kept the index current: readers usually need no catch-up


def _kill_rounds(
    workspace: Workspace, log: Path, rng: random.Random, seen: dict[str, int], scratch: Path
) -> None:
    for round_ in range(KILLS):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.state.helpers.index_crash_writer",
                str(workspace.root),
                "cities",
                str(log),
                str(scratch),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        # At least one commit per round whatever the machine's speed (a fixed sleep let a slow or loaded
        # machine kill most writers before their first commit), then a random moment of the next one.
        _wait_for_commits(log, logged(log) + 1, proc)
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()

        dataset = workspace.open("cities")  # cleans up an interrupted data commit
        assert verify_dataset(dataset) == [], f"round {round_}"
        head = dataset.head()
        rebuilt = rebuild_state_index(dataset, KEY_COLUMNS)
        try:
            stored = load_index(index_directory(dataset), KEY_COLUMNS)
        except CorruptIndexError:
            stored = None
        if stored is None:
            seen["missing_or_corrupt"] += 1
        elif stored.head == head:
            seen["current"] += 1
            same_index(stored, rebuilt)  # stamped with the head: it must already be right
        else:
            seen["behind_or_ahead"] += 1
        directory = index_directory(dataset)
        if stored is not None and left_over(directory):
            seen["left_over"] += 1
        # Every other round leaves the stale index (and any leftovers) for the next writer to start from.
        persist = round_ % 2 == 0
        same_index(open_state_index(dataset, KEY_COLUMNS, persist=persist), rebuilt)
        if persist:  # whether that open caught the index up or found it at the head: nothing left over
            assert left_over(directory) == set(), f"round {round_}"


def left_over(directory: Path) -> set[str]:
    """What the index folder holds that its manifest does not name: temporaries, orphans, work folders."""
    return {p.name for p in directory.iterdir()} - read_manifest(directory).file_names()


def logged(log: Path) -> int:
    """How many commits the writers have logged so far."""
    return len(log.read_text(encoding="ascii").splitlines()) if log.exists() else 0


def _wait_for_commits(log: Path, count: int, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Until the log holds ``count`` commits (the writer committed and advanced the index once more)."""
    deadline = time.monotonic() + timeout
    while logged(log) < count:
        assert proc.poll() is None, "the writer ended before it was killed"
        assert time.monotonic() < deadline, f"no commit within {timeout:.0f} s"
        time.sleep(0.01)
