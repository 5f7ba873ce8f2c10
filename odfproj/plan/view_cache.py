"""Remember each dataset's ``ChainView`` by its head, so planning an unchanged workspace reads one file per chain.

Building a view reads the head, the projection cache (JSON, parsed into model events), the apply record
and the update record: about a third of a millisecond per dataset, a third of a second per thousand.
A view is a function of the chain at its head and of those two ``info/`` records, so it is remembered
under a stamp of the size, mtime and inode of the head reference and of the records; a stamp that differs
in any way (a commit, an apply, a run, a restore from backup) builds the view again. A commit replaces
``refs/head`` with a new file (``storage.head.swap_head``), so its inode and mtime change even when the
new hash is as long as the old. Reading a stamp is three ``stat`` calls, no file opened.

The cache is this user's (``$XDG_CACHE_HOME/odfproj/plan/``, one file per workspace folder), never the
workspace's: planning writes nothing into the workspace. It is a pickle, headed by a digest of its body,
read by an unpickler that builds nothing but odfproj's dataclasses and enums and a few value types (no
function is ever called), so a corrupt or foreign file is ignored. Workspaces of fewer than
``MIN_DATASETS`` datasets are not cached. ``ODFPROJ_CACHE=off`` turns it off, as the parse cache.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import os
import pickle
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odfproj.plan.apply_record import APPLY_RECORD
from odfproj.plan.diff import ChainView
from odfproj.project.user_cache import (
    cache_enabled,
    code_fingerprint,
    prune,
    read_checked,
    user_cache_file,
    write_checked,
)
from odfproj.storage.dataset import Dataset
from odfproj.storage.update_record import UPDATE_RECORD

__all__ = ["MIN_DATASETS", "ViewCache"]

#: Smaller workspaces are read fast enough without it.
MIN_DATASETS = 20
#: The code a view is built by.
_CODE = ("odf", "plan", "storage", "ingest")
#: Value types a view holds besides odfproj's own dataclasses and enums.
_VALUE_TYPES = {("datetime", "datetime"), ("datetime", "timezone"), ("datetime", "timedelta")}

Stamp = tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None]


class _ViewUnpickler(pickle.Unpickler):
    """Builds only odfproj's dataclasses and enums and ``datetime`` values: nothing else can be named."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _VALUE_TYPES:
            return super().find_class(module, name)
        if module.startswith("odfproj."):
            found = super().find_class(module, name)
            if isinstance(found, type) and (dataclasses.is_dataclass(found) or issubclass(found, enum.Enum)):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a view cache")


def _file_stamp(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass
class ViewCache:
    """The views of one workspace's datasets by lower-case name; does nothing when ``enabled`` is false."""

    file: Path
    enabled: bool
    code: str = ""
    entries: dict[str, tuple[Stamp, ChainView]] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def open(cls, root: Path, datasets: int) -> ViewCache:
        """The cache of the workspace at ``root`` holding ``datasets`` datasets; empty if absent or unusable."""
        if not cache_enabled(datasets, MIN_DATASETS):
            return cls(Path(), False)
        try:
            file = user_cache_file("plan", root.resolve(), ".pickle")
        except (RuntimeError, KeyError):
            return cls(Path(), False)
        cache = cls(file, True, code_fingerprint(_CODE, ()))
        cache.entries = cache._read()
        return cache

    def _read(self) -> dict[str, tuple[Stamp, ChainView]]:
        body = read_checked(self.file)
        if body is None:
            return {}
        try:
            code, entries = _ViewUnpickler(io.BytesIO(body)).load()
        except Exception:  # any unpickling failure of a cache file means: build the views again
            return {}
        return entries if code == self.code and isinstance(entries, dict) else {}

    def stamp(self, dataset: Dataset) -> Stamp | None:
        """What the dataset's view depends on, as cheaply as it can be read; None when unreadable."""
        head = _file_stamp(str(dataset.layout.head_ref))
        if head is None:
            return None
        if dataset.objects.read:  # an environment's dataset: its records may be production's (read_info)
            return (
                head,
                _file_stamp(str(dataset.info_path(APPLY_RECORD))),
                _file_stamp(str(dataset.info_path(UPDATE_RECORD))),
            )
        info = str(dataset.layout.info_dir)  # strings: a thousand datasets, six thousand fewer Path objects
        return (
            head,
            _file_stamp(os.path.join(info, APPLY_RECORD)),
            _file_stamp(os.path.join(info, UPDATE_RECORD)),
        )

    def get(self, key: str, stamp: Stamp | None) -> ChainView | None:
        entry = self.entries.get(key)
        if not self.enabled or stamp is None or entry is None or entry[0] != stamp:
            return None
        return entry[1]

    def put(self, key: str, stamp: Stamp | None, view: ChainView) -> None:
        if not self.enabled or stamp is None:
            return
        self.entries[key] = (stamp, view)
        self.changed = True

    def save(self, keep: Collection[str] | None = None) -> None:
        """Write the cache if anything changed, keeping only ``keep`` (lower-case names; all when None)."""
        if not self.enabled or not (prune(self.entries, keep) or self.changed):
            return
        try:
            body = pickle.dumps((self.code, self.entries), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return  # a view that cannot be kept: planning reads it from the chain next time too
        self.changed = not write_checked(self.file, body)
