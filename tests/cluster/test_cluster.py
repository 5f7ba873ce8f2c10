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

from odfproj.engine.exchange import EXCHANGE_FOLDER
from tests.cluster.conftest import APP_CONF, StoreOnly
from tests.conftest import REPO_DIR, s3a_jars_or_skip

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: One run of a script on a loaded 2-core machine stays well under this.
RUN_TIMEOUT_S = 900


def run_script(module: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """``python -m module args`` from the repository (``env``: variables to add); its JSON output, or a
    failure with its stderr."""
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra)
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


def project_copy(template: Path, base: Path, master: str, extra_conf: dict[str, str]) -> Path:
    """A copy of the project ``template`` (its target ``dev`` as example_project's) running on ``master``."""
    project = base / "project"
    shutil.copytree(template, project, ignore=shutil.ignore_patterns(".odf"))
    config = project / "odfproj.yaml"
    text = re.sub(r"spark_master: \S+", f"spark_master: {master}", config.read_text())
    lines = "".join(f'\n      {k}: "{v}"' for k, v in extra_conf.items())
    text = text.replace("    spark_conf:", "    spark_conf:" + lines, 1)
    config.write_text(text)
    return project


def project_hashes(
    template: Path,
    base: Path,
    master: str,
    extra_conf: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    project = project_copy(template, base, master, extra_conf or {})
    result = run_script("tests.cluster.run_example", str(project), env=env)
    assert result["failed"] == {}, result["failed"]
    return result["hashes"]


def example_hashes(
    base: Path, master: str, extra_conf: dict[str, str] | None = None, env: dict[str, str] | None = None
) -> dict:
    return project_hashes(REPO_DIR / "example_project", base, master, extra_conf, env)


@pytest.fixture(scope="module")
def local_example(tmp_path_factory) -> dict:
    hashes = example_hashes(tmp_path_factory.mktemp("local-example"), "local[2]")
    assert len(hashes) == 7 and all(hashes.values()), hashes  # every dataset has data
    return hashes


@pytest.fixture(scope="module")
def dag_template(tmp_path_factory) -> Path:
    """bench_dag's generated project, smaller: 4 roots (Append, Ledger) and 12 derivatives (filters,
    joins, aggregations) in layers of 4."""
    from bench.bench_dag import generate

    template = tmp_path_factory.mktemp("dag") / "template"
    generate(template, roots=4, derivatives=12, layer_size=4, rows=200, seed=7)
    return template


@pytest.fixture(scope="module")
def local_dag(tmp_path_factory, dag_template: Path) -> dict:
    hashes = project_hashes(dag_template, tmp_path_factory.mktemp("local-dag"), "local[2]")
    assert len(hashes) == 16 and all(hashes.values()), hashes
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


# --- a workspace in S3, with workers that share nothing with the driver but the store -----------------


@pytest.mark.parametrize("target", ["local", "standalone", "connect"])
@pytest.mark.parametrize("project", ["example", "bench_dag"])
def test_a_workspace_in_s3_gives_the_hashes_of_local_disk(
    request: pytest.FixtureRequest, project: str, target: str, store_only: StoreOnly
) -> None:
    """A project in a workspace on S3 (moto, the real S3A connector) gives every logical hash a run on
    local disk gives: on ``local[2]``, on the standalone workers that see nothing of the driver's disk,
    and through a Spark Connect server that sees nothing of it either (which brings its own connector;
    odfproj's session carries only its marks: read in place, hand over through the store). Nothing the
    run handed over is left in the store."""
    s3a_jars_or_skip()
    expected = request.getfixturevalue("local_example" if project == "example" else "local_dag")
    template = (
        REPO_DIR / "example_project" if project == "example" else request.getfixturevalue("dag_template")
    )
    master, conf = {
        "local": ("local[2]", {}),
        "standalone": (store_only.cluster.master_url, APP_CONF),
        "connect": (request.getfixturevalue("store_only_connect").url, {}),
    }[target]
    bucket = store_only.new_bucket()
    base = store_only.driver / f"{project}-{target}"
    base.mkdir()
    assert project_hashes(template, base, master, conf, env=store_only.driver_env(bucket)) == expected
    keys = store_only.keys(bucket)
    assert any(k.startswith("repo/datasets/") and "/data/" in k for k in keys)  # the data is in the store
    assert not [k for k in keys if f"/{EXCHANGE_FOLDER}/" in k]  # and nothing handed over is left
    if target == "standalone":
        assert executors_ran_on(store_only.cluster) == list(store_only.cluster.work_dirs)
