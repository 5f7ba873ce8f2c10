"""Preview environments of a remote workspace, against the S3 server the suite starts (moto on 127.0.0.1).

A runner builds an environment in its cache and commits it: only ``envs/<name>/`` is written, holding its
heads and the objects it wrote, never production's. Another runner checks it out, publish fast-forwards the
store's production heads, and destroy removes the prefix. No JVM: chains are written by storage's writers.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.project.config import WORKSPACE_ENV
from odfproj.remote.environments import checkout_environment, commit_environment, environment_store
from odfproj.remote.location import remote_cache_dir
from odfproj.remote.sync import read_head
from odfproj.remote.workspace import checkout, commit, verify_remote
from odfproj.storage.environment import create_environment, fork
from odfproj.storage.object_store import ObjectStore, open_store
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main_split
from tests.remote.conftest import add_slices, make_workspace
from tests.security.project_helpers import info_manifest, make_project


def production_keys(store: ObjectStore) -> dict[str, bytes | None]:
    return {k: store.get(k) for k in store.list() if not k.startswith("envs/") and k != ".lock"}


@pytest.fixture
def remote(bucket: str, tmp_path: Path) -> tuple[ObjectStore, str]:
    url = bucket.replace("/repo", "/ws")
    store = open_store(url)
    commit(store, make_workspace(tmp_path / "first-runner"))
    return store, url


@pytest.fixture
def project(remote: tuple[ObjectStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project on the remote workspace whose cache built environment pr-1 (one block more) and committed it."""
    store, url = remote
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "odfproj.yaml").write_text(f"name: demo\nworkspace: {url}\n")
    monkeypatch.delenv("ODFPROJ_WORKSPACE", raising=False)
    monkeypatch.chdir(folder)
    cache = Workspace(remote_cache_dir(folder, url))
    checkout(store, cache)
    create_environment(cache, "pr-1")
    env = Workspace(cache.root / "envs" / "pr-1")
    fork(env, ["trips"])
    before = production_keys(store)
    add_slices(env.open("trips"), tmp_path / "scratch", 1)
    commit_environment(store, cache.root, "pr-1")
    assert production_keys(store) == before  # production's prefix is never written by an environment
    return folder


def test_an_environment_in_the_store_holds_only_its_heads_and_new_objects(
    remote: tuple[ObjectStore, str], project: Path, tmp_path: Path
) -> None:
    store, _ = remote
    keys = sorted(environment_store(store, "pr-1").list())
    assert keys == sorted(
        [
            "env.json",
            "datasets/trips/refs/head",
            *[k for k in keys if k.startswith("datasets/trips/blocks/")],
            *[k for k in keys if k.startswith("datasets/trips/data/")],
            *[k for k in keys if k.startswith("datasets/trips/checkpoints/")],
        ]
    )
    assert sum(k.startswith("datasets/trips/blocks/") for k in keys) == 1  # the one new block only
    assert sum(k.startswith("datasets/trips/data/") for k in keys) == 1

    # A fresh runner sees the same environment: its objects from the prefix, production's from production.
    fresh = Workspace(tmp_path / "fresh-runner")
    checkout(store, fresh)
    assert checkout_environment(store, fresh.root, "pr-1")
    env = Workspace(fresh.root / "envs" / "pr-1")
    built = Workspace(remote_cache_dir(project, remote[1]) / "envs" / "pr-1")
    assert env.open("trips").head() == built.open("trips").head()
    assert verify_dataset(env.open("trips"), integrity=True) == []


def test_publish_fast_forwards_the_stores_production_and_destroy_removes_the_prefix(
    remote: tuple[ObjectStore, str], project: Path
) -> None:
    store, url = remote
    env_head = Workspace(remote_cache_dir(project, url) / "envs" / "pr-1").open("trips").head()
    code, out, err = run_main_split("env", "list")
    assert (code, err) == (0, "") and out.startswith("pr-1: refreshed ") and "changed: trips" in out
    code, out, err = run_main_split("publish", "pr-1")
    assert (code, err) == (0, ""), out
    assert out.splitlines()[0] == "> trips: fast-forwarded, 1 block(s), 3 object(s) linked"
    found = read_head(store.child("datasets").child("trips"), "the store")
    assert found is not None and found[0] == env_head
    assert verify_remote(store, integrity=True) == []
    code, out, _ = run_main_split("env", "destroy", "pr-1", "--yes")
    assert (code, out) == (0, "destroyed environment pr-1\n")
    assert [k for k in environment_store(store, "pr-1").list() if k != ".lock"] == []
    assert run_main_split("env", "list")[1].startswith("no environments")


