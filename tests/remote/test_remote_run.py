"""``odfproj run`` on a remote workspace (S3 on the test server, and file://) reads only what its steps read.

Two CI-like runners share the remote: each starts from a clone of the project and an empty cache. A
no-op run fetches no data file and reads little more than the heads; an update fetches the slices its
steps read (a derivative's new input slice), never the history before them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from odfproj.engine.exchange import EXCHANGE_CONF, EXCHANGE_FOLDER
from odfproj.engine.s3a import IN_PLACE_CONF
from odfproj.engine.spark import SparkEngine
from odfproj.project.config import WORKSPACE_ENV
from odfproj.remote.location import remote_cache_dir
from odfproj.storage.object_store import TRANSFERS, S3Store, open_store
from tests import manifests
from tests.cli_inprocess import cli_in
from tests.run.test_run import DERIVATIVE, ROOT

pytestmark = pytest.mark.spark


def _project(root: Path) -> Path:
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: remote-runs\n")
    (root / "datasets" / "trips.yaml").write_text(ROOT.format(name="trips"))
    (root / "datasets" / "trips.view.yaml").write_text(DERIVATIVE.format(name="trips.view", input="trips"))
    (root / "data" / "trips").mkdir(parents=True)
    (root / "data" / "trips" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    return root


def _clone(project: Path, to: Path) -> Path:
    """A fresh checkout of the project on another runner: the manifests and inputs, no cache."""
    shutil.copytree(project, to, ignore=shutil.ignore_patterns(".odf"))
    return to


def _fetched(project: Path, url: str, dataset: str) -> list[str]:
    """The data files the runner's cache of ``url`` holds for ``dataset``."""
    folder = remote_cache_dir(project, url) / "datasets" / dataset / "data"
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


@pytest.fixture(params=["s3", "file"])
def remote_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return request.getfixturevalue("bucket") if request.param == "s3" else f"file://{tmp_path / 'remote'}"


Runners = tuple[Path, Path, Callable[..., tuple[int, str]]]


