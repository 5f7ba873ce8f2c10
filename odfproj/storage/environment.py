"""Preview environments: a workspace laid over production's, holding only what a change wrote.

::

    <production>/envs/<name>/
        env.json                      when it was created and refreshed; each dataset's pin (below)
        datasets/<dataset>/refs/head  the environment's head of every dataset it knows
        datasets/<dataset>/blocks|data|checkpoints/   only the objects the environment wrote
        datasets/<dataset>/info/      records derived at the environment's heads
        keys/, .names/                only for datasets created in the environment
        .lock                         the environment's own workspace lock

An environment is itself a workspace (``Workspace(root)`` finds ``env.json`` and becomes the
overlay), so every command that takes a workspace works in one unchanged. Each dataset has a
:class:`Pin`:

- ``pinned``: read from production at the head pinned when the environment was created or last
  refreshed. Its objects are production's, found through the dataset's read area
  (``storage.areas``); it cannot be appended to, so nothing recomputes it.
- ``forked``: its chain forks production's at ``base`` (the fork point): new blocks go on top of it
  into the environment's folder, older objects are read from production's.
- ``created``: a dataset that production does not have, created in the environment.

A command run in an environment never writes production's files: the environment's root is its
workspace, and production's folders are only ever read areas. :mod:`odfproj.storage.publish` is the
one place production changes, by fast-forwarding heads to the environment's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from odfproj.errors import InvalidValueError, StorageError
from odfproj.odf.multiformats import Multihash
from odfproj.odf.timestamps import format_rfc3339, parse_rfc3339
from odfproj.storage.fsutil import fsync_dir, remove_tree, replace_atomic, write_durable
from odfproj.storage.head import read_head
from odfproj.storage.layout import DATASET_DIRS, DatasetLayout

if TYPE_CHECKING:
    from odfproj.storage.workspace import Workspace

__all__ = [
    "DEFAULT_TTL",
    "ENVS_DIR",
    "RECORD_FILE",
    "EnvironmentRecord",
    "Pin",
    "PreviewEnvironmentError",
    "check_environment_name",
    "create_environment",
    "destroy_environment",
    "environment_root",
    "list_environments",
    "production_root",
    "read_record",
    "refresh_environment",
    "write_record",
]

ENVS_DIR = "envs"
RECORD_FILE = "env.json"
#: How long an environment may go without a refresh before ``env list`` calls it stale.
DEFAULT_TTL = timedelta(days=7)
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_FORMAT = 1

PinState = Literal["pinned", "forked", "created"]


class PreviewEnvironmentError(StorageError):
    """An environment that does not exist, is misnamed, or cannot be changed as asked."""


@dataclass(frozen=True)
class Pin:
    """One dataset's place in an environment: how it relates to production's chain.

    ``base``: the pinned head (``pinned``) or the fork point (``forked``); ``None`` for ``created``.
    """

    state: PinState
    base: Multihash | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"state": self.state, "base": self.base.to_multibase() if self.base else None}

    @staticmethod
    def from_json(data: Mapping[str, object]) -> Pin:
        state = data.get("state")
        if state not in ("pinned", "forked", "created"):
            raise InvalidValueError(f"unknown pin state {state!r}")
        base = data.get("base")
        return Pin(state, Multihash.from_multibase(base) if isinstance(base, str) else None)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EnvironmentRecord:
    """What ``env.json`` says: the environment's name, times, and each dataset's pin by name."""

    name: str
    created: datetime
    refreshed: datetime
    datasets: Mapping[str, Pin] = field(default_factory=lambda: MappingProxyType({}))

    def pin(self, name: str) -> Pin | None:
        """The pin of ``name``, compared case-insensitively like dataset names."""
        found = self.datasets.get(name)
        if found is not None:
            return found
        key = name.lower()
        return next((p for n, p in self.datasets.items() if n.lower() == key), None)

    def with_pins(
        self, pins: Mapping[str, Pin | None], *, refreshed: datetime | None = None
    ) -> EnvironmentRecord:
        """This record with the given pins set (``None`` removes a dataset)."""
        merged = {n: p for n, p in self.datasets.items() if n not in pins}
        merged.update({n: p for n, p in pins.items() if p is not None})
        return replace(
            self,
            datasets=MappingProxyType(dict(sorted(merged.items()))),
            refreshed=refreshed if refreshed is not None else self.refreshed,
        )

    def changed(self) -> tuple[str, ...]:
        """The datasets the environment computes itself (forked or created), by name."""
        return tuple(n for n, p in self.datasets.items() if p.state != "pinned")

    def is_stale(self, now: datetime, ttl: timedelta) -> bool:
        return now - self.refreshed > ttl

    def to_bytes(self) -> bytes:
        data = {
            "format": _FORMAT,
            "name": self.name,
            "created": format_rfc3339(self.created),
            "refreshed": format_rfc3339(self.refreshed),
            "datasets": {n: p.to_json() for n, p in self.datasets.items()},
        }
        return (json.dumps(data, indent=2) + "\n").encode("utf-8")

    @staticmethod
    def from_bytes(data: bytes) -> EnvironmentRecord:
        try:
            raw = json.loads(data)
            if raw.get("format") != _FORMAT:
                raise InvalidValueError(f"unknown format {raw.get('format')!r}")
            pins = {str(n): Pin.from_json(p) for n, p in raw["datasets"].items()}
            return EnvironmentRecord(
                name=str(raw["name"]),
                created=parse_rfc3339(raw["created"]),
                refreshed=parse_rfc3339(raw["refreshed"]),
                datasets=MappingProxyType(pins),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InvalidValueError(f"not an environment record: {e}") from None


def check_environment_name(name: str) -> str:
    """``name`` if it can name an environment (lower case, digits, ``.``, ``_``, ``-``; 63 at most)."""
    if not _NAME.match(name):
        raise PreviewEnvironmentError(
            f"{name!r} is not an environment name: use lower-case letters, digits, '.', '_' and '-' "
            "(at most 63, starting with a letter or digit), e.g. pr-123"
        )
    return name


def environment_root(production: Path, name: str) -> Path:
    """The folder of environment ``name`` of the workspace at ``production``."""
    return Path(production) / ENVS_DIR / check_environment_name(name)


def production_root(environment: Path) -> Path:
    """The production workspace an environment's folder lies in."""
    return Path(environment).parent.parent


