"""The origin of a remote workspace's cache: the store whose objects the cache fetches as they are read.

A remote workspace (``s3://...``, ``file://...``; docs/guide/remote.md) is worked on through a local
folder that mirrors it. Checking it out brings every block and head but no data file or checkpoint;
the folder records where it came from in ``origin.json``, and every handle on one of its datasets
(also one opened by a command that did not check it out, such as ``query``) reads an object the folder
lacks in the store or fetches it from the dataset's prefix there, the first time it is asked where the
object is (``storage.areas``). Credentials are never recorded: the store is opened with the reader's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from odfproj.storage.fsutil import replace_atomic
from odfproj.storage.object_store import ObjectStore, open_store

__all__ = ["ORIGIN_FILE", "Origin", "read_origin", "write_origin"]

ORIGIN_FILE = "origin.json"
#: Where a remote workspace keeps its datasets, as a workspace folder does.
DATASETS = "datasets"


@dataclass(frozen=True)
class Origin:
    """The store a cache mirrors (opened once per workspace handle, on first use)."""

    url: str
    store: ObjectStore

    def dataset_store(self, name: str) -> ObjectStore:
        """The prefix of dataset ``name`` in the store: ``refs/head``, ``blocks/``, ``data/``, ..."""
        return self.store.child(DATASETS).child(name)


def read_origin(root: Path) -> Origin | None:
    """The origin recorded in the workspace folder ``root``; ``None`` for a workspace of its own."""
    try:
        url = json.loads((root / ORIGIN_FILE).read_bytes())["url"]
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: a cache without an origin fetches nothing, and says "missing"
    return Origin(url, open_store(url))


def write_origin(root: Path, url: str) -> None:
    """Record that the folder ``root`` mirrors the store at ``url`` (a cache, so without an fsync)."""
    root.mkdir(parents=True, exist_ok=True)
    replace_atomic(root / ORIGIN_FILE, json.dumps({"url": url}).encode(), durable=False)
