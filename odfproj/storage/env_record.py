"""Preview environments' record (``env.json``): a workspace laid over production's, holding only what a change wrote.

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
workspace, and production's folders are only ever read areas. :mod:`odfproj.storage.environment`
creates, forks, refreshes and destroys environments; :mod:`odfproj.storage.publish` is the one place
production changes, by fast-forwarding heads to the environment's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from odfproj.errors import InvalidValueError, StorageError
from odfproj.odf.multiformats import Multihash
from odfproj.odf.timestamps import format_rfc3339, parse_rfc3339
from odfproj.storage.fsutil import replace_atomic
from odfproj.workspace_paths import ENVS_DIR

__all__ = [
    "RECORD_FILE",
    "EnvironmentRecord",
    "Pin",
    "PreviewEnvironmentError",
    "list_environments",
    "read_record",
    "write_record",
]

RECORD_FILE = "env.json"
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
