"""The record apply leaves in a dataset's ``info/``: where apply left the chain.

``run/apply.py`` writes it after each commit; the planner reads it to tell drift (definition events
appended by another tool since) from plain updates. ``info/`` is advisory: a missing or unreadable record
only means "unknown", never an error.
"""

from __future__ import annotations

import json

__all__ = ["APPLY_RECORD", "applied_sequence_number", "apply_record"]

#: The ``info/`` record apply leaves in each dataset it changed; drift is judged against it.
APPLY_RECORD = "odfproj-apply.json"


def apply_record(*, sequence_number: int, head: str, manifest: str | None, applied_at: str) -> bytes:
    """The ``info/`` record apply writes after committing a dataset's definition events."""
    record = {
        "format": 1,
        "sequence_number": sequence_number,
        "head": head,
        "manifest": manifest,
        "applied_at": applied_at,
    }
    return (json.dumps(record, indent=2) + "\n").encode()


def applied_sequence_number(data: bytes | None) -> int | None:
    """The sequence number apply left the chain at; a missing or unreadable record means unknown."""
    if data is None:
        return None
    try:
        value = json.loads(data).get("sequence_number")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value >= 0 else None
