"""Where a dataset's objects are found: its own folder first, then the folders it reads from, then its origin.

Blocks, data slices and checkpoints are content-addressed, so an object with a given hash has the
same bytes wherever it is found. That is what lets a dataset of a preview environment (see
``storage.environment``) keep only its new objects in its own folder and read every older one from
production's folder: no copy, and nothing written there. A dataset of an ordinary workspace has no
read areas, and each lookup is the plain path arithmetic of :class:`DatasetLayout`.

A dataset of a remote workspace's cache (``storage.origin``) also has an *origin*: the dataset's prefix
in the object store. A data file or checkpoint that no folder holds yet is read where it is when that
is possible (a folder store, which this machine opens in place; Spark with the S3A connector, for
:meth:`ObjectAreas.data_uri`), and otherwise fetched from there, checked against its hash, into the
folder that mirrors the store, the first time something asks where it is. So a command reads exactly
the objects it opens, and a second command on the same cache reads none again (blocks are not
fetched here: checking out a remote workspace brings every new block).

This is the disk form of the seam in docs/design/object-areas-and-heads.md (one write area, read
areas after it); an object-store form answers the same three lookups with URLs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odfproj.odf.multiformats import Multihash
from odfproj.storage import copies_in_store
from odfproj.storage.errors import RemoteError
from odfproj.storage.layout import DatasetLayout
from odfproj.storage.object_copy import copy_object, fetch_object
from odfproj.storage.object_store import FolderStore, ObjectStore


@dataclass(frozen=True)
class ObjectOrigin:
    """Where a cached dataset's missing objects come from: its ``store`` prefix (``refs/head``,
    ``data/``, ...), fetched into ``mirror``, the local folder that caches that prefix."""

    store: ObjectStore
    mirror: DatasetLayout


@dataclass(frozen=True)
class ObjectAreas:
    """The write area of a dataset (its own folder), the areas its older objects are read from, and the
    store its objects are fetched from when no area holds them."""

    write: DatasetLayout
    read: tuple[DatasetLayout, ...] = ()
    origin: ObjectOrigin | None = None

    def block_path(self, block_hash: Multihash) -> Path:
        """Where the block is: the first area holding it, else where it would be written."""
        return self._find(DatasetLayout.block_path, block_hash)

    def data_path(self, physical_hash: Multihash, size: int | None = None) -> Path:
        """Where the data file is (fetched from the origin first, if no area holds it); ``size``, which
        the block naming the file records, is checked as well when given."""
        return self._find(DatasetLayout.data_path, physical_hash, ("data", size))

    def checkpoint_path(self, physical_hash: Multihash, size: int | None = None) -> Path:
        return self._find(DatasetLayout.checkpoint_path, physical_hash, ("checkpoints", size))

    def data_uri(self, physical_hash: Multihash, size: int | None = None, *, in_place: bool = False) -> str:
        """Where Spark opens the data file: a folder's copy when one holds it; else, when the reader can
        open the origin's objects in place (``in_place``: a session with the S3A connector), the origin's
        own spelling (``s3a://...``), so nothing passes through this process; else fetched, as
        :meth:`data_path`."""
        found = self.data_held(physical_hash)
        if found is not None:
            return str(found)
        if in_place and self.origin is not None:
            uri = self.origin.store.spark_uri(f"data/{physical_hash.to_multibase()}")
            if uri is not None:
                return uri
        return str(self.data_path(physical_hash, size))

    def data_in_store(self, physical_hash: Multihash, size: int | None) -> str | None:
        """The origin's own spelling of the data file (``s3a://...``), for a reader on another host; ``None``
        without an origin (or one Spark does not open, such as an http store).

        A file only this machine holds (written by this run, its commit to the store still to come) is
        sent to its place in the store first, checked against its hash as it goes: objects go before
        heads in every commit, so an object there early is harmless, and the commit then finds it sent.
        """
        if self.origin is None:
            return None
        key = f"data/{physical_hash.to_multibase()}"
        store = self.origin.store
        uri = store.spark_uri(key)
        if uri is None:
            return None
        held = self.data_held(physical_hash)
        if held is None or store.exists(key):  # not here: the store has it (no request asks)
            return uri
        copy_object(
            FolderStore(held.parent.parent), store, "data", physical_hash, size or held.stat().st_size
        )
        return uri

    def send_data_ahead(self, path: Path, physical_hash: Multihash) -> bool:
        """Put the data file ``path``, just described (``physical_hash`` names its bytes), at its place in
        the origin's store now, ahead of the commit that will name it: a writer overlaps the upload with
        its next file's describing, and the commit to the store then finds the object sent. ``False``
        without an origin (a local workspace), for a dataset of a preview environment (its origin is
        production's prefix, which a command run in an environment never writes), or when the send
        failed: the commit sends it then, and says what went wrong.

        Bytes Spark wrote into the store and this process took down (``storage.copies_in_store``) are
        moved within the store instead: the driver never sends them up again. Objects go before heads in
        every commit, so an object there before its block is harmless (a failed run leaves an orphan).
        """
        if self.origin is None or self.origin.mirror.root != self.write.root:
            return False
        key = f"data/{physical_hash.to_multibase()}"
        store = self.origin.store
        copy = copies_in_store.copy_in_store(path)
        try:
            moved = copy is not None and store.copy_from(copy.store, copy.key, key)
            if not moved and not store.exists(key):
                # The file describe just hashed, in the writer's own folder; one part at a time, as it
                # goes beside the describing of the next file.
                store.put_file(key, path, parts_at_once=1)
        except RemoteError:
            return False  # unreachable, or a copy gone with a failed run's exchange: the commit sends it
        if copy is not None:
            copy.store.delete(copy.key)
            copies_in_store.forget(path)
        return True

    def data_held(self, physical_hash: Multihash) -> Path | None:
        """The data file where this machine opens it without fetching it; ``None`` if only the store has it."""
        return self._held(DatasetLayout.data_path, physical_hash)

    def is_own(self, path: Path) -> bool:
        """Whether ``path`` lies in the write area (an object a publish has to move)."""
        return path.is_relative_to(self.write.root)

    def _held(self, place: Callable[[DatasetLayout, Multihash], Path], object_hash: Multihash) -> Path | None:
        """The object in the first folder holding it: this dataset's, a read area's, or the origin's own
        when this machine opens it in place (a folder store: a shared mount); ``None`` if none does."""
        own = place(self.write, object_hash)
        if own.exists():
            return own
        for area in self.read:
            path = place(area, object_hash)
            if path.exists():
                return path
        if self.origin is not None:
            path = self.origin.store.local_path(f"{own.parent.name}/{object_hash.to_multibase()}")
            if path is not None and path.exists():
                return path
        return None

    def _find(
        self,
        place: Callable[[DatasetLayout, Multihash], Path],
        object_hash: Multihash,
        fetch: tuple[str, int | None] | None = None,
    ) -> Path:
        own = place(self.write, object_hash)
        if not self.read and self.origin is None:
            return own  # an ordinary dataset: one folder, no stat
        found = self._held(place, object_hash)
        if found is not None:
            return found
        if self.origin is not None and fetch is not None:
            target = place(self.origin.mirror, object_hash)
            if not target.exists():
                folder, size = fetch
                fetch_object(self.origin.store, folder, object_hash, size, target)
            return target
        return own
