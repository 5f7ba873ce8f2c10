"""The files odfproj keeps in this user's cache folder, and the one way each is read and written.

Used by the manifest parse cache (``project.parse_cache``), the chain-view cache of ``plan``
(``plan.view_cache``) and the configuration's schema pass (``project.config``). Apart from them so
that loading ``odfproj.yaml`` does not import the renderer (the parse cache's key reads render inputs).

Every file lives under ``$XDG_CACHE_HOME/odfproj`` (``~/.cache`` without it), never in a project or
its workspace, so a pull request cannot plant one. Each is headed by a digest of its body: a corrupt,
truncated or foreign file reads as absent. A cache is only ever an answer already computed by the
same code (``code_fingerprint``), so losing one costs time, never a different answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Collection, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import odfproj

__all__ = [
    "CACHE_ENV",
    "cache_enabled",
    "code_fingerprint",
    "prune",
    "read_checked",
    "user_cache_file",
    "write_checked",
]

#: ``off`` disables every cache of this module's users.
CACHE_ENV = "ODFPROJ_CACHE"


def cache_enabled(items: int, minimum: int) -> bool:
    """Whether a cache of ``items`` pays (``minimum`` or more) and is not turned off with ``CACHE_ENV``."""
    return items >= minimum and os.environ.get(CACHE_ENV, "").strip().lower() not in (
        "off",
        "0",
        "false",
        "no",
    )


def user_cache_file(area: str, folder: Path, suffix: str) -> Path:
    """This user's cache file of ``area`` for ``folder`` (resolved), under ``$XDG_CACHE_HOME/odfproj``.

    Raises ``RuntimeError`` or ``KeyError`` when there is no home folder to keep it in.
    """
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    name = hashlib.blake2b(str(folder).encode(), digest_size=16).hexdigest()
    return Path(home) / "odfproj" / area / f"{name}{suffix}"


def code_fingerprint(subpackages: Sequence[str], libraries: Sequence[str], form: int = 1) -> str:
    """odfproj's version, the cache's ``form`` and the size and mtime of every file of ``subpackages`` and ``libraries``.

    A stat per file (no reading), so it costs well under a millisecond; any edit or reinstall changes it.
    """
    package = Path(odfproj.__file__).parent
    parts = [f"format {form}", f"odfproj {odfproj.__version__}"]
    for folder in subpackages:
        try:
            entries = sorted(os.scandir(package / folder), key=lambda e: e.name)
        except OSError:
            continue
        parts.extend(_stat_line(Path(e.path)) for e in entries if e.is_file())
    for library in libraries:
        spec = find_spec(library)
        parts.append(_stat_line(Path(spec.origin)) if spec and spec.origin else f"{library} none")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=20).hexdigest()


def _stat_line(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path} missing"
    return f"{path} {st.st_size} {st.st_mtime_ns}"


def _digest(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=32).hexdigest().encode()


def read_checked(file: Path) -> bytes | None:
    """The body of a cache file whose first line is its digest; None when absent, corrupt or truncated."""
    try:
        raw = file.read_bytes()
    except OSError:
        return None
    digest, _, body = raw.partition(b"\n")
    return body if digest == _digest(body) else None


def write_checked(file: Path, body: bytes) -> bool:
    """Write ``body`` behind its digest, to a temporary file renamed over ``file`` (a reader never sees
    half a file); False when it cannot be written (read-only home, full disk), which only costs time."""
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_digest(body) + b"\n" + body)
        os.replace(tmp, file)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


def prune(entries: dict[str, Any], keep: Collection[str] | None) -> bool:
    """Drop the entries not in ``keep`` (none when it is None); whether any was dropped."""
    stale = set(entries) - set(keep) if keep is not None else set()
    for key in stale:
        del entries[key]
    return bool(stale)
