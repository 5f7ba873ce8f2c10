"""Remember each dataset's ``ChainView`` by its head, so planning an unchanged workspace reads one file per chain.

Building a view reads the head, the projection cache (JSON, parsed into model events), the apply record
and the update record: about a third of a millisecond per dataset, a third of a second per thousand.
A view is a function of the chain at its head and of those two ``info/`` records, so it is remembered
under a stamp of the size, mtime and inode of the head reference and of the records; a stamp that differs
in any way (a commit, an apply, a run, a restore from backup) builds the view again. A commit replaces
``refs/head`` with a new file (``storage.head.swap_head``), so its inode and mtime change even when the
new hash is as long as the old. Reading a stamp is three ``stat`` calls, no file opened.

A view's definition events (most of its objects: ten thousand views hold about 56,000) are kept as
their own pickle inside the entry (``StoredEvents``) and unpickled only when something reads them:
the diff of a dataset whose manifest changed. With each view the cache keeps the ``Agreement`` the last
plan found (the digest of the manifest whose definition the chain matched, and its inputs' ids): a
plan whose manifest and chain are both unchanged compares the agreement instead of diffing the events.
A view built again (its stamp changed) starts with no agreement.

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
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from odfproj.plan.apply_record import APPLY_RECORD
from odfproj.plan.diff import Agreement, ChainView
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

__all__ = ["MIN_DATASETS", "Agreements", "StoredEvents", "ViewCache"]

#: Smaller workspaces are read fast enough without it.
MIN_DATASETS = 20
#: The code a view is built by.
_CODE = ("odf", "plan", "storage", "ingest")
#: Value types a view holds besides odfproj's own dataclasses and enums.
_VALUE_TYPES = {("datetime", "datetime"), ("datetime", "timezone"), ("datetime", "timedelta")}

Stamp = tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None]
#: An entry: the stamp the view was built at, the view, and the agreement the last plan found for it.
Entry = tuple[Stamp, ChainView, Agreement | None]


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


@dataclass(eq=False)
class StoredEvents(Sequence[Any]):
    """A cached view's definition events: their pickle, unpickled (by ``_ViewUnpickler``) when first read.

    Compares equal to the same events as a tuple. Pickled as its bytes, so saving the cache again
    does not pickle the events again. The bytes come from the cache file, whose digest was checked.
    """

    pickled: bytes
    _events: tuple[Any, ...] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, events: Sequence[Any]) -> StoredEvents:
        if isinstance(events, StoredEvents):
            return events
        return cls(pickle.dumps(tuple(events), protocol=pickle.HIGHEST_PROTOCOL), tuple(events))

    def events(self) -> tuple[Any, ...]:
        if self._events is None:
            loaded = _ViewUnpickler(io.BytesIO(self.pickled)).load()
            if not isinstance(loaded, tuple):
                raise pickle.UnpicklingError("a view's events are not a tuple")
            self._events = loaded
        return self._events

    def __getstate__(self) -> dict[str, Any]:
        return {"pickled": self.pickled, "_events": None}

    def __repr__(self) -> str:
        return repr(self.events())  # as the tuple it stands for, not its bytes

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self.events()[index]

    def __len__(self) -> int:
        return len(self.events())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.events())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredEvents):
            return self.pickled == other.pickled or self.events() == other.events()
        return isinstance(other, tuple) and self.events() == other

    def __hash__(self) -> int:
        return hash(self.events())


@dataclass
class Agreements:
    """What ``make_plan`` may skip and what it found: ``known`` are the agreements of the views this plan
    read from the cache, ``found`` those its diffs found (by lower-case name)."""

    known: Mapping[str, Agreement]
    found: dict[str, Agreement] = field(default_factory=dict)

    def holds(self, key: str, agreement: Agreement) -> bool:
        return self.known.get(key) == agreement

    def note(self, key: str, agreement: Agreement) -> None:
        self.found[key] = agreement


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
    entries: dict[str, Entry] = field(default_factory=dict)
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

    def _read(self) -> dict[str, Entry]:
        body = read_checked(self.file)
        if body is None:
            return {}
        try:
            code, entries = _ViewUnpickler(io.BytesIO(body)).load()
        except Exception:  # any unpickling failure of a cache file means: build the views again
            return {}
        if code != self.code or not isinstance(entries, dict):
            return {}
        return {k: e for k, e in entries.items() if isinstance(e, tuple) and len(e) == 3}

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

    def agreement(self, key: str) -> Agreement | None:
        """The agreement kept with the view of ``key`` (ask only for a view ``get`` gave)."""
        entry = self.entries.get(key)
        return entry[2] if entry is not None else None

    def put(self, key: str, stamp: Stamp | None, view: ChainView) -> None:
        """Keep a view just built (its events as ``StoredEvents``), with no agreement yet."""
        if not self.enabled or stamp is None:
            return
        try:
            stored = replace(view, definition_events=StoredEvents.of(view.definition_events))
        except (pickle.PicklingError, TypeError, AttributeError):
            return  # events that cannot be kept: planning reads them from the chain next time too
        self.entries[key] = (stamp, stored, None)
        self.changed = True

    def agree(self, agreements: Mapping[str, Agreement]) -> None:
        """Keep the agreements a plan found with the views they were found for."""
        for key, agreement in agreements.items():
            entry = self.entries.get(key)
            if self.enabled and entry is not None and entry[2] != agreement:
                self.entries[key] = (entry[0], entry[1], agreement)
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
