"""Reading and swapping ``refs/head``, the one mutable file of a dataset.

Everything else in a dataset is immutable and content-addressed, so the head reference is the
single point where a commit becomes visible: swapping it with ``os.replace`` is the commit.
"""

from __future__ import annotations

import os
from pathlib import Path

from odfproj.errors import InvalidValueError
from odfproj.odf.multiformats import Multihash
from odfproj.storage.errors import IntegrityError
from odfproj.storage.fsutil import fsync_dir, write_durable


def read_head(path: Path) -> Multihash | None:
    """The hash in a ref file, or ``None`` if there is no such file.

    Read tolerantly (surrounding whitespace, a trailing newline, upper-case hex are accepted) because
    other tools write refs too; anything else is corruption and raises :class:`IntegrityError`.
    """
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        return None
    if not text:
        raise IntegrityError(f"{path}: the head reference is empty")
    try:
        return Multihash.from_multibase(text)
    except InvalidValueError as e:
        raise IntegrityError(f"{path}: the head reference is not a block hash: {e}") from None


def swap_head(path: Path, new_head: Multihash, txid: str) -> None:
    """Point the ref at ``new_head`` atomically and durably.

    Write ``head.tmp-<txid>`` and fsync it, ``os.replace`` it over ``head`` (atomic: readers see the
    old or the new hash, never a partial one), then fsync the directory so the swap survives a power
    loss. The caller holds the dataset lock and has checked the old value (compare-and-swap).
    """
    tmp = path.with_name(f"{path.name}.tmp-{txid}")
    try:
        write_durable(tmp, new_head.to_multibase().encode("ascii"))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
