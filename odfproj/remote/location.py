"""Where a remote workspace is, without importing the sync engine: every command's config loading asks this."""

from __future__ import annotations

import hashlib
from pathlib import Path


def is_remote_workspace(setting: str) -> bool:
    """Whether a ``workspace`` setting (or ``ODFPROJ_WORKSPACE``) names an object store, not a folder."""
    return setting.startswith(("s3://", "file://"))


def remote_cache_dir(project_root: Path, url: str) -> Path:
    """Where a project keeps its cache of a remote workspace: one folder per URL, under ``.odf/``."""
    return project_root.resolve() / ".odf" / f"remote-{hashlib.sha256(url.encode()).hexdigest()[:16]}"
