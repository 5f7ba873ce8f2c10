"""``odfproj fmt``'s writes: the canonical forms ``project.fmt`` judged, put in place atomically.

``project/`` only reads a project; writing a manifest back is this layer's, like every other write.
A file is replaced by one ``rename(2)``, so an editor or a concurrent ``git`` never sees half of it; a
file that cannot be written is reported as failed, the others are still written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from odfproj.project.fmt import FormatReport, FormatResult, FormatStatus, formatted_files
from odfproj.storage.fsutil import replace_atomic

__all__ = ["format_files"]


def format_files(
    files: Iterable[Path], *, check: bool = False, display_root: Path | None = None
) -> FormatReport:
    """Format each file in place (or, with ``check``, only tell which would change)."""
    report = formatted_files(files, check=check, display_root=display_root)
    if check:
        return report
    return dataclasses.replace(report, results=tuple(_written(r) for r in report.results))


def _written(result: FormatResult) -> FormatResult:
    if result.status is not FormatStatus.REFORMATTED or result.formatted is None:
        return result
    try:
        replace_atomic(result.path, result.formatted, durable=False)
    except OSError as e:
        return dataclasses.replace(
            result, status=FormatStatus.FAILED, message=f"cannot write: {e.strerror or e}"
        )
    return result
