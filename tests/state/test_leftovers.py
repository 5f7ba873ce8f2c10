"""What a killed writer leaves in a state's folder is removed by the next writer, or reader, under the lock.

Never a live writer's work folder: an update (which readers run too) fills its ``.work-*`` folder
without the index lock, so the folder carries its own lock, held by its owner until it dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq

from odfproj.state import leftovers
from odfproj.state.dataset_index import index_directory, open_state_index, rebuild_state_index
from odfproj.state.group_state import group_state_directory, save_group_state
from odfproj.state.join_index import StoredRun, save_join_index
from odfproj.state.leftovers import WorkFolder, remove_leftovers
from odfproj.state.persistence import read_manifest
from odfproj.storage.dataset import Dataset
from odfproj.storage.locks import try_lock
from tests.state.changelogs import KEY_COLUMNS, block_hash, commit_history, same_index, small_partitions

REPO = Path(__file__).resolve().parents[2]


def keys(n: int, op: int = 0, start: int = 0) -> list:
    return [(op, ("k", i), i) for i in range(start, start + n)]


def left_over(directory: Path) -> set[str]:
    """The names in an index folder its manifest does not account for."""
    return {p.name for p in directory.iterdir()} - read_manifest(directory).file_names()


def test_a_killed_readers_work_folder_survives_while_it_lives_and_goes_after(
    dataset: Dataset, scratch: Path
) -> None:
    directory = index_directory(dataset)
    with small_partitions(2, 1):
        commit_history(dataset, [keys(12)], scratch / "a")
        open_state_index(dataset, KEY_COLUMNS)
        commit_history(dataset, [keys(6, op=1) + keys(6, start=20)], scratch / "b")  # the index lags
        holder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.state.helpers.work_holder",
                str(dataset.layout.root.parent.parent),
                "cities",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None
            ready, work = holder.stdout.readline().split()
            work_folder = Path(work)
            assert ready == "ready" and work_folder.parent == directory and any(work_folder.iterdir())
            # A writer saves meanwhile (it catches the index up itself): the live folder is not its to remove.
            open_state_index(dataset, KEY_COLUMNS)
            assert read_manifest(directory).head == dataset.head()
            assert work_folder.is_dir() and left_over(directory) == {work_folder.name}
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        assert work_folder.is_dir()  # a SIGKILL removes nothing
        # The next command needs no update (the index is at the head), and still removes it.
        index = open_state_index(dataset, KEY_COLUMNS)
        assert not work_folder.exists() and left_over(directory) == set()
        same_index(index, rebuild_state_index(dataset, KEY_COLUMNS))


def test_an_open_at_the_head_removes_temporaries_orphans_and_dead_work_folders(
    dataset: Dataset, scratch: Path
) -> None:
    commit_history(dataset, [keys(5)], scratch)
    expected = open_state_index(dataset, KEY_COLUMNS)
    directory = index_directory(dataset)
    stray = [
        directory / "manifest.json.tmp-0123456789abcdef",  # a manifest replaced by no one
        directory / ".keys-000000-01234567.arrow.tmp-0123456789abcdef",  # a content file half written
        directory / "keys-000000-01234567.arrow",  # written, but its manifest never came
        directory / ".work-dead0000",  # a work folder whose owner died before it locked it
        directory / ".work-dead0001",  # one whose owner died with its lock
    ]
    for path in stray[:3]:
        path.write_bytes(b"x")
    for path in stray[3:]:
        path.mkdir()
        (path / "keys-000001-01234567.arrow").write_bytes(b"x")
    (stray[4] / ".owner").write_bytes(b"")
    open_state_index(dataset, KEY_COLUMNS, persist=False)  # a reader that must not write: leaves them
    assert all(p.exists() for p in stray)
    same_index(open_state_index(dataset, KEY_COLUMNS), expected)
    assert not any(p.exists() for p in stray) and left_over(directory) == set()


def test_a_live_work_folder_is_never_removed_and_a_dead_one_is(tmp_path: Path) -> None:
    live = WorkFolder.create(tmp_path)
    (live.path / "pending-000000.arrow").write_bytes(b"x")
    dead = tmp_path / ".work-dead"
    dead.mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "file").write_bytes(b"x")
    removed = remove_leftovers(tmp_path, {"file"})
    assert sorted(p.name for p in removed) == [".work-dead", "other"]
    assert (live.path / "pending-000000.arrow").exists()
    live.remove()
    live.remove()  # idempotent
    assert not live.path.exists() and [p.name for p in tmp_path.iterdir()] == ["file"]


def test_a_folder_a_cleaner_took_before_its_owner_locked_it_is_not_used(tmp_path: Path) -> None:
    """A cleaner may lock a fresh ``.work-*`` before its maker does: the maker makes another."""
    taken = tmp_path / ".work-taken"
    taken.mkdir()
    cleaner = os.open(taken / ".owner", os.O_RDWR | os.O_CREAT)
    try:
        assert try_lock(cleaner)
        real = tempfile.mkdtemp
        made = iter([str(taken)])
        with mock.patch.object(leftovers.tempfile, "mkdtemp", lambda **kw: next(made, None) or real(**kw)):
            work = WorkFolder.create(tmp_path)
        assert work.path != taken and work.path.parent == tmp_path
    finally:
        os.close(cleaner)
    work.remove()


def test_a_join_index_save_removes_unlisted_runs_keys_and_temporaries(tmp_path: Path) -> None:
    directory = tmp_path / "join-index"
    run = StoredRun("r-live", (("__odfproj_bucket=1/part-0.parquet", 1),))
    for path in ("k-a/r-live/__odfproj_bucket=1/part-0.parquet", "k-a/r-dead/part-0.parquet", "k-gone/r-x/p"):
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(b"x")
    (directory / "manifest.json.tmp-0123456789abcdef").write_bytes(b"{")
    save_join_index(directory, block_hash(0), "fingerprint", {"a": 3}, {"k-a": (run,)})
    assert sorted(p.name for p in directory.iterdir()) == ["k-a", "manifest.json"]
    assert [p.name for p in (directory / "k-a").iterdir()] == ["r-live"]


class _Frame:
    """Just what ``save_group_state`` asks of a DataFrame: ``coalesce(1).write.parquet(path)``, and a
    session without an exchange setting (the hand-over stays on this disk)."""

    write = property(lambda self: self)
    sparkSession = None

    def coalesce(self, _n: int) -> _Frame:
        return self

    def parquet(self, path: str) -> None:
        Path(path).mkdir()
        pq.write_table(pa.table({"g": [1]}), Path(path) / "part-00000.parquet")


def test_a_group_state_save_removes_a_killed_writers_version_and_temporaries(dataset: Dataset) -> None:
    directory = group_state_directory(dataset)
    (directory / "v-dead" / "_temporary").mkdir(parents=True)
    (directory / "manifest.json.tmp-0123456789abcdef").write_bytes(b"{")
    save_group_state(_Frame(), dataset, block_hash(0), "fingerprint")  # type: ignore[arg-type]
    names = sorted(p.name for p in directory.iterdir())
    assert len(names) == 2 and names[0] == "manifest.json" and names[1].startswith("v-")
