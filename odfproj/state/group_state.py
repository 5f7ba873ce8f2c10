"""A grouped derivative's per-group aggregate state on disk, stamped with the head block it describes.

::

    info/group-state/
        manifest.json           the only file replaced in place: format, head, fingerprint, version, files
        v-<txid>/part-*.parquet the groups (keys, row count, partial aggregates), written by Spark

The state is a cache of what the derivative's inputs, as its head consumed them, hold per group
(:mod:`odfproj.transform.incremental.grouped`). It is trusted only when its manifest names the dataset's current
head and the same ``fingerprint`` (the query and the split's format), and every file it lists is there
with its size. Anything else (missing, behind the head after a crash between a commit and the state's
write, another query, damage) reads as ``None`` and the caller rebuilds it from the inputs: a stale
state can cost a full pass, never a wrong answer. A new version is written beside the old one, then
the manifest is replaced atomically, then older versions are removed: a reader sees one or the other.
Writers are serialised by the workspace lock (``odfproj run`` holds it), and each save removes
whatever its manifest does not name, so a writer killed mid-way leaves nothing the next save keeps.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from odfproj.engine.exchange import exchange_of
from odfproj.engine.spark import is_spark_error
from odfproj.odf.multiformats import Multihash
from odfproj.state.leftovers import remove_leftovers
from odfproj.state.stamped import MANIFEST, read_stamped, write_stamped
from odfproj.storage.dataset import Dataset
from odfproj.storage.fsutil import new_txid

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["GROUP_STATE_DIR", "load_group_state", "save_group_state"]

GROUP_STATE_DIR = "group-state"
#: Bumped whenever the stored columns' meaning changes; other formats are rebuilt.
FORMAT = 1


def group_state_directory(dataset: Dataset) -> Path:
    return dataset.derived_dir(GROUP_STATE_DIR)


def _files(version: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(version.glob("*.parquet"))}


def load_group_state(session: SparkSession, dataset: Dataset, fingerprint: str) -> DataFrame | None:
    """The stored groups if they describe ``dataset``'s current head under ``fingerprint``, else ``None``."""
    directory = group_state_directory(dataset)
    stamped = read_stamped(directory, FORMAT, fingerprint)
    if stamped is None or stamped.head != dataset.head():
        return None
    try:
        version = directory / str(stamped.fields["version"])
        if version.parent != directory or not version.is_dir():
            return None
        files = stamped.fields.get("files")
        if not isinstance(files, dict) or not files or _files(version) != files:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    exchange = exchange_of(session)  # a copy in the store for executors that cannot see this disk
    return session.read.parquet(*(exchange.reads_at(version / name) for name in files))


def save_group_state(frame: DataFrame, dataset: Dataset, head: Multihash, fingerprint: str) -> None:
    """Write ``frame`` (every group) as the state at ``head``; earlier versions are removed after.

    Best effort, like the state index: the commit it follows is already durable, and a state that
    was not written is found stale by its stamp and rebuilt. One file: the state is O(groups).
    """
    directory = group_state_directory(dataset)
    name = f"v-{new_txid()}"
    version = directory / name
    try:
        directory.mkdir(parents=True, exist_ok=True)
        exchange = exchange_of(frame.sparkSession)
        frame.coalesce(1).write.parquet(exchange.writes_at(version))
        exchange.take(version)
        write_stamped(directory, FORMAT, head, fingerprint, {"version": name, "files": _files(version)})
    except Exception as e:
        shutil.rmtree(version, ignore_errors=True)
        if isinstance(e, OSError) or is_spark_error(e):
            return
        raise
    remove_leftovers(directory, (MANIFEST, name))  # older versions, and what killed writers left
