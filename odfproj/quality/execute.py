"""Run data tests over a workspace: the current state, or the state as known at a system time.

A test passes when its query returns no row. A failing test with severity ``warn`` is reported and
nothing else; with severity ``error`` it fails ``odfproj test`` and, in ``odfproj run``, blocks the
dataset's downstream. A test that cannot run at all (no data yet, a query Spark refuses) is an
``error`` outcome: it blocks like a failure, since nothing was proven.

Spark starts only for query tests; freshness reads the chain alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pyarrow as pa

from odfproj.engine.spark import SparkEngine
from odfproj.errors import OdfprojError
from odfproj.quality.checks import failing_rows_query, freshness_failure
from odfproj.quality.definitions import DataTest, Severity
from odfproj.state.views import run_sql
from odfproj.storage.workspace import Workspace

__all__ = ["Outcome", "TestResult", "blocking", "run_tests"]

#: How many failing rows a result keeps to show.
SAMPLE_ROWS = 10


class Outcome(StrEnum):
    PASS = "pass"
    #: Failing rows, severity error.
    FAIL = "fail"
    #: Failing rows, severity warn.
    WARN = "warn"
    #: The test could not run.
    ERROR = "error"


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class, despite the name

    test: DataTest
    outcome: Outcome
    #: How many rows the test's query returned (for freshness: 1 when stale).
    failures: int = 0
    message: str = ""
    #: Up to ``SAMPLE_ROWS`` failing rows.
    sample: pa.Table | None = None

    @property
    def blocks(self) -> bool:
        """True when the failure must stop what depends on the dataset."""
        return self.outcome in (Outcome.FAIL, Outcome.ERROR)

    def line(self) -> str:
        """``FAIL dataset: name (file:line): message``: one line per test for logs and CI."""
        detail = f": {self.message}" if self.message else ""
        return (
            f"{self.outcome.value.upper()} {self.test.dataset}: {self.test.name} ({self.test.where}){detail}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.test.dataset,
            "name": self.test.name,
            "kind": self.test.kind,
            "severity": self.test.severity.value,
            "status": self.outcome.value,
            "failures": self.failures,
            "message": self.message,
            "defined_at": self.test.where,
        }


def blocking(results: Iterable[TestResult]) -> tuple[TestResult, ...]:
    return tuple(r for r in results if r.blocks)


def run_tests(
    tests: Iterable[DataTest],
    workspace: Workspace,
    engine: SparkEngine,
    *,
    as_at: datetime | None = None,
    on_result: Callable[[TestResult], None] | None = None,
) -> tuple[TestResult, ...]:
    """Run each test (in the given order) and return every result; never raises for a test's failure."""
    results = []
    for test in tests:
        result = _run_one(test, workspace, engine, as_at)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return tuple(results)


def _run_one(test: DataTest, workspace: Workspace, engine: SparkEngine, as_at: datetime | None) -> TestResult:
    try:
        if not workspace.exists(test.dataset):
            return TestResult(
                test, Outcome.ERROR, message="the dataset is not in the workspace (run it first)"
            )
        if test.kind == "freshness":
            now = as_at or datetime.now(UTC)
            stale = freshness_failure(test, workspace.open(test.dataset, recover=False), now)
            return _judged(test, 1 if stale else 0, stale or "", None)
        query = failing_rows_query(test)
        count = run_sql(
            engine, workspace, f"SELECT count(*) AS failures FROM ({query}) AS failing", as_at=as_at
        )
        failures = int(count.column(0)[0].as_py()) if count.num_rows else 0
        if not failures:
            return TestResult(test, Outcome.PASS)
        sample = run_sql(engine, workspace, query, as_at=as_at, limit=SAMPLE_ROWS)
        if test.kind == "row_count":
            bounds = f"{test.args.get('min', 0)}..{test.args.get('max', 'any')}"
            return _judged(test, failures, f"{sample.column(0)[0].as_py()} row(s), expected {bounds}", sample)
        return _judged(test, failures, f"{failures} failing row(s)", sample)
    except OdfprojError as e:
        return TestResult(test, Outcome.ERROR, message=str(e))


def _judged(test: DataTest, failures: int, message: str, sample: pa.Table | None) -> TestResult:
    if not failures:
        return TestResult(test, Outcome.PASS)
    outcome = Outcome.WARN if test.severity is Severity.WARN else Outcome.FAIL
    return TestResult(test, outcome, failures, message, sample)
