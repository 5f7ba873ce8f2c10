"""Moving one content-addressed object (a data file, a checkpoint) between stores, checked as it passes.

Used by every move of objects: a sync between a workspace and a repository (``remote.sync``), and a
dataset of a remote workspace's cache fetching an object it reads the first time it is read
(``storage.areas``). An object is checked against its physical hash and size before the destination
sees a byte, and streams through a local scratch file: never held whole in memory, whatever its size.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from odfproj.odf.multiformats import Multihash
from odfproj.storage.errors import RemoteError
from odfproj.storage.fsutil import fsync_dir, new_txid
from odfproj.storage.object_store import ObjectStore
from odfproj.storage.physical_hash import PHYSICAL_HASH_CODEC, physical_hasher

__all__ = ["check_object", "copy_object", "fetch_object", "write_stream"]


def _checked_chunks(
    source: ObjectStore, folder: str, physical: Multihash, size: int | None
) -> Iterator[bytes]:
    """One data file or checkpoint as a stream of pieces, checked against its size (where the caller knows
    it) and physical hash as it passes: a mismatch raises after the last piece (or as soon as the size is
    exceeded), so whoever consumes the stream must not let the bytes count until it is exhausted."""
    key = f"{folder}/{physical.to_multibase()}"
    chunks = source.open_chunks(key)
    if chunks is None:
        raise RemoteError(f"{source}: {key} is missing")
    mismatch = RemoteError(f"{source}: {key} does not match its hash or size (corrupted or tampered)")
    hasher = physical_hasher()
    seen = 0
    for piece in chunks:
        seen += len(piece)
        if size is not None and seen > size:
            chunks.close()  # type: ignore[attr-defined]  # every store's stream is a generator
            raise mismatch
        hasher.update(piece)
        yield piece
    if (size is not None and seen != size) or Multihash(PHYSICAL_HASH_CODEC, hasher.digest()) != physical:
        raise mismatch


def check_object(source: ObjectStore, folder: str, physical: Multihash, size: int) -> None:
    """Read one object through and check it against its physical hash and size; nothing is kept."""
    for _ in _checked_chunks(source, folder, physical, size):
        pass


def copy_object(
    source: ObjectStore, destination: ObjectStore, folder: str, physical: Multihash, size: int
) -> bool:
    """Copy one object unless the destination has it; checked before it is written. True if copied.

    The object streams through a local scratch file: checked in full before the destination sees a
    byte, and never held in memory, whatever its size.
    """
    key = f"{folder}/{physical.to_multibase()}"
    if destination.exists(key):
        return False
    with tempfile.TemporaryDirectory(prefix="odfproj-copy-") as scratch:
        staged = Path(scratch) / "object"
        with staged.open("xb") as out:
            for piece in _checked_chunks(source, folder, physical, size):
                out.write(piece)
        destination.put_file(key, staged)
    return True


def fetch_object(
    source: ObjectStore, folder: str, physical: Multihash, size: int | None, target: Path
) -> None:
    """Stream one object from ``source`` to the local file ``target``, checked before it gets that name.

    Two fetches of one object at once both write the same bytes; the second rename wins harmlessly.
    """
    write_stream(_checked_chunks(source, folder, physical, size), target, durable=True)


def write_stream(chunks: Iterator[bytes], target: Path, *, durable: bool) -> None:
    """Write the pieces into a hidden file beside ``target`` (one write, no scratch copy), renamed into
    place only once the stream ended without an error (a checked stream raises on a mismatch after its
    last piece): a reader of ``target`` never sees a part, and one killed midway leaves only the
    hidden ``.tmp-`` file. ``durable``: fsync the file and the folder (an object; not a cache's record).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.tmp-{new_txid()}")
    try:
        with staged.open("xb") as out:
            for piece in chunks:
                out.write(piece)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(staged, target)
    finally:
        staged.unlink(missing_ok=True)
    if durable:
        fsync_dir(target.parent)
