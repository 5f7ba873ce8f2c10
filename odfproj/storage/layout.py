"""Where everything of a dataset lives on disk: the ODF reference layout plus two private entries.

::

    <workspace>/datasets/<name>/
        blocks/<block hash>          metadata blocks, the exact manifest bytes, named by their hash
        refs/head                    the head block's hash (multibase text)
        data/<physical hash>         data slices (Parquet), content-addressed
        checkpoints/<physical hash>  engine / ingest checkpoints, content-addressed
        info/                        caches derived from the chain (safe to delete)
        .lock                        per-dataset writer lock (private)
        .staging/<txid>/             files of a transaction in progress (private)

All hashes are written as lower-case base16 multibase (``f1620...``), RFC-012's recommendation, so
a file name and the hash in a block compare as plain strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odfproj.errors import InvalidValueError
from odfproj.odf.multiformats import Multihash

#: The reference layout's sub-folders, in the order they are created.
DATASET_DIRS = ("blocks", "refs", "data", "checkpoints", "info")
HEAD_REF = "head"
LOCK_FILE = ".lock"
STAGING_DIR = ".staging"
PROJECTION_CACHE = "projection.json"


@dataclass(frozen=True)
class DatasetLayout:
    """The paths of one dataset folder; pure path arithmetic, no I/O."""

    root: Path

    @property
    def blocks_dir(self) -> Path:
        return self.root / "blocks"

    @property
    def refs_dir(self) -> Path:
        return self.root / "refs"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def info_dir(self) -> Path:
        return self.root / "info"

    @property
    def head_ref(self) -> Path:
        return self.refs_dir / HEAD_REF

    @property
    def lock_file(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def staging_dir(self) -> Path:
        return self.root / STAGING_DIR

    @property
    def projection_cache(self) -> Path:
        return self.info_dir / PROJECTION_CACHE

    def block_path(self, block_hash: Multihash) -> Path:
        return self.blocks_dir / block_hash.to_multibase()

    def data_path(self, physical_hash: Multihash) -> Path:
        return self.data_dir / physical_hash.to_multibase()

    def checkpoint_path(self, physical_hash: Multihash) -> Path:
        return self.checkpoints_dir / physical_hash.to_multibase()


def hash_from_file_name(name: str) -> Multihash | None:
    """The hash a content-addressed file is named by, or ``None`` for a name that is not a hash."""
    try:
        return Multihash.from_multibase(name)
    except InvalidValueError:
        return None