def read_record(root: Path) -> EnvironmentRecord | None:
    """The record of the environment at ``root``; ``None`` when ``root`` is no environment."""
    path = Path(root) / RECORD_FILE
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return EnvironmentRecord.from_bytes(data)
    except InvalidValueError as e:
        raise PreviewEnvironmentError(f"{path}: {e}") from None


def write_record(root: Path, record: EnvironmentRecord) -> None:
    """Replace ``env.json`` atomically and durably (the caller holds the environment's lock)."""
    replace_atomic(Path(root) / RECORD_FILE, record.to_bytes())


def list_environments(production: Path) -> list[EnvironmentRecord]:
    """Every environment of the workspace at ``production``, by name."""
    folder = Path(production) / ENVS_DIR
    if not folder.is_dir():
        return []
    records = []
    for path in sorted(folder.iterdir()):
        record = read_record(path) if path.is_dir() else None
        if record is not None:
            records.append(record)
    return records


def create_environment(production: Workspace, name: str, *, now: datetime | None = None) -> EnvironmentRecord:
    """Make environment ``name``: every production dataset pinned at its current head, nothing copied.

    The record is written last, so a crash leaves a folder without ``env.json`` that is no
    environment, and a second create finishes it.
    """
    root = environment_root(production.root, name)
    if read_record(root) is not None:
        raise PreviewEnvironmentError(f"environment {name!r} already exists ({root})")
    stamp = now or datetime.now(UTC)
    pins = _pin_production(production, root, names=None)
    record = EnvironmentRecord(name, stamp, stamp).with_pins(pins)
    write_record(root, record)
    return record


