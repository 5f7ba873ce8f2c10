"""``odfproj retry`` picks from the last run_results.json what a failure left behind (no JVM)."""

from __future__ import annotations

import json

import pytest

from odfproj.errors import OdfprojError
from odfproj.run.retry import retry_selection
from odfproj.run.run import RUN_RESULTS_FILE


def test_retry_picks_failures_their_skipped_downstream_and_cancellations(tmp_path):
    results = [
        {"unique_id": "ok", "status": "success", "message": ""},
        {"unique_id": "broken", "status": "error", "message": "dataset 'broken': bad CSV"},
        {"unique_id": "broken.view", "status": "skipped", "message": "upstream dataset broken failed"},
        {"unique_id": "pushed", "status": "skipped", "message": "no polling source (push-only root)"},
        {"unique_id": "late", "status": "cancelled", "message": "not started: the run was interrupted"},
    ]
    (tmp_path / RUN_RESULTS_FILE).write_text(json.dumps({"results": results}))
    assert retry_selection(tmp_path) == ("broken", "broken.view", "late")


def test_retry_without_a_readable_last_run_says_so(tmp_path):
    with pytest.raises(OdfprojError, match="no run to retry"):
        retry_selection(tmp_path)
    (tmp_path / RUN_RESULTS_FILE).write_text("{not json")
    with pytest.raises(OdfprojError, match="cannot read the last run's results"):
        retry_selection(tmp_path)
