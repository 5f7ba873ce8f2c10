"""Remember the manifests that loaded cleanly, so an unchanged project is not parsed again (dbt's partial parsing).

Rendering, YAML and JSON Schema validation cost about a millisecond per manifest; on a project of
10,000 manifests that is most of a ``plan``. A manifest that rendered, validated and parsed with no
problem at all is remembered as the plain data of its ``DatasetSnapshot`` (``yaml_codec.to_data``),
under a key made of everything its loading depends on:

* its path in the project and its bytes;
* for a template (a file with Jinja syntax), the render inputs: the vars (odfproj.yaml's with
  ``--var`` on top), the target, every macro file's text and the values of the declared, non-secret
  environment variables ``env_var()`` may read;
* the code that loads it: odfproj's version and the size and modification time of every module of
  ``odfproj/odf`` and ``odfproj/project``, the bundled schemas, and the installed Jinja, PyYAML and
  jsonschema. A cache written by other code is dropped whole.

Manifests with problems (even warnings) are never remembered: they are loaded again, so every
command reports them exactly as before.

Where: ``$XDG_CACHE_HOME/odfproj/parse/`` (``~/.cache`` without it), one file per project folder.
Not in the project or its workspace: ``plan`` and ``validate`` write nothing there, and a pull request
cannot plant a cache file that would make a broken manifest pass. The file holds JSON, never pickles,
headed by a digest of its body: a corrupt, truncated or stale file is ignored (and replaced), and what
it holds is data that ``from_data`` rebuilds strictly (nothing in it is executed). A project of fewer
than ``MIN_MANIFESTS`` manifests loads in a few tens of milliseconds and is not cached at all.
``ODFPROJ_CACHE=off`` turns it off; without a writable cache folder nothing is cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import odfproj
from odfproj.errors import InvalidValueError
from odfproj.odf.model import DatasetSnapshot
from odfproj.odf.yaml_codec import from_data, to_data
from odfproj.project.render import RenderContext, has_jinja

__all__ = [
    "CACHE_ENV",
    "MIN_MANIFESTS",
    "ParseCache",
    "cache_enabled",
    "code_fingerprint",
    "prune",
    "read_checked",
    "user_cache_file",
    "write_checked",
]

#: ``off`` disables the caches of plan and validate (this one and ``plan.view_cache``).
CACHE_ENV = "ODFPROJ_CACHE"
#: Smaller projects load fast enough without it (and leave no file behind).
MIN_MANIFESTS = 100
#: Bumped when the file's layout changes.
FORMAT = 1
#: The code loading depends on: odfproj's sub-packages, and the libraries that render, parse and validate.
_CODE = ("odf", "project", "resources/schemas")
_LIBRARIES = ("jinja2", "yaml", "jsonschema")


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


def code_fingerprint(subpackages: Sequence[str] = _CODE, libraries: Sequence[str] = _LIBRARIES) -> str:
    """odfproj's version and the size and mtime of every file of ``subpackages`` and of ``libraries``.

    A stat per file (no reading), so it costs well under a millisecond; any edit or reinstall changes it.
    """
    package = Path(odfproj.__file__).parent
    parts = [f"format {FORMAT}", f"odfproj {odfproj.__version__}"]
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


def render_fingerprint(context: RenderContext) -> str:
    """Everything a template's rendering reads besides its own text (see ``RenderContext``)."""
    environ = os.environ if context.environ is None else context.environ
    readable = sorted(n for n in context.env.declared if context.env.refusal(n) is None)
    inputs = {
        "vars": dict(context.vars),
        "target": context.target,
        "macros": dict(context.macros),
        "env": {name: environ.get(name) for name in readable},
    }
    text = json.dumps(inputs, sort_keys=True, default=repr)
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


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


@dataclass
class ParseCache:
    """The cache of one project; does nothing when ``enabled`` is false."""

    file: Path
    enabled: bool
    code: str = ""
    render: str = ""
    odf_version: str = ""
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def open(cls, root: Path, context: RenderContext, odf_version: str, manifests: int) -> ParseCache:
        """The cache of the project at ``root`` for ``manifests`` files; empty when absent, corrupt or stale.

        ``odf_version`` (the workspace's) decides how newer ODF forms load, so it is part of every key.
        """
        if not cache_enabled(manifests, MIN_MANIFESTS):
            return cls(Path(), False)
        try:
            file = user_cache_file("parse", root.resolve(), ".json")
        except (RuntimeError, KeyError):  # no home folder to keep it in
            return cls(Path(), False)
        cache = cls(file, True, code_fingerprint(), render_fingerprint(context), odf_version)
        cache.entries = cache._read()
        return cache

    def _read(self) -> dict[str, dict[str, Any]]:
        body = read_checked(self.file)
        try:
            document = json.loads(body) if body is not None else None
        except ValueError:
            return {}
        if not isinstance(document, dict) or document.get("code") != self.code:
            return {}  # written by other code: nothing in it can be trusted to match
        entries = document.get("manifests")
        return entries if isinstance(entries, dict) else {}

    def key_of(self, rel_path: str, data: bytes, text: str) -> str:
        """The key of one manifest's bytes (``text`` is them decoded); render inputs count for templates only."""
        digest = hashlib.blake2b(digest_size=20)
        digest.update(rel_path.encode() + b"\0" + self.odf_version.encode() + b"\0")
        digest.update((self.render if has_jinja(text) else "").encode() + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def get(self, rel_path: str, key: str, source: str) -> tuple[DatasetSnapshot, str] | None:
        """The snapshot and rendered text remembered for ``rel_path`` under ``key``, or None."""
        entry = self.entries.get(rel_path)
        if not self.enabled or not isinstance(entry, dict) or entry.get("key") != key:
            return None
        rendered = entry.get("text", source)
        try:
            snapshot = from_data("DatasetSnapshot", entry.get("snapshot"))
        except (InvalidValueError, ValueError, TypeError, KeyError):
            return None
        if not isinstance(snapshot, DatasetSnapshot) or not isinstance(rendered, str):
            return None
        return snapshot, rendered

    def put(self, rel_path: str, key: str, snapshot: DatasetSnapshot, rendered: str, source: str) -> None:
        """Remember a manifest that loaded with no problem, if its data reads back as the same snapshot."""
        if not self.enabled:
            return
        data = to_data(snapshot)
        try:
            if from_data("DatasetSnapshot", json.loads(json.dumps(data))) != snapshot:
                return
        except (InvalidValueError, ValueError, TypeError):
            return
        entry: dict[str, Any] = {"key": key, "snapshot": data}
        if rendered != source:
            entry["text"] = rendered
        self.entries[rel_path] = entry
        self.changed = True

    def save(self, keep: Collection[str] | None = None) -> None:
        """Write the cache if anything changed, keeping only ``keep`` (all entries when None)."""
        if not self.enabled or not (prune(self.entries, keep) or self.changed):
            return
        body = json.dumps({"code": self.code, "manifests": self.entries}, separators=(",", ":")).encode()
        self.changed = not write_checked(self.file, body)
