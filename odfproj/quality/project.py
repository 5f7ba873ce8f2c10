"""``odfproj test``: the selected datasets' data tests, over the project's workspace."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from odfproj.engine.spark import SparkEngine
from odfproj.plan.sources import PlanRequest, load_project_state
from odfproj.project.config import ProjectConfig
from odfproj.quality.definitions import load_suite
from odfproj.quality.execute import Outcome, TestResult, blocking, run_tests
from odfproj.storage.workspace import Workspace

__all__ = ["TestRun", "test_project"]


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest test class, despite the name

    results: tuple[TestResult, ...]
    #: The selected datasets without any test.
    untested: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not blocking(self.results)

    def summary(self) -> str:
        counts = {o: sum(1 for r in self.results if r.outcome is o) for o in Outcome}
        return (
            f"{len(self.results)} data test(s): {counts[Outcome.PASS]} passed, {counts[Outcome.FAIL]} failed, "
            f"{counts[Outcome.WARN]} warned, {counts[Outcome.ERROR]} could not run"
        )


def test_project(
    config: ProjectConfig,
    request: PlanRequest,
    engine: SparkEngine,
    *,
    as_at: datetime | None = None,
    on_result: Callable[[TestResult], None] | None = None,
) -> TestRun:
    """Run the data tests of the selected datasets, in topological order; nothing is written.

    Raises ``ManifestError`` when a manifest or a test file is wrong (every problem at once).
    """
    snapshot = load_project_state(config, request)
    suite = load_suite(config, snapshot.manifests.by_name)
    suite.raise_for_problems()
    names = snapshot.selection.names
    tests = [t for name in names for t in suite.of(name)]
    results = run_tests(tests, Workspace(snapshot.workspace), engine, as_at=as_at, on_result=on_result)
    return TestRun(results, tuple(n for n in names if not suite.of(n)))


test_project.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, despite the name