def test_publish_refuses_when_the_stores_production_moved(
    remote: tuple[ObjectStore, str], project: Path, tmp_path: Path
) -> None:
    store, _ = remote
    other = Workspace(tmp_path / "other-runner")
    checkout(store, other)
    add_slices(other.open("trips"), tmp_path / "other-scratch", 1)
    commit(store, other)  # production moves in the store
    before = production_keys(store)
    code, out, _ = run_main_split("publish", "pr-1")
    assert code == 1
    assert out.splitlines()[0].startswith("! trips: refused: production's head moved since the fork")
    assert production_keys(store) == before


def test_apply_and_plan_in_an_environment_from_ci_like_runners(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apply --env from one runner writes only the environment's prefix; plan --env from a fresh runner sees
    it applied; publish from a third makes production's plan clean."""
    monkeypatch.setenv(WORKSPACE_ENV, bucket)
    store = open_store(bucket)
    first = make_project(
        tmp_path / "runner1",
        {"a.yaml": info_manifest("alpha", "first"), "b.yaml": info_manifest("beta", "second")},
    )
    assert run_main_split("apply", "--auto-approve", "--project", str(first))[0] == 0
    before = production_keys(store)
    branch = tmp_path / "runner2"
    shutil.copytree(first, branch, ignore=shutil.ignore_patterns(".odf"))
    (branch / "datasets" / "b.yaml").write_text(info_manifest("beta", "edited"), encoding="utf-8")
    code, out, err = run_main_split("apply", "--auto-approve", "--env", "pr-7", "--project", str(branch))
    assert code == 0, out + err
    assert production_keys(store) == before
    assert sum(k.startswith("datasets/beta/blocks/") for k in environment_store(store, "pr-7").list()) == 1

    fresh = tmp_path / "runner3"
    shutil.copytree(branch, fresh, ignore=shutil.ignore_patterns(".odf"))
    code, out, _ = run_main_split("plan", "--detailed-exitcode", "--env", "pr-7", "--project", str(fresh))
    assert code == 0, out  # the environment, checked out from the store, already has the edit
    code, out, _ = run_main_split("plan", "--detailed-exitcode", "--project", str(fresh))
    assert code == 2, out  # production does not
    code, out, _ = run_main_split("publish", "pr-7", "--project", str(fresh))
    assert code == 0, out
    code, out, _ = run_main_split("plan", "--detailed-exitcode", "--project", str(fresh))
    assert code == 0, out


def test_a_commit_sends_its_data_ahead_to_production_but_never_from_an_environment(
    remote: tuple[ObjectStore, str], tmp_path: Path
) -> None:
    """``commit_data`` on a remote workspace's cache puts each described data file at its place in the store
    before the commit to the store (``ObjectAreas.send_data_ahead``), overlapping the upload with the work;
    in an environment, whose datasets fetch from production's prefix, it sends nothing there."""
    from odfproj.storage.data_commit import SliceFile, commit_data
    from odfproj.storage.objects import physical_hash
    from tests.storage.helpers.chains import write_slice

    store, _ = remote
    cache = Workspace(tmp_path / "cache")
    checkout(store, cache)

    def commit_one(dataset_workspace: Workspace, tag: str) -> str:
        dataset = dataset_workspace.open("trips")
        p = dataset.projection()
        start = p.last_offset + 1
        path = write_slice(tmp_path / f"{tag}.parquet", p.arrow_schema, start, 4)
        commit_data(dataset, p, model.AddData(), system_time=datetime.now(UTC), slices=[SliceFile(path, 4)])
        return f"datasets/trips/data/{physical_hash(path).to_multibase()}"

    sent = commit_one(cache, "production")
    assert store.exists(sent)  # there before any commit to the store
    assert read_head(store.child("datasets").child("trips"), "the store")[0] != cache.open("trips").head()

    create_environment(cache, "pr-2")
    env = Workspace(cache.root / "envs" / "pr-2")
    fork(env, ["trips"])
    before = production_keys(store)
    kept = commit_one(env, "environment")
    assert production_keys(store) == before and not store.exists(kept)