def refresh_environment(
    production: Workspace, environment: Workspace, *, now: datetime | None = None
) -> tuple[EnvironmentRecord, tuple[str, ...]]:
    """Re-pin every pinned dataset to production's head now; returns the record and the datasets reset.

    A forked dataset whose fork point is still production's head keeps its blocks. One whose
    production head moved can no longer be published as a fast-forward: its environment chain is
    dropped and it is pinned to production's head again (reset), to be applied and run anew.
    Datasets production gained are pinned; ones it lost are dropped unless the environment
    created them. The caller holds the environment's lock.
    """
    record = _record_of(environment)
    reset: list[str] = []
    pins: dict[str, Pin | None] = {}
    current = set(production.list_datasets())
    for name, pin in record.datasets.items():
        if pin.state == "created":
            continue
        if name not in current:
            remove_tree(environment.datasets_dir / name)
            pins[name] = None
            continue
        head = production.open(name, recover=False).head()
        if pin.state == "forked" and pin.base == head:
            continue
        if pin.state == "forked":
            reset.append(name)
            remove_tree(environment.datasets_dir / name)
    to_pin = [
        n for n in current if record.pin(n) is None or n in reset or record.datasets[n].state == "pinned"
    ]
    pins.update(_pin_production(production, environment.root, names=to_pin))
    updated = record.with_pins(pins, refreshed=now or datetime.now(UTC))
    write_record(environment.root, updated)
    return updated, tuple(sorted(reset))


def destroy_environment(production: Path, name: str) -> None:
    """Remove environment ``name`` and everything in its folder.

    Its folder holds only objects the environment wrote and that nothing else references: objects
    a publish gave production are linked into production's folders, so removing these names leaves
    production's intact.
    """
    root = environment_root(production, name)
    if read_record(root) is None:
        raise PreviewEnvironmentError(f"environment {name!r} does not exist in workspace {production}")
    (root / RECORD_FILE).unlink()  # no longer an environment, even if the removal is interrupted
    fsync_dir(root)
    remove_tree(root)


def fork(environment: Workspace, names: Iterable[str]) -> tuple[str, ...]:
    """Give each pinned dataset of ``names`` a chain of its own, forked at its pinned head.

    Nothing is copied: the fork's head is the pinned head, and its blocks stay production's until
    new ones are appended on top. Returns the datasets forked now. The caller holds the
    environment's lock.
    """
    record = _record_of(environment)
    pins: dict[str, Pin | None] = {}
    for name in names:
        pin = record.pin(name)
        if pin is not None and pin.state == "pinned":
            spelled = next(n for n in record.datasets if n.lower() == name.lower())
            folder = environment.datasets_dir / spelled
            for sub in DATASET_DIRS:  # a pinned dataset's folder holds only its head
                (folder / sub).mkdir(exist_ok=True)
            pins[spelled] = Pin("forked", pin.base)
    if pins:
        write_record(environment.root, record.with_pins(pins))
    return tuple(sorted(pins))


def _record_of(environment: Workspace) -> EnvironmentRecord:
    record = read_record(environment.root)
    if record is None:
        raise PreviewEnvironmentError(f"{environment.root} is not an environment")
    return record


def _pin_production(production: Workspace, root: Path, names: Iterable[str] | None) -> dict[str, Pin]:
    """Write ``refs/head`` in the environment for each production dataset (all when ``names`` is None)."""
    pins: dict[str, Pin] = {}
    for name in production.list_datasets() if names is None else names:
        head = read_head(DatasetLayout(production.datasets_dir / name).head_ref)
        if head is None:
            continue  # deleted meanwhile
        layout = DatasetLayout(root / "datasets" / name)
        layout.refs_dir.mkdir(parents=True, exist_ok=True)
        write_durable(layout.head_ref.with_name("head.tmp-pin"), head.to_multibase().encode("ascii"))
        layout.head_ref.with_name("head.tmp-pin").replace(layout.head_ref)
        pins[name] = Pin("pinned", head)
    return pins
