"""Where a dataset's objects are found: its own folder first, then the folders it reads from.

Blocks, data slices and checkpoints are content-addressed, so an object with a given hash has the
same bytes wherever it is found. That is what lets a dataset of a preview environment (see
``storage.environment``) keep only its new objects in its own folder and read every older one from
production's folder: no copy, and nothing written there. A dataset of an ordinary workspace has no
read areas, and each lookup is the plain path arithmetic of :class:`DatasetLayout`.

This is the disk form of the seam in docs/design/object-areas-and-heads.md (one write area, read
areas after it); an object-store form answers the same three lookups with URLs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odfproj.odf.multiformats import Multihash
from odfproj.storage.layout import DatasetLayout


@dataclass(frozen=True)
class ObjectAreas:
    """The write area of a dataset (its own folder) and the areas its older objects are read from."""

    write: DatasetLayout
    read: tuple[DatasetLayout, ...] = ()

    def block_path(self, block_hash: Multihash) -> Path:
        """Where the block is: the first area holding it, else where it would be written."""
        return self._find(DatasetLayout.block_path, block_hash)

    def data_path(self, physical_hash: Multihash) -> Path:
        return self._find(DatasetLayout.data_path, physical_hash)

    def checkpoint_path(self, physical_hash: Multihash) -> Path:
        return self._find(DatasetLayout.checkpoint_path, physical_hash)

    def is_own(self, path: Path) -> bool:
        """Whether ``path`` lies in the write area (an object a publish has to move)."""
        return path.is_relative_to(self.write.root)

    def _find(self, place: Callable[[DatasetLayout, Multihash], Path], object_hash: Multihash) -> Path:
        own = place(self.write, object_hash)
        if not self.read or own.exists():
            return own  # an ordinary dataset: one folder, no stat
        for area in self.read:
            path = place(area, object_hash)
            if path.exists():
                return path
        return own
