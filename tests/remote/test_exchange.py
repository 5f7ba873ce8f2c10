"""The hand-over between the driver and executors on other hosts (``engine.exchange``), without a JVM.

Against a folder store (a shared mount) and moto's S3 server: what the driver gives Spark goes up once
(again when it changed), what Spark wrote comes down with its relative paths and leaves the store, a
name Spark reports maps back to the driver's file, and nothing is left once the process is done.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.engine.exchange import (
    EXCHANGE_CONF,
    EXCHANGE_FOLDER,
    Exchange,
    driver_spelling,
    exchange_of,
    local_of_any,
)
from odfproj.storage.object_store import TRANSFERS, FolderStore, ObjectStore, open_store


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "s3":
        return open_store(request.getfixturevalue("bucket")).child(EXCHANGE_FOLDER).child("token")
    return FolderStore(tmp_path / "shared" / EXCHANGE_FOLDER / "token")


class _Conf:
    """A session's ``conf`` as ``exchange_of`` reads it."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Session:
    def __init__(self, **conf: str) -> None:
        self.conf = _Conf(conf)


def test_a_file_given_to_spark_goes_up_once_and_maps_back(store: ObjectStore, tmp_path: Path) -> None:
    exchange = Exchange(store)
    given = tmp_path / "driver" / "in put.csv"
    given.parent.mkdir()
    given.write_text("id,city\n1,Oslo\n")
    uri = exchange.reads_at(given)
    assert uri != str(given) and uri.endswith("in put.csv")
    key = str(given).lstrip("/")
    assert store.get(key) == given.read_bytes()
    assert exchange.local_of(uri) == str(given)
    assert exchange.local_of(uri.replace(" ", "%20")) == str(given)  # as Spark's input_file_name spells it
    assert exchange.local_of("s3a://elsewhere/x.csv") is None

    before = TRANSFERS.now()
    assert exchange.reads_at(given) == uri  # read twice (a probe, then the read): one upload
    if not isinstance(store, FolderStore):
        assert (TRANSFERS.now() - before).bytes_out == 0
    given.write_text("id,city\n2,Lima\n")  # a watched input changed between two runs
    exchange.reads_at(given)
    assert store.get(key) == b"id,city\n2,Lima\n"

    exchange.drop(given)
    assert store.list() == []


def test_a_folder_given_to_spark_keeps_its_layout_without_hidden_files(
    store: ObjectStore, tmp_path: Path
) -> None:
    exchange = Exchange(store)
    run = tmp_path / "index" / "r-1"
    (run / "bucket=3").mkdir(parents=True)
    (run / "bucket=3" / "part-0.parquet").write_bytes(b"rows")
    (run / "bucket=3" / ".part-0.parquet.crc").write_bytes(b"crc")
    uri = exchange.reads_at(run)
    assert uri.endswith("index/r-1")
    assert store.list() == [f"{str(run).lstrip('/')}/bucket=3/part-0.parquet"]


def test_what_spark_wrote_comes_down_and_leaves_the_store(store: ObjectStore, tmp_path: Path) -> None:
    exchange = Exchange(store)
    out = tmp_path / "slices" / "out"
    at = exchange.writes_at(out)
    assert at.endswith(str(out))
    base = str(out).lstrip("/")
    written = {
        "__odfproj_file=0/part-0.parquet": b"a" * 10,
        "__odfproj_file=1/part-1.parquet": b"b",
        "_SUCCESS": b"",
    }
    for name, data in written.items():
        store.put(f"{base}/{name}", data)
    exchange.take(out)
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == written
    assert store.list() == []


def test_a_session_names_its_exchange_and_every_process_has_its_own_prefix(tmp_path: Path) -> None:
    assert exchange_of(_Session()).is_local
    local = exchange_of(_Session())
    assert local.writes_at(tmp_path / "x") == str(tmp_path / "x") and local.reads_at(tmp_path) == str(
        tmp_path
    )
    url = f"file://{tmp_path / 'ws'}/{EXCHANGE_FOLDER}"
    exchange = exchange_of(_Session(**{EXCHANGE_CONF: url}))
    assert exchange is exchange_of(_Session(**{EXCHANGE_CONF: url}))  # one per store in a process
    assert isinstance(exchange.store, FolderStore)
    assert exchange.store.root.parent == tmp_path / "ws" / EXCHANGE_FOLDER  # under a token of its own
    given = tmp_path / "given.csv"
    given.write_text("x\n")
    uri = exchange.reads_at(given)
    assert local_of_any(f"file:{uri}") == str(given)
    exchange.clear()
    assert exchange.store.list() == []


