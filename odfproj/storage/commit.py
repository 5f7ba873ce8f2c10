"""Atomic commit: data files, checkpoints and blocks become visible together with the new head, or not at all.

The protocol (the caller holds the dataset lock throughout):

1. **Stage.** Every new file is written under ``<dataset>/.staging/<txid>/`` and fsynced. Nothing
   outside the staging folder has changed; a crash here leaves only the staging folder.
2. **Publish objects.** Data files and checkpoints, then blocks oldest first, are renamed to their
   content-addressed names (``data/<hash>``, ``checkpoints/<hash>``, ``blocks/<hash>``) and each
   target folder is fsynced. ``refs/head`` still names the old head, from which none of the new
   objects is reachable: readers cannot see them, and a crash leaves harmless orphans.
   ``os.replace`` over an existing object is fine: the name *is* the content's hash, so the bytes are
   equal (and a corrupted copy gets healed).
3. **Swap the head.** ``refs/head.tmp-<txid>`` is written and fsynced, renamed over ``refs/head``
   (atomic), and ``refs/`` is fsynced. This rename is the commit point: before it the old chain is
   visible, after it the new one, with every object it references already durable.
4. **Clean up.** The staging folder is removed.

A crash at any instant therefore leaves the chain valid at the old or the new head. What it may
leave behind (the staging folder, a ``head.tmp-*``, orphan objects) is removed by
:func:`clean_leftovers` the next time the dataset is opened or written, which only ever deletes
files that are unreachable from the head.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from odfproj.odf.multiformats import Multihash
from odfproj.storage.errors import HeadMovedError
from odfproj.storage.fsutil import copy_durable, fsync_dir, new_txid, remove_tree, write_durable
from odfproj.storage.head import read_head, swap_head
from odfproj.storage.layout import DatasetLayout


@dataclass(frozen=True)
class _Staged:
    staged: Path
    target: Path


class Transaction:
    """One atomic change of a dataset; use as a context manager so a failure discards the staging.

    Objects are published in the order they were staged, so stage data and checkpoints before the
    blocks that reference them, and blocks oldest first.
    """

    def __init__(self, layout: DatasetLayout) -> None:
        self.layout = layout
        self.txid = new_txid()
        self.dir = layout.staging_dir / self.txid
        self._objects: list[_Staged] = []
        self._done = False
        self._published = False

    def __enter__(self) -> Transaction:
        self.dir.mkdir(parents=True)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._done:
            self.abort()

    def stage_copy(self, source: Path, name: str, observe: Callable[[bytes], object] | None = None) -> Path:
        """Copy a caller's file into the staging folder (durably); returns the staged path to check.

        ``observe`` sees the bytes as they are written (see ``fsutil.copy_durable``).
        """
        staged = self.dir / name
        copy_durable(source, staged, observe)
        return staged

    def stage_link(self, source: Path, name: str) -> Path:
        """Stage an immutable object another folder holds, as a hard link: no byte is copied.

        For a publish from a preview environment, whose folder lies in the same workspace. Across
        devices (a link cannot cross them) the object is copied instead.
        """
        staged = self.dir / name
        try:
            os.link(source, staged)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
            copy_durable(source, staged)
        return staged

    def stage_bytes(self, data: bytes, name: str) -> Path:
        staged = self.dir / name
        write_durable(staged, data)
        return staged

    def publish_as(self, staged: Path, target: Path) -> None:
        """Schedule a staged file to be renamed to ``target`` at commit."""
        self._objects.append(_Staged(staged, target))

    def commit(self, *, old_head: Multihash | None, new_head: Multihash) -> None:
        """Steps 2-4 of the protocol. ``old_head`` is re-checked against ``refs/head`` first."""
        current = read_head(self.layout.head_ref)
        if current != old_head:
            # Cannot happen while the caller holds the dataset lock; a last line of defence.
            raise HeadMovedError(
                f"{self.layout.root}: head moved from {old_head} to {current} during the commit"
            )
        touched: dict[Path, None] = {}
        self._published = True
        for obj in self._objects:
            os.replace(obj.staged, obj.target)
            touched[obj.target.parent] = None
        for folder in touched:
            fsync_dir(folder)
        swap_head(self.layout.head_ref, new_head, self.txid)
        self._done = True
        remove_tree(self.dir)

    def abort(self) -> None:
        """Discard the transaction after a failure.

        Before publishing, removing the staging folder undoes everything. Once publishing started
        (an I/O error mid-commit), objects may sit at their final names and the head may or may not
        have moved; deciding what is garbage needs the reachability walk, so the staging folder is
        left as the signal for :func:`clean_leftovers` instead of guessing here.
        """
        self._done = True
        if not self._published:
            remove_tree(self.dir)


# --- recovery -----------------------------------------------------------------------------------------


def find_leftovers(layout: DatasetLayout) -> list[Path]:
    """Traces of interrupted transactions: staging folders, temporary head refs and cache files.

    Cheap (two directory listings), so it runs on every open; the expensive reachability walk of
    :func:`clean_leftovers` happens only when this finds something.
    """
    found: list[Path] = []
    if layout.staging_dir.is_dir():
        found.extend(layout.staging_dir.iterdir())
    if layout.refs_dir.is_dir():
        found.extend(p for p in layout.refs_dir.iterdir() if ".tmp-" in p.name)
    if layout.info_dir.is_dir():
        found.extend(p for p in layout.info_dir.iterdir() if ".tmp-" in p.name)
    return found


def clean_leftovers(
    layout: DatasetLayout,
    leftovers: Iterable[Path],
    reachable: set[str] | None,
    head_block: Path | None,
) -> list[Path]:
    """Remove an interrupted transaction's traces; returns what was deleted. Caller holds the lock.

    ``reachable`` holds the names (hashes) of every block, data file and checkpoint reachable from
    the head; ``None`` means the chain could not be walked, and then no object is deleted at all.
    Objects are deleted only when unreachable *and* not older than the head block: an interrupted
    transaction always started after the head was written, while an older unreferenced file was put
    there by someone else on purpose. The staging folders and temporary refs are removed last, so a
    crash during cleanup leaves them as the signal to clean again.
    """
    removed: list[Path] = []
    if reachable is not None:
        threshold = head_block.stat().st_mtime if head_block is not None and head_block.exists() else None
        for folder in (layout.blocks_dir, layout.data_dir, layout.checkpoints_dir):
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                if path.name in reachable or not path.is_file():
                    continue
                if threshold is not None and path.stat().st_mtime < threshold:
                    continue
                path.unlink(missing_ok=True)
                removed.append(path)
    for path in leftovers:
        if path.is_dir():
            remove_tree(path)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed
