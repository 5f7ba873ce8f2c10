"""odfproj on real distributed Spark: a standalone cluster and a Spark Connect server, hash for hash.

The example project and the transform batch-invariance scenario run on ``local[2]``, on the
standalone master (two workers) and on the Connect server (whose driver uses the same workers); every
dataset's logical hashes must equal the local run's. Each run is a process of its own (see
``run_example.py``, ``batch_hashes.py``). Slow (minutes): run with ``./dev test-cluster``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.conftest import APP_CONF
from tests.conftest import REPO_DIR

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: One run of a script on a loaded 2-core machine stays well under this.
RUN_TIMEOUT_S = 900


def run_script(module: str, *args: str) -> dict:
    """``python -m module args`` from the repository; its JSON output, or a failure with its stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 and not done.stdout.strip():
        pytest.fail(f"{module} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def example_copy(base: Path, master: str, extra_conf: dict[str, str]) -> Path:
    """A copy of example_project whose default target runs on ``master``."""
    project = base / "project"
    shutil.copytree(REPO_DIR / "example_project", project, ignore=shutil.ignore_patterns(".odf"))
    config = project / "odfproj.yaml"
    text = re.sub(r"spark_master: \S+", f"spark_master: {master}", config.read_text())
    lines = "".join(f'\n      {k}: "{v}"' for k, v in extra_conf.items())
    text = text.replace("    spark_conf:", "    spark_conf:" + lines, 1)
    config.write_text(text)
    return project


def example_hashes(base: Path, master: str, extra_conf: dict[str, str] | None = None) -> dict:
    result = run_script("tests.cluster.run_example", str(example_copy(base, master, extra_conf or {})))
    assert result["failed"] == {}, result["failed"]
    return result["hashes"]


@pytest.fixture(scope="module")
def local_example(tmp_path_factory) -> dict:
    hashes = example_hashes(tmp_path_factory.mktemp("local-example"), "local[2]")
    assert len(hashes) == 7 and all(hashes.values()), hashes  # every dataset has data
    return hashes


@pytest.fixture(scope="module")
def local_batches(tmp_path_factory) -> dict:
    return run_script("tests.cluster.batch_hashes", "local[2]", str(tmp_path_factory.mktemp("local-batches")))


def executors_ran_on(cluster) -> list[Path]:
    """The worker folders in which some application started an executor."""
    return [work for work in cluster.work_dirs if any(work.glob("app-*/*/stderr"))]


def test_example_project_on_standalone_matches_local(standalone, local_example, tmp_path) -> None:
    assert example_hashes(tmp_path, standalone.master_url, APP_CONF) == local_example
    assert executors_ran_on(standalone) == list(standalone.work_dirs)  # both workers did work


def test_example_project_on_spark_connect_matches_local(connect_server, standalone, local_example, tmp_path):
    assert example_hashes(tmp_path, connect_server.url) == local_example
    assert executors_ran_on(standalone) == list(standalone.work_dirs)


def test_batch_invariance_on_standalone_matches_local(standalone, local_batches, tmp_path) -> None:
    assert run_script("tests.cluster.batch_hashes", standalone.master_url, str(tmp_path)) == local_batches


def test_batch_invariance_on_spark_connect_matches_local(connect_server, local_batches, tmp_path) -> None:
    assert run_script("tests.cluster.batch_hashes", connect_server.url, str(tmp_path)) == local_batches