def test_a_message_about_a_handed_over_file_names_the_drivers_file(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'ws2'}/{EXCHANGE_FOLDER}"
    exchange = exchange_of(_Session(**{EXCHANGE_CONF: url}))
    given = tmp_path / "data" / "rows.csv"
    given.parent.mkdir()
    given.write_text("id\nx\n")
    uri = exchange.reads_at(given)
    message = f"cannot read {uri}: Malformed CSV record"
    assert driver_spelling(message) == f"cannot read {given}: Malformed CSV record"
    assert driver_spelling("cannot read s3a://other/x.csv") == "cannot read s3a://other/x.csv"


def test_a_slice_spark_wrote_into_the_store_moves_to_its_place_there_not_through_the_driver(
    store: ObjectStore, tmp_path: Path
) -> None:
    """The driver takes a slice down to describe it; at the commit its copy in the store is moved to
    ``data/<hash>`` (``ObjectAreas.send_data_ahead``), so the new bytes cross the driver once."""
    from odfproj.storage.areas import ObjectAreas, ObjectOrigin
    from odfproj.storage.layout import DatasetLayout
    from odfproj.storage.objects import physical_hash

    exchange = Exchange(store)
    out = tmp_path / "slices" / "out"
    base = str(out).lstrip("/")
    store.put(f"{base}/part-0.parquet", b"slice bytes")  # as Spark's task writes it
    store.put(f"{base}/_SUCCESS", b"")
    taken = exchange.take(out, keep=True)
    assert set(taken) == {out / "part-0.parquet", out / "_SUCCESS"} and len(store.list()) == 2
    named = tmp_path / "slices" / "slice-0.parquet"
    (out / "part-0.parquet").replace(named)  # engine.slices names its files: a rename keeps the copy
    exchange.remember_copy(named, taken.pop(out / "part-0.parquet"))
    exchange.release(taken.values())
    assert store.list() == [f"{base}/part-0.parquet"]

    dataset = _workspace_store(store).child("datasets").child("trips")
    areas = ObjectAreas(
        DatasetLayout(tmp_path / "cache" / "trips"),
        origin=ObjectOrigin(dataset, DatasetLayout(tmp_path / "cache" / "trips")),
    )
    physical = physical_hash(named)
    before = TRANSFERS.now()
    assert areas.send_data_ahead(named, physical)
    if not isinstance(store, FolderStore):
        assert (TRANSFERS.now() - before).bytes_out == 0  # a request, no upload
    assert dataset.get(f"data/{physical.to_multibase()}") == b"slice bytes"
    assert store.list() == []  # the copy left the exchange
    before = TRANSFERS.now()
    assert areas.send_data_ahead(named, physical)  # again: there already, nothing moves
    assert (TRANSFERS.now() - before).bytes_out == 0 and store.list() == []


def test_a_taken_file_changed_since_is_sent_as_any_other(store: ObjectStore, tmp_path: Path) -> None:
    from odfproj.storage.areas import ObjectAreas, ObjectOrigin
    from odfproj.storage.layout import DatasetLayout
    from odfproj.storage.objects import physical_hash

    exchange = Exchange(store)
    out = tmp_path / "out"
    key = f"{str(out).lstrip('/')}/part-0.parquet"
    store.put(key, b"as Spark wrote it")
    (path,) = exchange.take(out, keep=True)
    exchange.remember_copy(path, key)
    path.write_bytes(b"rewritten since")  # not the bytes in the store any more
    dataset = _workspace_store(store).child("datasets").child("trips")
    areas = ObjectAreas(
        DatasetLayout(tmp_path / "c"), origin=ObjectOrigin(dataset, DatasetLayout(tmp_path / "c"))
    )
    physical = physical_hash(path)
    assert areas.send_data_ahead(path, physical)
    assert dataset.list() == [f"data/{physical.to_multibase()}"]
    assert dataset.get(f"data/{physical.to_multibase()}") == b"rewritten since"  # its own bytes, sent


def _workspace_store(exchange_store: ObjectStore) -> ObjectStore:
    """The workspace's store an exchange prefix (``<workspace>/.exchange/token``) lies in."""
    if isinstance(exchange_store, FolderStore):
        return FolderStore(exchange_store.root.parent.parent)
    return open_store(exchange_store.url.rsplit(f"/{EXCHANGE_FOLDER}/", 1)[0])
