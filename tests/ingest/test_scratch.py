"""Temporary ingest folders: a killed ingest's folder is removed by the next one, a live one's never.

Real processes: an ingest subprocess SIGKILLed in the middle of a download from a trickling server
on 127.0.0.1, another process holding its folder, and the next ingest run in this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.ingest.errors import SourceUnreachableError
from odfproj.ingest.http import ENV_RETRIES
from odfproj.ingest.pipeline import ingest_polling
from odfproj.ingest.scratch import INGEST_PREFIX, remove_abandoned, scratch_folder
from odfproj.odf import model
from odfproj.storage.workspace import Workspace
from tests.security.fetch_helpers import raw_server, refused_port, trickling, wait_until

REPO = Path(__file__).resolve().parents[2]

_INGEST = """
import sys
from pathlib import Path
from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.ingest.pipeline import ingest_polling
from odfproj.storage.workspace import Workspace
dataset = Workspace(Path(sys.argv[1])).open(sys.argv[2])
ingest_polling(dataset, SparkEngine(SparkSessionHolder(SparkSettings())), project_root=Path(sys.argv[1]))
"""

_HOLD = """
import sys
from pathlib import Path
from odfproj.ingest.scratch import scratch_folder
with scratch_folder(parent=Path(sys.argv[1])) as path:
    print(path, flush=True)
    sys.stdin.read()
"""


def _url_root(ws: Workspace, name: str, url: str) -> None:
    source = model.SetPollingSource(
        fetch=model.FetchStepUrl(url=url),
        read=model.ReadStepCsv(header=True, schema=("a BIGINT",)),
        merge=model.MergeStrategyAppend(),
    )
    ws.create(name, model.DatasetKind.Root, events=[source])


def _folders(tmp: Path) -> set[Path]:
    return {p for p in tmp.iterdir() if p.name.startswith(INGEST_PREFIX)}


def test_folder_of_a_killed_ingest_is_removed_by_the_next_one(tmp_path: Path, monkeypatch) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    ws = Workspace(tmp_path / "ws")
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
    with raw_server(trickling(0.05)) as server:
        _url_root(ws, "web", server.url())
        ingest = subprocess.Popen([sys.executable, "-c", _INGEST, str(ws.root), "web"], env=env)
        try:
            assert wait_until(lambda: any(tmp.glob(f"{INGEST_PREFIX}*/*.part"))), "no download started"
        finally:
            ingest.send_signal(signal.SIGKILL)
            ingest.wait()
    [killed] = _folders(tmp)
    assert any(killed.iterdir())  # the partial download is still there

    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        live = Path(holder.stdout.readline().strip())
        assert live.is_dir()

        # The next ingest (of another dataset; this one fails at once) sweeps the killed folder.
        monkeypatch.setattr(tempfile, "tempdir", str(tmp))
        _url_root(ws, "refused", f"http://127.0.0.1:{refused_port()}/x.csv")
        engine = SparkEngine(SparkSessionHolder(SparkSettings()))  # never started: the fetch fails first
        with pytest.raises(SourceUnreachableError, match="connection refused"):
            ingest_polling(ws.open("refused"), engine, project_root=ws.root, environ={ENV_RETRIES: "0"})
        assert not killed.exists()
        assert _folders(tmp) == {live}  # the live process's folder is untouched
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert _folders(tmp) == set()  # and its owner removed it on exit


def test_own_live_folder_is_never_swept(tmp_path: Path) -> None:
    with scratch_folder(parent=tmp_path) as mine:
        (mine / "download.part").write_bytes(b"half")
        assert remove_abandoned(tmp_path, INGEST_PREFIX) == []
        assert (mine / "download.part").exists()
    assert not mine.exists()


def test_only_folders_of_the_prefix_are_swept(tmp_path: Path) -> None:
    abandoned = tmp_path / f"{INGEST_PREFIX}dead"
    abandoned.mkdir()
    other = tmp_path / "odfproj-push-dead"
    other.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / f"{INGEST_PREFIX}link"
    link.symlink_to(target)
    assert remove_abandoned(tmp_path, INGEST_PREFIX) == [abandoned]
    assert other.is_dir() and target.is_dir() and link.is_symlink()
