"""The physical hash of a data file or checkpoint: SHA3-256 of its bytes, as a ``sha3-256`` multihash.

Apart from the logical hash (``storage.hashing``, which needs pyarrow and numpy) because moving and
checking an object (``storage.object_copy``) needs only this, and a command that fetches one object
should not load the Arrow stack for it.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, BinaryIO

__all__ = [
    "PHYSICAL_HASH_CODEC",
    "physical_digest",
    "physical_digest_bytes",
    "physical_digest_stream",
    "physical_hasher",
]

#: multicodec ``sha3-256``: the physical hash of a data or checkpoint file.
PHYSICAL_HASH_CODEC = 0x16

_READ_CHUNK = 1 << 20


def physical_digest(path: str | os.PathLike[str]) -> bytes:
    """SHA3-256 of a whole file, read in 1 MiB pieces so that any file size fits in memory."""
    with open(path, "rb", buffering=0) as file:
        return physical_digest_stream(file)


def physical_hasher() -> Any:
    """A fresh hash object of the physical hash (``update`` with bytes, then ``digest``)."""
    return hashlib.sha3_256()


def physical_digest_stream(stream: BinaryIO) -> bytes:
    """SHA3-256 of everything left in a binary stream (e.g. a download in progress)."""
    hasher = physical_hasher()
    buffer = bytearray(_READ_CHUNK)
    view = memoryview(buffer)
    while True:
        count = stream.readinto(buffer)
        if not count:
            return hasher.digest()
        hasher.update(view[:count])


def physical_digest_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """SHA3-256 of bytes already in memory; equal to :func:`physical_digest` of a file holding them."""
    return hashlib.sha3_256(data).digest()
