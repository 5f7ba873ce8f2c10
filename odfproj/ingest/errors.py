"""The ingest layer's errors: each one an :class:`IngestError` with a one-line message for users.

Every message starts with :func:`source_label` (``dataset 'x', source 'y'``) and names the URL or
file involved, because a run ingests many sources and a bare "HTTP 404" does not say which one.
Separate classes let the coordinator react differently (retry an unreachable host, report a
missing file) without parsing messages.
"""

from __future__ import annotations

import os
from pathlib import Path

from odfproj.errors import OdfprojError

__all__ = [
    "EventTimeError",
    "FetchError",
    "IngestError",
    "MissingParameterError",
    "PrepareError",
    "SourceNotFoundError",
    "SourceStateError",
    "SourceUnreachableError",
    "UnsupportedSourceError",
    "last_stderr_line",
    "one_line",
    "source_label",
]


class IngestError(OdfprojError):
    """Root ingestion failed: fetching, preparing, or deriving event time of a source."""


class FetchError(IngestError):
    """The fetch step could not obtain the data (bad response, failing container...)."""


class SourceNotFoundError(FetchError):
    """The resource does not exist: HTTP 404, a missing local file, a glob that matches nothing."""


class SourceUnreachableError(FetchError):
    """The resource could not be reached: connection refused, DNS failure, timeout, HTTP 5xx.

    Usually transient, so a scheduler may retry.
    """


class UnsupportedSourceError(IngestError):
    """The manifest asks for a fetch kind, URL scheme or option odfproj does not implement."""


class MissingParameterError(IngestError):
    """A ``${{ env.NAME }}`` template or a pass-through container variable names an unset variable."""


class SourceStateError(IngestError):
    """The source state recorded in the chain cannot be understood for this fetch step."""


class EventTimeError(IngestError):
    """Event time could not be derived (pattern does not match, bad timestamp format...)."""


class PrepareError(IngestError):
    """A prepare step (Decompress, Pipe) failed on a fetched file."""


def source_label(dataset: str, source: str) -> str:
    """The prefix of every ingest message, so a user knows which of many sources failed."""
    return f"dataset {dataset!r}, source {source!r}"


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace (tool output, server bodies) so messages stay on one line, and cap them."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def last_stderr_line(path: Path) -> str:
    """The last non-empty line of a tool's saved stderr: usually the actual error message."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 8192))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "(no error output)"
    last = next((line for line in reversed(lines) if line.strip()), "")
    return one_line(last) or "(no error output)"
