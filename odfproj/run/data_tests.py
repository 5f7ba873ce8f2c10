"""The data tests ``odfproj run`` runs after each dataset it updated (see :mod:`odfproj.quality`).

A blocking failure turns the dataset's outcome into an error, so the scheduler skips its downstream
as after any failure; the data it just committed stays (a chain is append-only), and the message
says so, so nobody looks for a rollback that did not happen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from odfproj.engine.session import SparkSessionHolder
from odfproj.engine.spark import SparkEngine
from odfproj.quality.definitions import DataTest
from odfproj.quality.execute import blocking, run_tests
from odfproj.storage.workspace import Workspace

if TYPE_CHECKING:
    from odfproj.run.run import DatasetRun, RunEvent


def after_update(
    outcome: DatasetRun,
    tests: Sequence[DataTest],
    workspace: Workspace,
    holder: SparkSessionHolder,
    on_event: Callable[[RunEvent], None],
) -> DatasetRun:
    """``outcome`` with its data tests' results; an error if a test with severity error failed.

    A dataset whose tests block is reported finished a second time, now as failed, so that a
    display that showed it succeeding corrects itself.
    """
    from odfproj.run.run import RunEvent, Status  # run.run imports this module

    if outcome.status is not Status.SUCCESS or not tests:
        return outcome
    results = run_tests(tests, workspace, SparkEngine(holder))
    failed = blocking(results)
    records = tuple(r.to_json() for r in results)
    if not failed:
        return replace(outcome, tests=records)
    names = ", ".join(r.test.name for r in failed)
    failure = replace(
        outcome,
        status=Status.ERROR,
        tests=records,
        message=(
            f"{len(failed)} data test(s) failed: {names}; its new data stays committed (the chain is "
            "append-only) and its downstream datasets are not updated"
        ),
    )
    on_event(RunEvent(outcome.dataset, "finish", outcome.work, failure))
    return failure
