"""The content files of a stored state index as its manifest names them (see :mod:`odfproj.state.persistence`).

Apart so that :class:`odfproj.state.index.StateIndex` can remember which files are already stored
without depending on the module that writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from odfproj.state.errors import CorruptIndexError

__all__ = ["MANIFEST", "StoredFile"]

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
