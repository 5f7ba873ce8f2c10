"""What ``odfproj retry`` re-runs: the datasets the last run did not bring up to date because of a failure.

Like dbt's ``retry``: read the last ``run_results.json`` and pick every dataset that failed, was
skipped because an upstream dataset failed, or was cancelled by an interrupt. Datasets that
succeeded, or were skipped for a reason of their own (a push-only root), are left alone.
"""

from __future__ import annotations

import json
from pathlib import Path

from odfproj.errors import OdfprojError
from odfproj.run.run import RUN_RESULTS_FILE, Status

__all__ = ["retry_selection"]

#: How the scheduler words a skip caused by a failure upstream (``run._Scheduler._skip_downstream``).
_UPSTREAM_FAILED = "upstream dataset "


def retry_selection(workspace: Path) -> tuple[str, ...]:
    """The datasets to run again, in the last run's order; raises when there is no readable last run."""
    path = workspace / RUN_RESULTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        results = data["results"]
        if not isinstance(results, list):
            raise TypeError("results is not a list")
    except FileNotFoundError:
        raise OdfprojError(f"{path}: no run to retry (odfproj run writes this file)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise OdfprojError(f"{path}: cannot read the last run's results: {e}") from None
    chosen = []
    for entry in results:
        if not isinstance(entry, dict):
            continue
        status, message = entry.get("status"), str(entry.get("message") or "")
        if (
            status in (Status.ERROR.value, Status.CANCELLED.value)
            or (status == Status.SKIPPED.value and message.startswith(_UPSTREAM_FAILED))
        ) and isinstance(entry.get("unique_id"), str):
            chosen.append(entry["unique_id"])
    return tuple(chosen)
