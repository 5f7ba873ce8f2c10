"""push / pull between workspaces and repositories: a folder, S3 (moto server) and HTTP (read only)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfproj.remote.errors import DivergedError
from odfproj.remote.repository import pull, push, repository_datasets
from odfproj.remote.sync import SyncState
from odfproj.storage.errors import ReadOnlyRemoteError, RemoteError
from odfproj.storage.object_store import FolderStore, open_store
from odfproj.storage.verify import verify_dataset, verify_in_workspace
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main
from tests.remote.conftest import add_slices, make_workspace


def _files(dataset_dir: Path) -> dict[str, bytes]:
    """Every block, data file, checkpoint and the head of a dataset folder, by relative path."""
    return {
        p.relative_to(dataset_dir).as_posix(): p.read_bytes()
        for sub in ("blocks", "data", "checkpoints", "refs")
        for p in (dataset_dir / sub).glob("*")
        if not p.name.startswith(".")
    }


def _assert_same_dataset(a: Workspace, b: Workspace, name: str) -> None:
    left, right = a.open(name), b.open(name)
    assert [h for h, _ in left.iter_blocks()] == [h for h, _ in right.iter_blocks()]
    assert _files(left.path) == _files(right.path)
    assert verify_dataset(right, integrity=True) == []
    # The workspace's own checks too: the name record holds the pulled id, and no key is asked for.
    assert verify_in_workspace(b, right) == []
    assert b.is_received(name) and not a.is_received(name)


def _roundtrip(tmp_path: Path, repo_url: str) -> None:
    source = make_workspace(tmp_path / "a")
    repo = open_store(repo_url)
    [pushed] = push(source, [], repo)
    assert pushed.state is SyncState.CREATED and pushed.blocks == 5 and pushed.objects == 6
    assert repository_datasets(repo) == ["trips"]

    target = Workspace(tmp_path / "b")
    [pulled] = pull(target, [], repo)
    assert pulled.state is SyncState.CREATED
    _assert_same_dataset(source, target, "trips")

    # Incremental: nothing moves twice, and only the new slices move after an append.
    assert [o.state for o in push(source, ["trips"], repo)] == [SyncState.UP_TO_DATE]
    add_slices(source.open("trips"), tmp_path / "more", 2)
    [again] = push(source, ["trips"], repo)
    assert (again.state, again.blocks, again.objects) == (SyncState.UPDATED, 2, 4)
    [again] = pull(target, ["trips"], repo)
    assert (again.state, again.blocks, again.objects) == (SyncState.UPDATED, 2, 4)
    _assert_same_dataset(source, target, "trips")


def test_push_and_pull_through_a_folder_reproduce_the_dataset_hash_for_hash(tmp_path: Path) -> None:
    _roundtrip(tmp_path, str(tmp_path / "repo"))
    # The reference layout: <repo>/<name>/{refs/head, blocks/, data/, checkpoints/}
    assert (tmp_path / "repo" / "trips" / "refs" / "head").read_text().startswith("f1620")
    assert _files(tmp_path / "repo" / "trips") == _files(Workspace(tmp_path / "a").open("trips").path)


def test_push_and_pull_through_s3_reproduce_the_dataset_hash_for_hash(tmp_path: Path, bucket: str) -> None:
    _roundtrip(tmp_path, bucket)


@contextlib.contextmanager
def _http_server(folder: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_pull_over_http_reads_a_pushed_folder_by_the_simple_transfer_protocol(tmp_path: Path) -> None:
    source = make_workspace(tmp_path / "a")
    push(source, [], FolderStore(tmp_path / "repo"))
    target = Workspace(tmp_path / "b")
    with _http_server(tmp_path / "repo") as url:
        [pulled] = pull(target, ["trips"], open_store(url))
        assert pulled.state is SyncState.CREATED
        _assert_same_dataset(source, target, "trips")
        with pytest.raises(ReadOnlyRemoteError, match="can only be read"):
            push(source, [], open_store(url))
        with pytest.raises(RemoteError, match="name the datasets"):
            pull(target, [], open_store(url))


def _shared(tmp_path: Path) -> tuple[FolderStore, Workspace, Workspace]:
    """A repository and two workspaces at its head, ``a`` having pushed and ``b`` pulled."""
    repo = FolderStore(tmp_path / "repo")
    a = make_workspace(tmp_path / "a")
    push(a, [], repo)
    b = Workspace(tmp_path / "b")
    pull(b, [], repo)
    return repo, a, b


def test_divergent_histories_are_refused_both_ways(tmp_path: Path) -> None:
    repo, a, b = _shared(tmp_path)
    add_slices(a.open("trips"), tmp_path / "sa", 1)
    add_slices(b.open("trips"), tmp_path / "sb", 1)
    push(a, [], repo)
    head_before = b.open("trips").head()
    with pytest.raises(DivergedError, match="histories diverged"):
        push(b, [], repo)
    with pytest.raises(DivergedError, match="histories diverged"):
        pull(b, [], repo)
    assert b.open("trips").head() == head_before
    assert verify_dataset(b.open("trips"), integrity=True) == []


def test_a_repository_ahead_of_the_workspace_is_not_overwritten(tmp_path: Path) -> None:
    repo, a, b = _shared(tmp_path)
    add_slices(a.open("trips"), tmp_path / "sa", 1)
    push(a, [], repo)
    with pytest.raises(RemoteError, match="pull first"):
        push(b, [], repo)
    # ... and pulling a repository behind the workspace leaves the workspace as it is.
    [outcome] = pull(a, [], FolderStore(tmp_path / "repo"))
    assert outcome.state is SyncState.UP_TO_DATE


@pytest.mark.parametrize("folder", ["blocks", "data", "checkpoints"])
def test_a_flipped_byte_in_the_repository_is_refused_on_pull(tmp_path: Path, folder: str) -> None:
    repo = FolderStore(tmp_path / "repo")
    push(make_workspace(tmp_path / "a"), [], repo)
    victim = sorted((tmp_path / "repo" / "trips" / folder).iterdir())[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    target = Workspace(tmp_path / "b")
    with pytest.raises(RemoteError, match="does not match its hash"):
        pull(target, [], repo)
    assert target.list_datasets() == []  # nothing became visible


_cli = run_main


def test_cli_push_and_pull(tmp_path: Path, bucket: str) -> None:
    make_workspace(tmp_path / "a")
    code, out = _cli("push", "--to", bucket, "--workspace", str(tmp_path / "a"))
    assert (code, out) == (0, "trips: created, 5 block(s) and 6 object(s) copied\n")
    code, out = _cli("pull", "trips", "--from", bucket, "--workspace", str(tmp_path / "b"))
    assert (code, out) == (0, "trips: created, 5 block(s) and 6 object(s) copied\n")
    code, out = _cli("verify", "--integrity", "--workspace", str(tmp_path / "b"))
    # A pulled dataset's private key stays with its creator, and verify knows the dataset was pulled.
    assert (code, out) == (0, "1 dataset verified\n")


def test_cli_unreachable_endpoint_and_wrong_credentials_are_one_line(
    tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_workspace(tmp_path / "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    # moto accepts any key by default; the unreachable endpoint is the failure every server shows.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    code, out = _cli("push", "--to", bucket, "--workspace", str(tmp_path / "a"))
    assert code != 0 and code != 70
    assert out.count("\n") == 1 and bucket in out and "Traceback" not in out, out
