"""SIGKILL a committing writer at random moments: the chain is always valid at the old or the new head.

The writer (``helpers/crash_writer.py``) commits AddData blocks with data files and checkpoints in a
tight loop and logs every head it committed. Each round waits for the writer's first commit, then
kills it after a random delay (so the kill lands anywhere in a later commit). After each kill the dataset is reopened (which cleans
up the interrupted transaction) and verified; its head must be the last logged one or its child (the
kill landed between the commit and the log line).
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
from odfproj.odf.multiformats import Multihash
from odfproj.storage.commit import find_leftovers
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import set_schema

REPO = Path(__file__).resolve().parents[2]
KILLS = 22


def _logged_lines(log: Path) -> int:
    return sum(1 for line in log.read_text().splitlines() if line.strip())


def _wait_for_a_commit(log: Path, before: int, proc: subprocess.Popen[str]) -> None:
    """Until the writer has logged a commit of this round: on a loaded machine the random delay alone
    could end before the first one, and a round without a commit tests nothing."""
    deadline = time.monotonic() + 120
    while _logged_lines(log) <= before:
        assert proc.poll() is None, "the writer died on its own"
        assert time.monotonic() < deadline, "the writer committed nothing in 120 s"
        time.sleep(0.005)


def _last_logged(log: Path) -> Multihash:
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    return Multihash.from_multibase(lines[-1])


@pytest.mark.slow
def test_sigkill_at_random_moments_never_breaks_the_chain(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    dataset = workspace.create("crashy", model.DatasetKind.Root)
    dataset.append([set_schema()])
    log = tmp_path / "heads.log"
    rng = random.Random(os.environ.get("ODFPROJ_CRASH_SEED", "1471920e"))
    interrupted = 0
    for round_ in range(KILLS):
        with log.open("a") as f:
            f.write(f"{workspace.open('crashy').head()}\n")  # the head before this round
        before = _logged_lines(log)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.storage.helpers.crash_writer",
                str(workspace.root),
                "crashy",
                str(log),
                str(tmp_path / "scratch"),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        _wait_for_a_commit(log, before, proc)
        time.sleep(rng.uniform(0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()

        interrupted += bool(find_leftovers(dataset.layout))
        reopened = workspace.open("crashy")  # cleans up the interrupted transaction
        assert find_leftovers(reopened.layout) == [], f"round {round_}: leftovers were not cleaned"
        head = reopened.head()
        logged = _last_logged(log)
        assert head == logged or reopened.get_block(head).prev_block_hash == logged, f"round {round_}"
        problems = verify_dataset(reopened, integrity=round_ % 5 == 4 or round_ == KILLS - 1)
        assert problems == [], f"round {round_}: {problems}"

    final = workspace.open("crashy")
    blocks = list(final.iter_blocks())
    assert len(blocks) > KILLS  # the writer really committed between kills
    # No unreachable object survived the cleanups.
    reachable = {h.to_multibase() for h, _ in blocks}
    assert {p.name for p in final.layout.blocks_dir.iterdir()} == reachable
    data = {
        b.event.new_data.physical_hash.to_multibase()
        for _, b in blocks
        if isinstance(b.event, model.AddData) and b.event.new_data
    }
    assert {p.name for p in final.layout.data_dir.iterdir()} == data
    print(f"{len(blocks)} blocks, {interrupted} of {KILLS} kills interrupted a transaction")
