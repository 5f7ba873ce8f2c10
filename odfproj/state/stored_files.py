"""The content files of a stored state index as its manifest names them (see :mod:`odfproj.state.persistence`).

Apart so that :class:`odfproj.state.index.StateIndex` can remember which files are already stored
without depending on the module that writes them.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from odfproj.state.errors import CorruptIndexError
from odfproj.storage.fsutil import new_txid, write_durable

__all__ = ["MANIFEST", "StoredFile", "check_content", "read_content", "write_content"]

_CHUNK = 1 << 20

#: The one file of an index folder that is replaced in place; it names every other file.
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class StoredFile:
    """One content file named by the manifest, with what it must measure to be trusted."""

    name: str
    size: int
    crc32: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "size": self.size, "crc32": self.crc32}

    @staticmethod
    def from_json(data: object) -> StoredFile:
        if not isinstance(data, dict):
            raise CorruptIndexError("manifest: a file entry is not an object")
        name, size, crc = data.get("name"), data.get("size"), data.get("crc32")
        if not (isinstance(name, str) and isinstance(size, int) and isinstance(crc, int)):
            raise CorruptIndexError("manifest: a file entry lacks name, size or crc32")
        if "/" in name or name.startswith(".") or name == MANIFEST:
            raise CorruptIndexError(f"manifest: bad file name {name!r}")
        return StoredFile(name, size, crc)


def write_content(directory: Path, stem: str, suffix: str, data: bytes) -> StoredFile:
    """Write ``data`` durably under a name carrying its CRC (temp + fsync + rename)."""
    crc = zlib.crc32(data)
    name = f"{stem}-{crc:08x}{suffix}"
    tmp = directory / f".{name}.tmp-{new_txid()}"
    try:
        write_durable(tmp, data)
        os.replace(tmp, directory / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return StoredFile(name, len(data), crc)


def read_content(directory: Path, stored: StoredFile) -> bytes:
    """The file's bytes, once they match the size and CRC the manifest recorded."""
    try:
        data = (directory / stored.name).read_bytes()
    except OSError as e:
        raise CorruptIndexError(f"{stored.name}: cannot be read: {e}") from None
    if len(data) != stored.size or zlib.crc32(data) != stored.crc32:
        raise CorruptIndexError(f"{stored.name}: size or checksum differs from the manifest")
    return data


def check_content(directory: Path, stored: StoredFile) -> None:
    """Like :func:`read_content`, streaming the file in 1 MiB pieces: proves it without holding it."""
    crc, size = 0, 0
    try:
        with (directory / stored.name).open("rb") as f:
            while chunk := f.read(_CHUNK):
                crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    except OSError as e:
        raise CorruptIndexError(f"{stored.name}: cannot be read: {e}") from None
    if size != stored.size or crc != stored.crc32:
        raise CorruptIndexError(f"{stored.name}: size or checksum differs from the manifest")
