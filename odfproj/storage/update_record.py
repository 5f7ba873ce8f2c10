"""The record a derivative's last update leaves in its ``info/``: which path computed it, and why.

``transform/coordinator.py`` writes it after every update that ran the query (not after one that had
no new input, which keeps the record of the last one that did), atomically, once the block is
committed: the path taken (``stateless``, ``grouped``, ``grouped over a join``, ``join``, ``full``),
why it was ``full``, the query's mode as the update classified it and the rewrite that would make a
``full`` query incremental. It names the ``SetTransform`` block the update ran under, so a reader
knows whether it still describes the current query.

``plan`` reads it, without the engine and executing nothing, to show an unchanged query's mode as its
last run found it (``# mode: grouped (last run)``); the docs site shows it on the dataset's page. Like
every ``info/`` record it is advisory: missing, unreadable or of another query means "unknown", never
an error. Unlike ``run_results.json`` (one file per workspace, rewritten by every run with only the
datasets that run selected) it is per dataset and kept until the dataset's next update.
"""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from odfproj.odf import model

if TYPE_CHECKING:
    from odfproj.storage.dataset import Dataset
    from odfproj.storage.projection import ChainProjection

__all__ = [
    "UPDATE_RECORD",
    "UpdateRecord",
    "describe_path",
    "read_update_record",
    "transform_block",
    "write_update_record",
]

#: The ``info/`` record of a derivative's last update.
UPDATE_RECORD = "odfproj-update.json"
_FORMAT = 1


@dataclass(frozen=True)
class UpdateRecord:
    """How a derivative's last update that ran its query computed its block."""

    #: The path the update took: ``stateless``, ``grouped``, ``grouped over a join``, ``join`` or ``full``.
    path: str
    #: Why it took the full path (``""`` for another): the construct that makes the query ``full``
    #: (``window function``), or the update's own reason (``it had no data yet``, ``min(v): a group
    #: lost its last row at its minimum ...``).
    why_full: str = ""
    #: The query's mode as the update found it (``grouped``, ``full: window function``): the path its
    #: updates take when nothing of their own forces the full one; ``""`` when not known.
    mode: str = ""
    #: For a ``full`` query: the small rewrite that would make it incremental, or ``""``.
    hint: str = ""
    #: The block of the ``SetTransform`` the update ran under (multibase): the record describes that query.
    transform: str = ""
    #: The block the update committed (multibase).
    head: str = ""
    #: The update's system time (RFC 3339).
    updated_at: str = ""

    def to_bytes(self) -> bytes:
        return (json.dumps({"format": _FORMAT, **asdict(self)}, indent=2) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes | None) -> UpdateRecord | None:
        """The record, or ``None`` for a missing, unreadable or unknown one."""
        if data is None:
            return None
        try:
            value: Any = json.loads(data)
        except ValueError:
            return None
        if (
            not isinstance(value, dict)
            or value.get("format") != _FORMAT
            or not isinstance(value.get("path"), str)
        ):
            return None
        fields = {}
        for name in cls.__dataclass_fields__:
            item = value.get(name, "")
            fields[name] = item if isinstance(item, str) else ""
        return cls(**fields)

    def describe(self) -> str:
        """The record in the words ``run`` prints (:func:`describe_path`)."""
        return describe_path(self.path, self.why_full, self.mode, self.hint)

    @property
    def last_mode(self) -> str:
        """The query's mode as the update found it, or the path it took when that was not found."""
        if self.mode:
            return self.mode
        return f"full: {self.why_full}" if self.path == "full" and self.why_full else self.path

    def describes(self, projection: ChainProjection) -> bool:
        """Whether the record is of the query ``projection`` holds (its ``SetTransform`` block)."""
        block = transform_block(projection)
        return bool(self.transform) and block is not None and block == self.transform


def describe_path(path: str, why_full: str = "", mode: str = "", hint: str = "") -> str:
    """An update's path in words: ``path: grouped``, ``path: full (window function); hint: ...``, with the
    query's mode when the update took another path (``path: full (it had no data yet); mode: grouped``);
    ``""`` when no query ran."""
    if not path:
        return ""
    text = f"path: {path}" + (f" ({why_full})" if path == "full" and why_full else "")
    if mode and mode != path and not (path == "full" and mode == f"full: {why_full}"):
        text += f"; mode: {mode}"
    if hint:
        text += f"; hint: {hint}"
    return text


def transform_block(projection: ChainProjection) -> str | None:
    """The block (multibase) of the ``SetTransform`` in effect at the projection's head, if any."""
    found = None
    for definition in projection.definition_events:
        if isinstance(definition.event, model.SetTransform):
            found = definition.block_hash
    return found.to_multibase() if found is not None else None


def read_update_record(dataset: Dataset, projection: ChainProjection | None = None) -> UpdateRecord | None:
    """The dataset's record; with ``projection``, only if it is of the query that projection holds."""
    try:
        record = UpdateRecord.from_bytes(dataset.read_info(UPDATE_RECORD))
    except OSError:
        return None
    if record is not None and projection is not None and not record.describes(projection):
        return None
    return record


def write_update_record(dataset: Dataset, record: UpdateRecord) -> None:
    """Replace the dataset's record (atomically); a record that cannot be written only costs the
    information, as for every ``info/`` cache."""
    with suppress(OSError):
        dataset.write_info(UPDATE_RECORD, record.to_bytes())
