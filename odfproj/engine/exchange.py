"""Where the driver and Spark's tasks hand each other files: the driver's disk, or the workspace's store.

A run hands Spark files the driver made (a root's fetched source files, a Snapshot merge's current
state, a group state or join index kept as a derived record) and takes back files Spark's tasks wrote
(a batch's data slices, a new group state or join index). With executors in the driver's own JVM
(``local[...]``) both sides see one disk and the hand-over is a path. With executors on other hosts (a
standalone cluster, Spark Connect, EMR, Kubernetes) they see no folder of the driver, so for a
workspace on S3 the hand-over goes through the store itself: under ``.exchange/<token>/`` beside the
datasets, where the driver puts what Spark reads and fetches what Spark wrote (streamed, never whole in
memory). The session says which (:data:`EXCHANGE_CONF`, set by ``engine.s3a.with_data_at``, never by
a project): callers ask :func:`exchange_of` and pass the local path they would have used, so the same
code serves both.

The key of a local path in the store is the token and the path itself (``.exchange/<token>/tmp/x.csv``),
so a file name Spark reports (``input_file_name()``) maps back to the driver's file
(:meth:`Exchange.local_of`). Every key under the token is removed when the process ends; one killed
midway leaves its token's keys, which nothing reads again (docs/guide/cluster.md says how to remove
them).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from odfproj.storage import copies_in_store
from odfproj.storage.object_copy import write_stream
from odfproj.storage.object_store import ObjectStore, open_store

__all__ = ["EXCHANGE_CONF", "EXCHANGE_FOLDER", "Exchange", "driver_spelling", "exchange_of", "local_of_any"]

#: The session setting naming the store a run's hand-overs go through (``s3://BUCKET/PREFIX/.exchange``);
#: unset: the driver's disk. Under ``spark.odfproj.``, which a project's ``spark_conf`` may not set.
EXCHANGE_CONF = "spark.odfproj.exchange"
#: The folder under a workspace's location that holds the hand-overs of its runs.
EXCHANGE_FOLDER = ".exchange"


@dataclass(frozen=True)
class Exchange:
    """The hand-over place of one session: ``store`` (this process's own prefix in it) or the local disk."""

    store: ObjectStore | None = None
    #: The files put for Spark, by path, with the size and change time they had: a file read twice (a
    #: probe, then the read) goes up once; one changed since (a watched input) goes up again.
    _given: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_local(self) -> bool:
        return self.store is None

    def _key(self, local: Path) -> str:
        return str(Path(local).absolute()).lstrip("/")

    def _uri(self, key: str) -> str:
        assert self.store is not None
        uri = self.store.spark_uri(key)
        if uri is None:
            raise ValueError(f"{self.store}: Spark cannot open objects of this store")
        return uri

    def _root(self) -> str:
        """The spelling Spark gets of this exchange's files up to the driver's path (ends with ``/``)."""
        return self._uri("").rstrip("/") + "/"

    def reads_at(self, local: Path) -> str:
        """Where Spark opens the driver's file or folder ``local``: the path, or its copy in the store (put
        now: a folder's files keep their relative paths, hidden ones such as Spark's ``.crc`` left out)."""
        if self.store is None:
            return str(Path(local).absolute())
        local = Path(local)
        files = sorted(f for f in local.rglob("*") if f.is_file()) if local.is_dir() else [local]
        for file in files:
            if file.name.startswith(".") and file != local:
                continue
            key = self._key(file)
            stat = file.stat()
            if self._given.get(key) != (stat.st_size, stat.st_mtime_ns):
                self.store.put_file(key, file)
                self._given[key] = (stat.st_size, stat.st_mtime_ns)
        return self._uri(self._key(local))

    def writes_at(self, local: Path) -> str:
        """Where Spark writes the folder the driver then takes into ``local`` (:meth:`take`)."""
        return str(Path(local).absolute()) if self.store is None else self._uri(self._key(local))

    def take(self, local: Path, *, keep: bool = False) -> dict[Path, str]:
        """Bring what Spark wrote at :meth:`writes_at` into the folder ``local`` and remove it from the store.

        Every file under the folder keeps its relative path (a partitioned write's ``k=v/`` folders);
        each streams to disk, never whole in memory. Nothing to do on the local disk.

        ``keep``: the store's copies stay, and the files brought down are returned with their keys. The
        caller remembers those it commits (:meth:`remember_copy`: the commit moves them within the store
        instead of sending them up again) and :meth:`release` the rest.
        """
        if self.store is None:
            return {}
        prefix = self._key(local) + "/"
        taken: dict[Path, str] = {}
        for key in self.store.list(prefix):
            chunks = self.store.open_chunks(key)
            if chunks is not None:
                path = Path(local) / key[len(prefix) :]
                write_stream(chunks, path, durable=False)
                taken[path] = key
            if not keep:
                self.store.delete(key)
        return taken

    def remember_copy(self, path: Path, key: str) -> None:
        """``path`` (a file :meth:`take` brought down, maybe renamed since) still has its bytes at ``key``."""
        assert self.store is not None
        copies_in_store.remember(path, copies_in_store.CopyInStore(self.store, key))

    def release(self, keys: Iterable[str]) -> None:
        """Remove copies :meth:`take` kept that nothing will move."""
        if self.store is not None:
            for key in keys:
                self.store.delete(key)

    def drop(self, local: Path) -> None:
        """Remove the store's copy of ``local`` (a file given to Spark, or a folder Spark wrote)."""
        if self.store is None:
            return
        key = self._key(local)
        found = self.store.list(key + "/")
        if self.store.exists(key):
            found.append(key)
        for each in found:
            self.store.delete(each)
        self._given.pop(key, None)

    def local_of(self, uri: str) -> str | None:
        """The driver's path of a file Spark names by ``uri`` (as :meth:`reads_at` gave it); ``None`` if
        the URI is not one of this exchange's."""
        if self.store is None:
            return None
        root = unquote(self._root())
        text = unquote(uri)
        if text.startswith("file:") and not root.startswith("file:"):
            text = urlsplit(text).path  # a folder store's files, as Spark names them
        return "/" + text[len(root) :] if text.startswith(root) else None

    def clear(self) -> None:
        """Remove everything this process left in the store."""
        if self.store is not None:
            for key in self.store.list():
                self.store.delete(key)
            self._given.clear()


_OPENED: dict[str, Exchange] = {}
_LOCK = threading.Lock()
_LOCAL = Exchange()


def exchange_of(session: object) -> Exchange:
    """The hand-over place of ``session``: its :data:`EXCHANGE_CONF` store (this process's own token in
    it, made once per store and cleared at exit), else the driver's disk."""
    try:
        url = session.conf.get(EXCHANGE_CONF, "") or ""  # type: ignore[attr-defined]
    except Exception:
        url = ""
    url = url.strip()
    if not url:
        return _LOCAL
    with _LOCK:
        found = _OPENED.get(url)
        if found is None:
            found = Exchange(open_store(url.rstrip("/")).child(uuid.uuid4().hex))
            _OPENED[url] = found
            atexit.register(_clear_quietly, found)
        return found


def local_of_any(uri: str) -> str | None:
    """The driver's path of a file Spark names by ``uri`` in any exchange this process opened; ``None``
    if it is none of theirs (a file Spark opened where the driver has it)."""
    for exchange in list(_OPENED.values()):
        found = exchange.local_of(uri)
        if found is not None:
            return found
    return None


def driver_spelling(text: str) -> str:
    """``text`` (a message of Spark's) with every file of an exchange this process opened named by the
    driver's path it is a copy of, so a message about a handed-over file names the file the user knows."""
    for exchange in list(_OPENED.values()):
        if exchange.store is not None:
            text = text.replace(exchange._root(), "/")
    return text


def _clear_quietly(exchange: Exchange) -> None:
    # At exit: a store that cannot be reached keeps the prefix; nothing else is hurt.
    with contextlib.suppress(Exception):
        exchange.clear()
