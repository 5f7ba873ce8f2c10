"""SIGKILL a run whose workspace is in S3, on workers that share only the store: it stays valid.

A small project (a Ledger root, a Snapshot root, a view and a grouped derivative, several files each, so
a run commits many times) runs once uninterrupted to learn its hashes and duration; then it runs again
and again on another bucket, each run killed with SIGKILL (its process group: odfproj and its JVM) at a
random moment of a run's duration, until 10 runs were killed while they worked. After each kill the dead
run's lock is removed as a user would (``odfproj unlock``), and ``odfproj verify --integrity --full``
checks the store itself: every head's blocks, data files and checkpoints present and matching their
hashes. A last run must finish and give the uninterrupted run's hashes. Slow (minutes):
``./dev test-cluster``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import manifests
from tests.cluster.conftest import APP_CONF, StoreOnly
from tests.cluster.test_cluster import RUN_TIMEOUT_S, run_script
from tests.conftest import REPO_DIR, s3a_jars_or_skip

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

KILLS = 10
#: The moments of the kills, as parts of an uninterrupted run's duration (the JVM's start comes first).
EARLIEST, LATEST = 0.25, 1.0


def _project(base: Path, master: str) -> Path:
    project = base / "project"
    (project / "datasets").mkdir(parents=True)
    conf = "".join(
        f'\n      {k}: "{v}"' for k, v in {**APP_CONF, "spark.sql.shuffle.partitions": "2"}.items()
    )
    (project / "odfproj.yaml").write_text(
        f"name: kills\ntargets:\n  dev:\n    spark_master: {master}\n    spark_conf:{conf}\n"
    )
    files = {
        "trips": manifests.root(
            "trips",
            path="data/trips/*.csv",
            schema=["id BIGINT", "city STRING"],
            merge=manifests.ledger("id"),
        ),
        "stations": manifests.root(
            "stations",
            path="data/stations/*.csv",
            schema=["id BIGINT", "city STRING"],
            merge={"kind": "Snapshot", "primaryKey": ("id",)},
        ),
        "trips.view": manifests.derivative("trips.view", ["trips"], "SELECT * FROM trips"),
        "stations.count": manifests.derivative(
            "stations.count",
            ["stations"],
            "SELECT city, count(*) AS n, max(event_time) AS event_time FROM stations GROUP BY city",
        ),
    }
    for name, text in files.items():
        (project / "datasets" / f"{name}.yaml").write_text(text)
    cities = ["Oslo", "Lima", "Pune", "Kyiv", "Quito"]
    for n in range(4):
        for root in ("trips", "stations"):
            (project / "data" / root).mkdir(parents=True, exist_ok=True)
            ids = range(n * 3, n * 3 + 3) if root == "trips" else range(4)
            rows = "".join(f"{i},{cities[(i + n) % len(cities)]}\n" for i in ids)
            (project / "data" / root / f"{n}.csv").write_text("id,city\n" + rows)
    return project


def _odfproj(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "odfproj"), *args],
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def _killed_run(project: Path, env: dict[str, str], after: float) -> int | None:
    """Run the project and SIGKILL it ``after`` seconds; ``None`` if it was killed, else its exit code (it
    finished first)."""
    scratch = project.parent / "tmp"  # a killed run's temporary folders stay there, not in the machine's /tmp
    scratch.mkdir(exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.cluster.run_example", str(project)],
        cwd=REPO_DIR,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "TMPDIR": str(scratch), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return process.wait(timeout=after)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return None


def test_sigkills_during_runs_into_the_store_leave_it_valid_and_a_rerun_matches(
    store_only: StoreOnly,
) -> None:
    s3a_jars_or_skip()
    master = store_only.cluster.master_url
    started = time.monotonic()
    whole = run_script(
        "tests.cluster.run_example",
        str(_project(store_only.driver / "whole", master)),
        env=store_only.driver_env(store_only.new_bucket()),
    )
    seconds = time.monotonic() - started
    assert whole["failed"] == {} and all(whole["hashes"].values()), whole

    rng = random.Random(int(os.environ.get("ODFPROJ_KILL_SEED", "33")))
    project = _project(store_only.driver / "killed", master)
    bucket = store_only.new_bucket()
    kills = attempts = 0
    while kills < KILLS:
        attempts += 1
        assert attempts <= 3 * KILLS, f"only {kills} of {attempts} runs were still working when killed"
        env = store_only.driver_env(bucket)
        finished = _killed_run(project, env, rng.uniform(EARLIEST, LATEST) * seconds)
        if finished is not None:
            # It finished before its kill: everything is committed. Start again on an empty store.
            assert finished == 0, f"a run after {kills} kill(s) failed (exit {finished})"
            bucket = store_only.new_bucket()
            shutil.rmtree(project / ".odf", ignore_errors=True)
            continue
        kills += 1
        lock = (
            store_only.client().get_object(Bucket=bucket, Key="repo/.lock")
            if "repo/.lock" in store_only.keys(bucket)
            else None
        )
        if lock is not None:
            lock_id = json.loads(lock["Body"].read())["lock_id"]
            unlocked = _odfproj(project, env, "unlock", lock_id)
            assert unlocked.returncode == 0, unlocked.stdout + unlocked.stderr
        verified = _odfproj(project, env, "verify", "--integrity", "--full")
        assert verified.returncode == 0, f"after kill {kills}:\n{verified.stdout}{verified.stderr}"

    final = run_script("tests.cluster.run_example", str(project), env=store_only.driver_env(bucket))
    assert final["failed"] == {} and final["hashes"] == whole["hashes"]
