"""The manifest of a state a derivative keeps beside its chain (its group state, its join index).

Such a state is derived from the chain and only ever trusted through its manifest: written last and
atomically, it names the files that make the state and *stamps* it with the block it describes and a
fingerprint of what it was built for (the query, the inputs, the layout's format). A reader that finds
the manifest missing, unreadable, of another format or of another fingerprint treats the state as
absent and rebuilds it; one stamped with an older block catches it up. Both kinds of state read and
write their manifest here, so the rule is the same for both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odfproj.errors import InvalidValueError
from odfproj.odf.multiformats import Multihash
from odfproj.storage.fsutil import replace_atomic

__all__ = ["MANIFEST", "Stamped", "read_stamped", "write_stamped"]

#: The manifest's file name in the state's folder.
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Stamped:
    """A manifest that has the expected format and fingerprint: the block it describes and the rest."""

    head: Multihash
    fields: Mapping[str, Any]


def read_stamped(directory: Path, format_version: int, fingerprint: str) -> Stamped | None:
    """The manifest in ``directory`` if it is readable, of ``format_version`` and of ``fingerprint``.

    ``None`` for anything else (no manifest, damaged JSON, no head, another format or fingerprint): the
    caller rebuilds the state. The files it names are the caller's to check.
    """
    try:
        manifest = json.loads((directory / MANIFEST).read_bytes())
        if not isinstance(manifest, dict) or manifest.get("format") != format_version:
            return None
        if manifest.get("fingerprint") != fingerprint:
            return None
        head = Multihash.from_multibase(str(manifest["head"]))
    except (OSError, ValueError, KeyError, TypeError, InvalidValueError):
        return None
    return Stamped(head, manifest)


def write_stamped(
    directory: Path, format_version: int, head: Multihash, fingerprint: str, fields: Mapping[str, Any]
) -> None:
    """Replace the manifest in ``directory`` (atomically) by one stamped ``head`` and ``fingerprint``."""
    manifest = {"format": format_version, "head": head.to_multibase(), "fingerprint": fingerprint, **fields}
    replace_atomic(directory / MANIFEST, json.dumps(manifest, indent=1).encode())