def _runners(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> Runners:
    """Two runners' project folders (the second not cloned yet) and ``run_in(project, *args)``."""
    first = _project(tmp_path / "runner1")
    second = tmp_path / "runner2"
    here = {"cwd": first}
    invoke = cli_in(spark, monkeypatch, lambda: here["cwd"])
    monkeypatch.setenv(WORKSPACE_ENV, url)

    def run_in(project: Path, *args: str) -> tuple[int, str]:
        here["cwd"] = project
        return invoke(*args)

    return first, second, run_in


@pytest.fixture
def runners(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote_url: str) -> Runners:
    return _runners(spark, tmp_path, monkeypatch, remote_url)


def test_a_fresh_runner_fetches_only_what_its_steps_read(runners, remote_url: str) -> None:
    first, second, run_in = runners
    code, out = run_in(first, "run")
    assert code == 0, out

    # A fresh runner with nothing to do reads the heads and blocks, and no data file.
    _clone(first, second)
    before = TRANSFERS.now()
    code, out = run_in(second, "--verbose", "run")
    assert code == 0, out
    assert f"remote workspace {remote_url}: " in out  # what it moved, in one line
    assert _fetched(second, remote_url, "trips") == [] and _fetched(second, remote_url, "trips.view") == []
    if remote_url.startswith("s3://"):
        moved = TRANSFERS.now() - before
        assert moved.bytes_in < 64 * 1024 and moved.bytes_out < 4 * 1024, moved.describe()

    # The first runner ingests a new file into the root alone; the second brings the view up to date
    # and fetches exactly the root's new slice, which the view's step reads (from a folder store, which
    # this machine opens in place, nothing at all).
    (first / "data" / "trips" / "2.csv").write_text("id,city\n3,Pune\n")
    code, out = run_in(first, "run", "--select", "trips")
    assert code == 0, out
    code, out = run_in(second, "run")
    assert code == 0, out
    if remote_url.startswith("file://"):
        assert _fetched(second, remote_url, "trips") == []
        return
    [fetched] = _fetched(second, remote_url, "trips")
    first_cache = remote_cache_dir(first, remote_url) / "datasets"
    root_slices = sorted(p.name for p in (first_cache / "trips" / "data").iterdir())
    assert len(root_slices) == 2 and fetched in root_slices
    assert (first_cache / "trips" / "data" / fetched).stat().st_mtime == max(
        (first_cache / "trips" / "data" / n).stat().st_mtime for n in root_slices
    )  # the newer one

    # The first runner sees the view's update and has nothing left to do.
    code, out = run_in(first, "run")
    assert code == 0, out
    assert "up to date" in out or "nothing to do" in out.lower(), out


SNAPSHOT_ROOT = manifests.root(
    "stations",
    path="data/stations/*.csv",
    schema=["id BIGINT", "city STRING"],
    merge={"kind": "Snapshot", "primaryKey": ("id",)},
)


def test_a_fresh_runner_updates_a_snapshot_from_the_stores_state_index(runners, remote_url: str) -> None:
    """The state index goes to the store with the chain, so a fresh runner's Snapshot merge reads the
    current rows through it: a data file whose rows were all superseded is never fetched."""
    first, second, run_in = runners
    for name in ("trips.yaml", "trips.view.yaml"):
        (first / "datasets" / name).unlink()
    (first / "datasets" / "stations.yaml").write_text(SNAPSHOT_ROOT)
    (first / "data" / "stations").mkdir(parents=True)
    (first / "data" / "stations" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    assert run_in(first, "run")[0] == 0
    (first / "data" / "stations" / "2.csv").write_text("id,city\n1,Bergen\n2,Cusco\n")
    code, out = run_in(first, "run")
    assert code == 0, out
    slices = sorted(
        (remote_cache_dir(first, remote_url) / "datasets" / "stations" / "data").iterdir(),
        key=lambda p: p.stat().st_mtime,
    )
    superseded, current = (p.name for p in slices)

    _clone(first, second)
    (second / "data" / "stations" / "3.csv").write_text("id,city\n1,Bergen\n2,Cusco\n3,Pune\n")
    code, out = run_in(second, "run")
    assert code == 0, out
    fetched = _fetched(second, remote_url, "stations")
    assert superseded not in fetched, (superseded, current, fetched)
    assert (current in fetched) == remote_url.startswith("s3://")  # a folder store is read in place
    # Both runners agree on the data: the first one's run has nothing left to do.
    code, out = run_in(first, "run")
    assert code == 0 and "0 record(s) added" in out, out


def test_with_the_connector_a_snapshot_merge_reads_its_history_in_the_store(
    s3a, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bucket: str
) -> None:
    """Where Spark opens the store in place, a Snapshot's previous state is computed by the executors from
    the history at its place (``state.frames.state_from_history``): a fresh runner's update fetches no data
    file and no state index through this process, and both runners agree on the result."""
    first, second, run_in = _runners(s3a, tmp_path, monkeypatch, bucket)
    for name in ("trips.yaml", "trips.view.yaml"):
        (first / "datasets" / name).unlink()
    (first / "datasets" / "stations.yaml").write_text(SNAPSHOT_ROOT)
    (first / "data" / "stations").mkdir(parents=True)
    (first / "data" / "stations" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    context_conf = s3a.sparkContext._jsc.sc().conf()
    context_conf.set(IN_PLACE_CONF, "true")
    try:
        assert run_in(first, "run")[0] == 0
        (first / "data" / "stations" / "2.csv").write_text("id,city\n1,Bergen\n2,Cusco\n")
        code, out = run_in(first, "run")
        assert code == 0, out
        _clone(first, second)
        (second / "data" / "stations" / "3.csv").write_text("id,city\n1,Bergen\n2,Lima\n3,Pune\n")
        before = TRANSFERS.now()
        code, out = run_in(second, "run")
        assert code == 0 and "3 record(s) added" in out, out  # -C and +C of id 2, +A of id 3
        moved = TRANSFERS.now() - before
        older = {
            p.name for p in (remote_cache_dir(first, bucket) / "datasets" / "stations" / "data").iterdir()
        }
        held = _fetched(second, bucket, "stations")
        assert len(held) == 1 and not older & set(held), (older, held)  # only the slice it wrote itself
        state_index = remote_cache_dir(second, bucket) / "datasets" / "stations" / "info" / "state-index"
        assert not state_index.exists() or not any(state_index.iterdir())
        assert moved.bytes_in < 64 * 1024, moved.describe()
        code, out = run_in(first, "run")  # the first runner sees the update: nothing left to add
        assert code == 0 and "0 record(s) added" in out, out
        code, out = run_in(first, "sql", "SELECT id, city FROM stations ORDER BY id", "--format", "csv")
        assert code == 0, out
        assert out.split() == ['"id","city"', '1,"Bergen"', '2,"Lima"', '3,"Pune"'], out
    finally:
        context_conf.remove(IN_PLACE_CONF)


def test_spark_reads_the_slices_in_the_store_itself(
    s3a, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bucket: str
) -> None:
    """With the S3A connector (the session of a workspace on S3 gets it, ``engine.s3a.with_data_at``),
    the derivative's Spark job reads its input's new slice at ``s3a://`` and the runner's cache
    fetches nothing at all."""
    first, second, run_in = _runners(s3a, tmp_path, monkeypatch, bucket)
    # As with_data_at marks a session with the connector: in the context's conf, which every session a
    # run makes of it (newSession) starts from.
    context_conf = s3a.sparkContext._jsc.sc().conf()
    context_conf.set(IN_PLACE_CONF, "true")
    try:
        assert run_in(first, "run")[0] == 0
        _clone(first, second)
        (first / "data" / "trips" / "2.csv").write_text("id,city\n3,Pune\n")
        assert run_in(first, "run", "--select", "trips")[0] == 0
        code, out = run_in(second, "run")
        assert code == 0, out
        assert _fetched(second, bucket, "trips") == []
        code, out = run_in(second, "sql", "SELECT count(*) AS n FROM `trips.view`")
        assert code == 0 and "3" in out, out
    finally:
        context_conf.remove(IN_PLACE_CONF)


def test_executors_that_cannot_see_this_disk_get_every_file_through_the_store(
    s3a, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bucket: str
) -> None:
    """On a master other than ``local`` a run hands its files over through the store (``engine.exchange``):
    the roots' source files go up for Spark to read, the slices and group state Spark writes come down
    from it, and nothing Spark wrote is left there. (That no executor opens a path of the driver is what
    tests/cluster checks, with workers that cannot see the driver's disk.)"""
    first, _, run_in = _runners(s3a, tmp_path, monkeypatch, bucket)
    # Two records a file, so a batch of five is written by Spark (not collected) as three slices.
    monkeypatch.setattr(SparkEngine, "rows_per_file", property(lambda self: 2))
    sent: list[str] = []
    put_file = S3Store.put_file
    monkeypatch.setattr(
        S3Store,
        "put_file",
        lambda self, key, path, **how: (sent.append(self._key(key)), put_file(self, key, path, **how)),
    )
    (first / "datasets" / "stations.yaml").write_text(SNAPSHOT_ROOT)
    (first / "data" / "stations").mkdir(parents=True)
    (first / "data" / "stations" / "1.csv").write_text("id,city\n1,Oslo\n2,Lima\n")
    grouped = manifests.derivative(
        "stations.count",
        ["stations"],
        "SELECT city, count(*) AS n, max(event_time) AS event_time FROM stations GROUP BY city",
    )
    (first / "datasets" / "stations.count.yaml").write_text(grouped)
    context_conf = s3a.sparkContext._jsc.sc().conf()
    context_conf.set(IN_PLACE_CONF, "true")
    context_conf.set(EXCHANGE_CONF, f"{bucket}/{EXCHANGE_FOLDER}")
    try:
        code, out = run_in(first, "run")
        assert code == 0, out
        sent.clear()
        (first / "data" / "trips" / "2.csv").write_text("id,city\n3,Pune\n4,Rome\n5,Oslo\n6,Kyiv\n7,Lima\n")
        (first / "data" / "stations" / "2.csv").write_text("id,city\n1,Bergen\n2,Lima\n3,Lima\n")
        code, out = run_in(first, "run")
        assert code == 0, out
        code, out = run_in(first, "sql", "SELECT count(*) AS n FROM `trips.view`")
        assert code == 0 and "7" in out, out
        # The five records' three slices moved within the store to their places: none was sent up again.
        stored = open_store(bucket).list("datasets/trips/data/")
        assert len(stored) == 4 and not [key for key in sent if "/datasets/trips/data/" in key], (
            stored,
            sent,
        )
        code, out = run_in(
            first, "sql", "SELECT city, n FROM `stations.count` ORDER BY city", "--format", "csv"
        )
        assert code == 0, out
        assert out.split() == ['"city","n"', '"Bergen",1', '"Lima",2'], out
    finally:
        context_conf.remove(IN_PLACE_CONF)
        context_conf.remove(EXCHANGE_CONF)
    cache = remote_cache_dir(first, bucket) / "datasets"
    assert any((cache / "stations.count" / "info" / "group-state").glob("v-*/part-*.parquet"))  # taken
    handed = [key.split("/", 2)[2] for key in open_store(bucket).list(EXCHANGE_FOLDER)]
    assert any(key.endswith("data/trips/2.csv") for key in handed), handed  # given to Spark
    # The Snapshot's previous state: computed by the executors from its history in the store, not handed.
    assert not any("/state-" in key for key in handed), handed
    assert not any("/slices-" in key for key in handed), handed  # every slice Spark wrote was taken
    assert not any("/datasets/" in key and "/data/" in key for key in handed), handed  # read in the store
