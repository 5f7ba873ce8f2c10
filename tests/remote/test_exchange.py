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
