"""What a dataset's last successful ``verify`` proved, kept in its ``info/`` so the next one checks only what is new.

A chain only grows at its head, and a head names its whole chain (every block names its predecessor by
hash), so once a check has verified everything up to head ``H``, the next one need only verify the
blocks after ``H``, provided ``H`` is still an ancestor of the head, and continue the chain's rules
from where they stood at ``H``. The record holds exactly that:

- ``projection``: the chain's state at ``H`` as that check *replayed* it from the Seed (never copied
  from the projection cache): sequence number, system time, last offset, watermark, last checkpoint,
  the current schema, transform and push sources, each input's last consumed block and offset. It is
  what the rules of the next block are checked against;
- ``integrity``: whether that check re-hashed the data files and checkpoints (``--integrity``); a
  check that must re-hash continues only from a record of one that did;
- ``inputs``: for a derivative, each input's head when that check found every consumed input block in
  the input's chain. An input whose chain still contains that head still contains every block
  consumed before it; ``None`` when some input could not be checked (missing, or its chain broken),
  which makes the next check of the consumed blocks a full one.

Like every ``info/`` record it is a cache, not evidence: missing, unreadable, of another format or of
another dataset means a full check. It is written atomically after a check that found nothing wrong,
never after one that found a problem. It is not a trust anchor: whoever can rewrite a dataset's blocks
can rewrite this file too, so ``verify --full`` ignores it (and refreshes it), and a workspace that
others could write must be verified with ``--full`` (docs/design/storage.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from odfproj.errors import InvalidValueError
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multihash
from odfproj.storage.projection import ChainProjection

if TYPE_CHECKING:
    from odfproj.storage.dataset import Dataset

__all__ = ["VERIFY_RECORD", "InputMark", "VerifyRecord", "read_verify_record", "write_verify_record"]

#: The ``info/`` record of a dataset's last successful check.
VERIFY_RECORD = "odfproj-verified.json"
_FORMAT = 1


@dataclass(frozen=True)
class InputMark:
    """An input's head (and its sequence number) when a check found every consumed block in its chain."""

    head: Multihash
    sequence_number: int


@dataclass(frozen=True)
class VerifyRecord:
    """Everything up to ``projection.head`` was verified; what the next check continues from."""

    #: The chain's state at the verified head, replayed by that check.
    projection: ChainProjection
    #: Whether the check re-hashed data files and checkpoints (``--integrity``).
    integrity: bool
    #: Per input of a derivative, its head when the consumed blocks were found in it; ``None`` when
    #: some input could not be checked (the next check of the consumed blocks is a full one).
    inputs: Mapping[DatasetId, InputMark] | None

    @property
    def head(self) -> Multihash:
        return self.projection.head

    def to_bytes(self) -> bytes:
        inputs = (
            None
            if self.inputs is None
            else [
                {
                    "datasetId": i.as_did_str(),
                    "head": m.head.to_multibase(),
                    "sequenceNumber": m.sequence_number,
                }
                for i, m in self.inputs.items()
            ]
        )
        data = {
            "format": _FORMAT,
            "head": self.head.to_multibase(),
            "integrity": self.integrity,
            "inputs": inputs,
            "projection": self.projection.to_data(),
        }
        return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> VerifyRecord:
        """Parse :meth:`to_bytes` output; anything else raises :class:`InvalidValueError`."""
        try:
            value: Any = json.loads(data)
            if not isinstance(value, dict) or value.get("format") != _FORMAT:
                raise InvalidValueError("not a verify record of the current format")
            projection = ChainProjection.from_data(value["projection"])
            if Multihash.from_multibase(value["head"]) != projection.head:
                raise InvalidValueError("its head is not the head of the state it holds")
            integrity = value["integrity"]
            if not isinstance(integrity, bool):
                raise InvalidValueError(f"integrity is {integrity!r}, not a boolean")
            inputs = None if value["inputs"] is None else MappingProxyType(_inputs(value["inputs"]))
        except InvalidValueError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidValueError(f"malformed verify record: {type(e).__name__}: {e}") from None
        return cls(projection, integrity, inputs)


def _inputs(items: Any) -> dict[DatasetId, InputMark]:
    inputs: dict[DatasetId, InputMark] = {}
    for item in items:
        number = item["sequenceNumber"]
        if isinstance(number, bool) or not isinstance(number, int):
            raise InvalidValueError(f"expected an integer, got {number!r}")
        inputs[DatasetId.from_did_str(item["datasetId"])] = InputMark(
            Multihash.from_multibase(item["head"]), number
        )
    return inputs


def read_verify_record(dataset: Dataset) -> tuple[VerifyRecord | None, str]:
    """The dataset's record, or ``None`` and why there is none to use (``""``: never written)."""
    try:
        data = dataset.read_info(VERIFY_RECORD)
    except OSError as e:
        return None, f"its record of the last check cannot be read ({e.strerror})"
    if data is None:
        return None, ""
    try:
        return VerifyRecord.from_bytes(data), ""
    except InvalidValueError as e:
        return None, f"its record of the last check is unreadable ({e})"


def write_verify_record(dataset: Dataset, record: VerifyRecord) -> None:
    """Replace the dataset's record (atomically); one that cannot be written only costs the next check time."""
    with suppress(OSError):
        dataset.write_info(VERIFY_RECORD, record.to_bytes())
