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

With each snapshot it keeps a digest of that plain data (``definition_digest``), which the loaded
manifest carries: ``plan`` remembers, with a chain's view, the digest of the manifest it found the chain
to define exactly, and next time compares the two digests instead of diffing the events
(``plan.view_cache.Agreement``).

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

import hashlib
import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odfproj.errors import InvalidValueError
from odfproj.odf.model import DatasetSnapshot
from odfproj.odf.yaml_codec import from_data, to_data
from odfproj.project.render import RenderContext, has_jinja
from odfproj.project.user_cache import (
    CACHE_ENV,
    cache_enabled,
    code_fingerprint,
    prune,
    read_checked,
    user_cache_file,
    write_checked,
)

__all__ = ["CACHE_ENV", "MIN_MANIFESTS", "CachedManifest", "ParseCache", "definition_digest"]

#: Smaller projects load fast enough without it (and leave no file behind). From here on it spares an
#: unchanged project the pyarrow import (0.1 s) that checking manifests' DDL schemas brings.
MIN_MANIFESTS = 20
#: Bumped when the file's layout changes (2: each entry has its snapshot's ``digest``).
FORMAT = 2
#: The code loading depends on: odfproj's sub-packages, and the libraries that render, parse and validate.
_CODE = ("odf", "project", "resources/schemas")
_LIBRARIES = ("jinja2", "yaml", "jsonschema")


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


def definition_digest(data: Any) -> str:
    """The digest of a snapshot's plain data (``yaml_codec.to_data``): equal digests, equal snapshots."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


@dataclass(frozen=True)
class CachedManifest:
    """What the cache gives back for a manifest: its snapshot, rendered text and definition digest."""

    snapshot: DatasetSnapshot
    rendered: str
    digest: str


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
        cache = cls(
            file, True, code_fingerprint(_CODE, _LIBRARIES, FORMAT), render_fingerprint(context), odf_version
        )
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

    def get(self, rel_path: str, key: str, source: str) -> CachedManifest | None:
        """What is remembered for ``rel_path`` under ``key``, or None."""
        entry = self.entries.get(rel_path)
        if not self.enabled or not isinstance(entry, dict) or entry.get("key") != key:
            return None
        rendered, digest = entry.get("text", source), entry.get("digest")
        try:
            snapshot = from_data("DatasetSnapshot", entry.get("snapshot"))
        except (InvalidValueError, ValueError, TypeError, KeyError):
            return None
        if (
            not isinstance(snapshot, DatasetSnapshot)
            or not isinstance(rendered, str)
            or not isinstance(digest, str)
        ):
            return None
        return CachedManifest(snapshot, rendered, digest)

    def put(
        self, rel_path: str, key: str, snapshot: DatasetSnapshot, rendered: str, source: str
    ) -> str | None:
        """Remember a manifest that loaded with no problem, if its data reads back as the same snapshot;
        its definition digest when it is remembered (None: not remembered, the cache is off)."""
        if not self.enabled:
            return None
        data = to_data(snapshot)
        try:
            if from_data("DatasetSnapshot", json.loads(json.dumps(data))) != snapshot:
                return None
        except (InvalidValueError, ValueError, TypeError):
            return None
        digest = definition_digest(data)
        entry: dict[str, Any] = {"key": key, "snapshot": data, "digest": digest}
        if rendered != source:
            entry["text"] = rendered
        self.entries[rel_path] = entry
        self.changed = True
        return digest

    def save(self, keep: Collection[str] | None = None) -> None:
        """Write the cache if anything changed, keeping only ``keep`` (all entries when None)."""
        if not self.enabled or not (prune(self.entries, keep) or self.changed):
            return
        body = json.dumps({"code": self.code, "manifests": self.entries}, separators=(",", ":")).encode()
        self.changed = not write_checked(self.file, body)
