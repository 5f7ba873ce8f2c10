"""Derived records moved between a cache and a folder store: content first, manifest last, newer local kept."""

from __future__ import annotations

from pathlib import Path

from odfproj.storage.derived_sync import bring_down, send_up, send_up_all
from odfproj.storage.object_store import FolderStore


def _record(directory: Path, version: str, parts: dict[str, bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in parts.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    (directory / "manifest.json").write_text(f'{{"version": "{version}", "parts": {sorted(parts)!r}}}')


def test_a_record_goes_up_and_comes_down_on_another_runner(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "store")
    mine = tmp_path / "a" / "info" / "state-index"
    _record(mine, "1", {"keys-0-aa.arrow": b"k1", "v-1/part-0.parquet": b"p1"})
    (mine / ".lock").write_bytes(b"")
    (mine / ".work-9").mkdir()
    (mine / ".work-9" / "spill").write_bytes(b"private")
    (mine / "keys-0-bb.arrow.tmp-77").write_bytes(b"half")
    assert send_up(mine, store)
    assert sorted(store.list()) == ["keys-0-aa.arrow", "manifest.json", "v-1/part-0.parquet"]
    assert not send_up(mine, store)  # unchanged since: no request

    theirs = tmp_path / "b" / "info" / "state-index"
    assert bring_down(store, theirs)
    assert (theirs / "manifest.json").read_bytes() == (mine / "manifest.json").read_bytes()
    assert (theirs / "v-1" / "part-0.parquet").read_bytes() == b"p1"
    assert not bring_down(store, theirs)  # the same manifest: nothing moves


def test_a_newer_local_record_is_never_overwritten_and_retired_files_leave_the_store(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "store")
    mine = tmp_path / "a" / "info" / "group-state"
    _record(mine, "1", {"v-1/part-0.parquet": b"old"})
    send_up(mine, store)
    # A newer version written here (the old one retired), not yet sent up: the store's older copy
    # must not replace it.
    (mine / "v-1" / "part-0.parquet").unlink()
    (mine / "v-1").rmdir()
    _record(mine, "2", {"v-2/part-0.parquet": b"new"})
    assert not bring_down(store, mine)
    assert b'"2"' in (mine / "manifest.json").read_bytes()
    assert send_up_all(mine.parent, FolderStore(tmp_path / "store-root")) == 1
    assert send_up(mine, store) is False  # already sent (the marker is per folder, not per store)
    other = FolderStore(tmp_path / "store2")
    (mine.parent / ".synced-group-state").unlink()
    assert send_up(mine, other)
    assert sorted(other.list()) == ["manifest.json", "v-2/part-0.parquet"]


def test_the_store_removes_what_a_record_no_longer_has(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "store")
    mine = tmp_path / "info" / "compacted"
    _record(mine, "1", {"part-0-1-aa.parquet": b"a"})
    send_up(mine, store)
    (mine / "part-0-1-aa.parquet").unlink()
    _record(mine, "2", {"part-0-2-bb.parquet": b"b"})
    assert send_up(mine, store)
    assert sorted(store.list()) == ["manifest.json", "part-0-2-bb.parquet"]


def test_nothing_in_the_store_leaves_the_cache_alone(tmp_path: Path) -> None:
    assert not bring_down(FolderStore(tmp_path / "empty"), tmp_path / "info" / "state-index")
    assert not (tmp_path / "info").exists()


def test_a_record_costing_more_than_the_catch_up_stays_here_until_the_data_outgrows_it(
    tmp_path: Path,
) -> None:
    """A big record rewritten by a small update is not sent on every commit: a reader catches the
    store's copy up by reading the data added since it, which costs less, until that data outweighs it."""
    store = FolderStore(tmp_path / "store")
    mine = tmp_path / "info" / "state-index"
    _record(mine, "1", {"keys-0-aa.arrow": b"k" * 1000})
    (mine / "manifest.json").write_text('{"head": "f1620aa", "parts": 1}')
    lags: list[str] = []

    def lag(head: str) -> int:
        lags.append(head)
        return 10

    assert send_up(mine, store, lag)  # the store has no record yet: always sent
    assert lags == []
    (mine / "keys-0-aa.arrow").unlink()
    _record(mine, "2", {"keys-0-bb.arrow": b"k" * 1000})
    (mine / "manifest.json").write_text('{"head": "f1620bb", "parts": 1}')
    assert not send_up(mine, store, lag)  # 1,000 bytes to send; catching up reads 10
    assert lags == ["f1620aa"] and b"f1620aa" in store.get("manifest.json")
    assert send_up(mine, store, lambda head: 5000)  # the data since outweighs the record: sent
    assert b"f1620bb" in store.get("manifest.json") and store.list() == ["keys-0-bb.arrow", "manifest.json"]
