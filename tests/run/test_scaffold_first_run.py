"""The project `odfproj init` writes works on its first run: init, add a CSV, validate, plan, run, query.

The whole CLI runs in-process on the shared Spark session (tests/cli_inprocess.py).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import cli_in

pytestmark = pytest.mark.spark

READINGS = """reading_time,sensor,value
2026-03-01T08:00:00Z,s1,1.5
2026-03-01T09:00:00Z,s1,2.5
2026-03-01T08:00:00Z,s2,10.0
2026-03-02T08:00:00Z,s1,4.0
"""


@pytest.fixture
def odfproj(spark, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    folder = tmp_path / "proj"
    return cli_in(spark, monkeypatch, lambda: folder if folder.exists() else tmp_path), folder


def test_scaffold_validate_plan_run_query(odfproj) -> None:
    invoke, folder = odfproj
    code, out = invoke("init", "proj")
    assert code == 0, out
    data = folder / "data" / "readings"
    data.mkdir(parents=True, exist_ok=True)
    (data / "2026-03-01.csv").write_text(READINGS)

    code, out = invoke("validate")
    assert code == 0, out
    code, out = invoke("plan")
    assert code == 0, out
    assert "com.example.readings" in out and "refused" not in out.replace("0 refused", "")

    code, out = invoke("run")
    assert code == 0, out
    results = json.loads((folder / ".odf" / "run_results.json").read_text())["results"]
    assert {r["unique_id"]: r["status"] for r in results} == {
        "com.example.readings": "success",
        "com.example.readings-daily": "success",
    }, results

    workspace = Workspace(folder / ".odf")
    raw = workspace.open("com.example.readings").projection()
    assert raw.arrow_schema.names[:4] == ["offset", "op", "system_time", "reading_time"]
    assert raw.last_offset == 3

    code, out = invoke("query", "com.example.readings-daily", "--format", "csv")
    assert code == 0, out
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 3, out  # (s1, day 1), (s2, day 1), (s1, day 2)
    by_sensor_day = {(r["sensor"], r["reading_time"][:10]): float(r["avg_value"]) for r in rows}
    assert by_sensor_day == {("s1", "2026-03-01"): 2.0, ("s2", "2026-03-01"): 10.0, ("s1", "2026-03-02"): 4.0}

    # A second run with nothing new changes nothing.
    head = workspace.open("com.example.readings").head()
    code, out = invoke("run")
    assert code == 0, out
    assert workspace.open("com.example.readings").head() == head


def test_spark_warnings_the_console_hides_are_in_the_run_log(odfproj) -> None:
    """A CSV whose header names other columns than the read schema: Spark reads it by position and warns.

    The console stays quiet, and the run's log file (issue 14, point 8) has Spark's warning in full.
    """
    invoke, folder = odfproj
    assert invoke("init", "proj")[0] == 0
    data = folder / "data" / "readings"
    data.mkdir(parents=True, exist_ok=True)
    (data / "2026-03-01.csv").write_text(READINGS.replace("sensor", "station"))

    code, out = invoke("run")
    assert code == 0, out
    assert "CSV header does not conform" not in out
    log = Path(json.loads((folder / ".odf" / "run_results.json").read_text())["log_file"])
    text = log.read_text()
    assert "WARNING odfproj.spark:" in text and "CSV header does not conform to the schema" in text, text
