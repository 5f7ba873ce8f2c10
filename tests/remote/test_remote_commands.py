"""plan and apply against a remote workspace (S3 on the test server, and file://), from CI-like folders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from odfproj.project.config import WORKSPACE_ENV
from odfproj.remote.workspace import acquire_lock, checkout, commit, release_lock
from odfproj.storage.object_store import open_store
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main as _cli
from tests.remote.conftest import make_workspace
from tests.security.project_helpers import info_manifest, make_project


@pytest.fixture(params=["s3", "file"])
def remote_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = request.getfixturevalue("bucket") if request.param == "s3" else f"file://{tmp_path / 'remote'}"
    monkeypatch.setenv(WORKSPACE_ENV, url)
    return url


def _project(root: Path) -> Path:
    return make_project(
        root, {"a.yaml": info_manifest("alpha", "first"), "b.yaml": info_manifest("beta", "second")}
    )


def test_plan_on_an_empty_runner_sees_the_remote_and_exactly_one_edit(
    tmp_path: Path, remote_url: str
) -> None:
    first = _project(tmp_path / "runner1")
    code, out = _cli("apply", "--auto-approve", "--project", str(first))
    assert code == 0, out
    # A fresh clone on another runner: nothing local but the manifests.
    clone = tmp_path / "runner2"
    shutil.copytree(first, clone, ignore=shutil.ignore_patterns(".odf"))
    code, out = _cli("plan", "--detailed-exitcode", "--project", str(clone))
    assert code == 0, out
    (clone / "datasets" / "b.yaml").write_text(info_manifest("beta", "edited"), encoding="utf-8")
    code, out = _cli("plan", "--detailed-exitcode", "--project", str(clone))
    assert code == 2, out
    assert "beta" in out and "alpha" not in out.replace("alpha: unchanged", "")
    # Applying from the clone commits to the remote; the first runner then sees no change left.
    code, out = _cli("apply", "--auto-approve", "--project", str(clone))
    assert code == 0, out
    (first / "datasets" / "b.yaml").write_text(info_manifest("beta", "edited"), encoding="utf-8")
    code, out = _cli("plan", "--detailed-exitcode", "--project", str(first))
    assert code == 0, out


def test_a_second_apply_fails_at_once_naming_the_holder(tmp_path: Path, remote_url: str) -> None:
    project = _project(tmp_path / "runner")
    store = open_store(remote_url)
    held = acquire_lock(store, purpose="odfproj apply")
    try:
        code, out = _cli("apply", "--auto-approve", "--project", str(project))
        assert code != 0 and code != 70
        assert out.count("\n") == 1 and held.lock_id in out and held.host in out and remote_url in out, out
        # plan takes no lock.
        code, out = _cli("plan", "--project", str(project))
        assert code == 0, out
    finally:
        release_lock(store, held)
    assert store.get(".lock") is None


def test_an_unreachable_remote_workspace_is_one_line_naming_it(
    tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKSPACE_ENV, bucket)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    code, out = _cli("plan", "--project", str(_project(tmp_path / "runner")))
    assert code not in (0, 70) and out.count("\n") == 1 and bucket in out and "Traceback" not in out, out


def test_the_ci_template_shares_a_remote_workspace_s_metadata_with_pull_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The apply job's metadata step, run as CI runs it, on a remote workspace (file:// here)."""
    import os
    import subprocess
    import sys

    import yaml

    from odfproj.project.scaffold import scaffold_project

    url = f"file://{tmp_path / 'remote'}"
    monkeypatch.setenv(WORKSPACE_ENV, url)
    project = _project(tmp_path / "runner")
    assert _cli("apply", "--auto-approve", "--project", str(project))[0] == 0
    scaffold_project(tmp_path / "scaffold")
    workflow = yaml.safe_load(
        (tmp_path / "scaffold/.github/workflows/odfproj.yml").read_text(encoding="utf-8")
    )
    step = next(
        s for s in workflow["jobs"]["apply"]["steps"] if s.get("name") == "Copy the workspace's metadata"
    )
    env = {**os.environ, "RUNNER_TEMP": str(tmp_path / "tmp"), "ODFPROJ_WORKSPACE": url}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=project, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    metadata = tmp_path / "tmp" / "metadata" / "datasets"
    assert sorted(p.name for p in metadata.iterdir()) == ["alpha", "beta"]
    assert not any((metadata / "alpha" / "data").iterdir())
    # A pull request's plan against that artifact sees no change.
    clone = tmp_path / "pr"
    shutil.copytree(project, clone, ignore=shutil.ignore_patterns(".odf"))
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "tmp" / "metadata"))
    code, out = _cli("plan", "--detailed-exitcode", "--project", str(clone))
    assert code == 0, out


@pytest.mark.parametrize("folder", ["blocks", "data"])
def test_verify_integrity_catches_a_flipped_byte_in_the_remote(
    tmp_path: Path, bucket: str, folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte flipped in an object the runner's cache already holds is still found: verify reads the remote."""
    import boto3

    monkeypatch.setenv(WORKSPACE_ENV, bucket)
    project = _project(tmp_path / "runner")
    store = open_store(bucket)
    commit(store, make_workspace(tmp_path / "data-ws"))
    code, out = _cli("verify", "--integrity", "--project", str(project))
    assert code == 0 and f"remote workspace {bucket} verified" in out, out
    checkout(store, Workspace(tmp_path / "cache"))
    name, prefix = bucket.removeprefix("s3://").split("/", 1)
    client = boto3.client("s3")
    listing = client.list_objects_v2(Bucket=name, Prefix=f"{prefix}/datasets/trips/{folder}/")
    key = sorted(o["Key"] for o in listing["Contents"])[0]
    data = bytearray(client.get_object(Bucket=name, Key=key)["Body"].read())
    data[len(data) // 2] ^= 0x01
    client.put_object(Bucket=name, Key=key, Body=bytes(data))
    code, out = _cli("verify", "--integrity", "--project", str(project))
    assert code == 1 and key.rsplit("/", 1)[1] in out and "does not match its hash" in out, out
