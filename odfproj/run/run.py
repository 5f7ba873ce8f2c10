"""``odfproj run``: apply the definitions, then bring every selected dataset's data up to date.

Order of work, all under the workspace lock:

1. Plan the selected manifests (the same :class:`~odfproj.plan.model.Plan` ``odfproj plan`` shows) and
   apply its ``AppendDefinitions`` steps exactly like ``odfproj apply`` (a plan with refused changes
   stops the run before anything is written).
2. Execute the plan's data steps and nothing else, inputs before their readers: an ``Ingest`` step
   polls the root's source (:func:`odfproj.ingest.pipeline.ingest_polling`), a ``Transform`` step
   updates the derivative (:func:`odfproj.transform.coordinator.update_derivative`). A selected
   dataset without a data step (a root fed only by push sources) is reported as skipped.
3. A dataset that fails is recorded with its one-line error; its downstream datasets are skipped
   (their inputs did not advance) and every other dataset still runs.

Interruption (Ctrl-C) is cooperative: once ``cancel`` is set no dataset starts any more, the ones
in flight finish (each commit is atomic, so a dataset is either updated or untouched) and every
dataset not started is recorded as ``cancelled``. A ``KeyboardInterrupt`` reaching the scheduler
(a second Ctrl-C) abandons the datasets in flight at once: they too are recorded as ``cancelled``,
the results are written and the interrupt goes on up to the caller, which must end the process
(worker threads cannot be stopped from outside). A caller that cannot raise in the run's thread and
does not end its process (the warm engine's server, ``run.warm_run``) sets ``abort`` instead: the
same results, returned, and the workspace lock kept until the abandoned datasets' threads have ended
(the caller cancels their Spark jobs), so that no later run meets them.

With ``threads > 1`` independent datasets run at the same time, dbt-style: a dataset starts once all
its selected upstream datasets have finished. The Spark session is shared (the engine isolates each
operation in its own child session) and created only when some dataset has data to process.

The outcome is returned as a :class:`RunResult`, reported through ``on_event`` as it happens, and
written to ``<workspace>/run_results.json`` (like dbt's ``target/run_results.json``).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from odfproj import __version__
from odfproj.engine.session import SparkSessionHolder
from odfproj.engine.spark import SparkEngine
from odfproj.errors import OdfprojError
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf.timestamps import format_rfc3339
from odfproj.plan.engine_checks import query_checker
from odfproj.plan.model import Action, DataStep, Ingest, Plan
from odfproj.plan.sources import plan_project
from odfproj.project.config import ProjectConfig
from odfproj.project.loader import PlanRequest
from odfproj.quality.definitions import DataTest, load_suite
from odfproj.quality.execute import blocking, run_tests
from odfproj.run.apply import ApplyResult, apply_plan, check_plan
from odfproj.run.queue import ReadyQueue
from odfproj.run.runlog import RUN_THREADS, log_path, run_log
from odfproj.storage.fsutil import replace_atomic
from odfproj.storage.update_record import describe_path
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import update_derivative

__all__ = [
    "RUN_RESULTS_FILE",
    "DatasetRun",
    "RunEvent",
    "RunResult",
    "Status",
    "Work",
    "run_project",
    "write_run_results",
]

#: Written into the workspace folder after every run.
RUN_RESULTS_FILE = "run_results.json"

#: Why a dataset that never started is ``cancelled``.
NOT_STARTED = "not started: the run was interrupted"
#: Why a dataset in flight at a second Ctrl-C is ``cancelled``.
ABANDONED = (
    "stopped while running by a second interrupt: every commit is atomic, so it kept only "
    "what it had fully committed"
)


class Status(StrEnum):
    SUCCESS = "success"
    ERROR = "error"
    SKIPPED = "skipped"
    #: Not started, or abandoned by a second Ctrl-C, because the run was interrupted.
    CANCELLED = "cancelled"


class Work(StrEnum):
    """What a dataset needed."""

    INGEST = "ingest"
    TRANSFORM = "transform"
    NONE = "none"


@dataclass(frozen=True)
class DatasetRun:
    """The outcome for one dataset."""

    dataset: str
    work: Work
    status: Status
    records_added: int = 0
    blocks_added: int = 0
    seconds: float = 0.0
    #: The error, the reason for a skip, or a short note ("up to date").
    message: str = ""
    #: The dataset's data test results after it updated (``quality.execute.TestResult.to_json``).
    tests: tuple[Mapping[str, Any], ...] = ()
    #: For a derivative whose query ran: the path its update took (``stateless``, ``grouped``,
    #: ``grouped over a join``, ``join``, ``full``); ``""`` otherwise.
    path: str = ""
    #: Why the update took the full path: the construct that makes the query ``full``, or the update's own reason.
    why_full: str = ""
    #: The query's mode as the update found it (``grouped``, ``full: window function``).
    mode: str = ""
    #: For a ``full`` query: the small rewrite that would make it incremental.
    hint: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "unique_id": self.dataset,
            "work": self.work.value,
            "status": self.status.value,
            "records_added": self.records_added,
            "blocks_added": self.blocks_added,
            "execution_time": round(self.seconds, 3),
            "message": self.message,
            "path": self.path or None,
            "why_full": self.why_full or None,
            "mode": self.mode or None,
            "hint": self.hint or None,
            "tests": [dict(t) for t in self.tests],
        }


@dataclass(frozen=True)
class RunEvent:
    """Progress: ``phase`` is ``queued``, ``start``, ``spark`` or ``finish`` (only ``finish`` has a ``result``).

    Every selected dataset is ``queued`` once before the first starts, so a display knows the total.

    ``spark`` says that the dataset now waits for the JVM to start (seconds, once per process), so
    that a display can say so instead of showing a step that looks stuck.
    """

    dataset: str
    phase: str
    work: Work
    result: DatasetRun | None = None
    #: On ``start``: the plan's step being executed.
    step: DataStep | None = None

    def line(self) -> str | None:
        """One line with the full name and message (none for ``queued``): logs, CI, watch --apply."""
        if self.phase == "queued":
            return None
        if self.phase == "start":
            return f"START {self.dataset} ({self.work.value})"
        if self.phase == "spark":
            return f"WAIT {self.dataset} ({self.work.value}): starting Spark"
        r = self.result
        assert r is not None
        detail = f"{r.records_added} record(s)" if r.status is Status.SUCCESS else r.message
        if r.status is Status.SUCCESS and r.message:
            detail += f", {r.message}"
        return f"{r.status.value.upper()} {r.dataset} ({r.work.value}) in {r.seconds:.1f}s: {detail}"


@dataclass(frozen=True)
class RunResult:
    project: str
    target: str | None
    workspace: Path
    started_at: datetime
    seconds: float
    results: tuple[DatasetRun, ...]
    apply: ApplyResult | None = field(default=None, repr=False)
    #: The plan the run executed: its definitions were applied, then its data steps run.
    plan: Plan | None = field(default=None, repr=False)
    #: This run's log file (see :mod:`odfproj.run.runlog`).
    log_file: Path | None = None
    #: True when the run was interrupted (Ctrl-C): some datasets are ``cancelled``.
    interrupted: bool = False
    #: The plan's warnings (a selector that matched nothing, a manifest set aside outside the
    #: selection), kept when the plan is not (a warm run's result comes back without it).
    warnings: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[DatasetRun, ...]:
        return tuple(r for r in self.results if r.status is Status.ERROR)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.interrupted

    @property
    def records_added(self) -> int:
        return sum(r.records_added for r in self.results)

    def summary(self) -> str:
        counts = {s: sum(1 for r in self.results if r.status is s) for s in Status}
        how = "interrupted after" if self.interrupted else "complete in"
        cancelled = f", {counts[Status.CANCELLED]} cancelled" if counts[Status.CANCELLED] else ""
        return (
            f"Run {how} {self.seconds:.1f}s: {counts[Status.SUCCESS]} succeeded, "
            f"{counts[Status.ERROR]} failed, {counts[Status.SKIPPED]} skipped{cancelled}; "
            f"{self.records_added} record(s) added."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "metadata": {
                "odfproj_version": __version__,
                "generated_at": format_rfc3339(datetime.now(UTC).replace(microsecond=0)),
                "project": self.project,
                "target": self.target,
            },
            "started_at": format_rfc3339(self.started_at.replace(microsecond=0)),
            "elapsed_time": round(self.seconds, 3),
            "interrupted": self.interrupted,
            "log_file": str(self.log_file) if self.log_file else None,
            "results": [r.to_json() for r in self.results],
        }


def run_project(
    config: ProjectConfig,
    request: PlanRequest,
    *,
    holder: SparkSessionHolder,
    threads: int = 1,
    on_event: Callable[[RunEvent], None] | None = None,
    system_time: datetime | None = None,
    environ: Mapping[str, str] | None = None,
    lock_timeout: float | None = None,
    validate_queries: bool = True,
    cancel: threading.Event | None = None,
    full_refresh: bool = False,
    abort: threading.Event | None = None,
) -> RunResult:
    """Apply the selected definitions, then ingest/transform every selected dataset (see module doc).

    Changed queries are validated while planning (``validate_queries``), so a query that cannot run
    or breaks Schema Evolution stops the run before its SetTransform is appended. Setting ``cancel``
    (from a signal handler, another thread) stops the run between datasets. ``full_refresh`` makes
    every selected derivative recompute its query over its inputs' whole states (the full path), even
    a stateless or grouped one that would read only the new records. ``abort`` set acts as a second
    Ctrl-C that returns (see the module doc).
    """
    started = datetime.now(UTC)
    clock = time.monotonic()
    checker = query_checker(SparkEngine(holder)) if validate_queries else None
    workspace = Workspace(config.workspace(request.target), odf_version=config.odf_version)
    stop = cancel or threading.Event()
    log_file = log_path(workspace.root, started)
    workers = f"{RUN_THREADS}-{uuid.uuid4().hex[:8]}"  # this run's, in its log (see run_log)
    with workspace.lock(purpose="odfproj run", timeout=lock_timeout), run_log(log_file, workers) as log:
        log.info(
            "odfproj %s: project %s, target %s", __version__, config.name, config.target(request.target).name
        )
        # Planned under the lock, so no other apply or run can move a chain between plan and apply.
        plan, snapshot = plan_project(config, request, environ=environ, query_checker=checker)
        for warning in plan.warnings:
            log.info("warning: %s", warning)
        environ = dict(os.environ) if environ is None else environ

        def report(event: RunEvent) -> None:
            line = event.line()
            if line is not None:
                log.info("%s", line)
            _emit(on_event, event)

        suite = load_suite(config, snapshot.manifests.by_name)
        suite.raise_for_problems()  # wrong data test files stop the run before anything is written
        # Refusals stop the run before anything is written (apply_plan checks the plan itself).
        applied: ApplyResult | None = None
        if plan.has_changes:
            applied = apply_plan(plan, workspace, cancel=stop)
            log.info("%s", applied.summary())
        else:
            check_plan(plan, workspace)
        order = tuple(s.dataset for s in plan.definitions if s.action is not Action.ORPHAN)
        steps = {step.dataset: step for step in plan.data_steps}
        upstream = {n: set(snapshot.graph.upstream(n)) & set(steps) for n in steps}

        def work_on(name: str) -> DatasetRun:
            view = snapshot.state.views.get(name.lower())
            ingested = view.ingested_files if view is not None else None
            outcome = _run_step(
                workspace,
                steps[name],
                holder,
                config.root,
                system_time,
                environ,
                report,
                ingested,
                full_refresh=full_refresh,
            )
            return _after_update(outcome, suite.of(name), workspace, holder, report)

        def finish(results: Mapping[str, DatasetRun]) -> RunResult:
            result = RunResult(
                project=config.name,
                target=config.target(request.target).name,
                workspace=workspace.root,
                started_at=started,
                seconds=time.monotonic() - clock,
                results=tuple(results[n] if n in results else _no_data_step(n) for n in order),
                apply=applied,
                plan=plan,
                log_file=log_file,
                interrupted=stop.is_set() or any(r.status is Status.CANCELLED for r in results.values()),
                warnings=plan.warnings,
            )
            write_run_results(result)
            log.info("%s", result.summary())
            return result

        def cancelled(name: str, why: str) -> DatasetRun:
            return DatasetRun(name, _work_of(steps[name]), Status.CANCELLED, message=why)

        for name in order:  # every selected dataset once, so that a display knows the total
            _emit(on_event, RunEvent(name, "queued", Work.NONE))
        for name in order:
            if name not in steps:
                report(RunEvent(name, "finish", Work.NONE, _no_data_step(name)))
        scheduler = _Scheduler(tuple(steps), upstream, work_on, max(1, threads), report, stop, abort, workers)
        try:
            results = scheduler.run(cancelled)
        except KeyboardInterrupt:
            finish(scheduler.abandon(cancelled))
            raise
        except _Aborted:
            aborted = finish(scheduler.abandon(cancelled))
            scheduler.pool.shutdown(wait=True)  # under the lock: the abandoned threads end first
            return aborted
        return finish(results)


def write_run_results(result: RunResult) -> Path:
    path = result.workspace / RUN_RESULTS_FILE
    replace_atomic(path, (json.dumps(result.to_json(), indent=2) + "\n").encode(), durable=False)
    return path


# --- scheduling ----------------------------------------------------------------------------------

#: How often a scheduler with an ``abort`` event looks at it while datasets run.
_ABORT_POLL_S = 0.2


class _Aborted(Exception):
    """``abort`` was set: a second Ctrl-C, relayed by a caller that cannot raise in this thread."""


class _Scheduler:
    """Runs ``work_on`` for every step once its upstream succeeded; skips the downstream of failures.

    A worker pool does the work, so the calling (main) thread only waits, and signal handlers run
    promptly there. ``stop`` ends the starting of new steps. Which step may start is the
    :class:`~odfproj.run.queue.ReadyQueue`'s business.
    """

    def __init__(
        self,
        order: tuple[str, ...],
        upstream: Mapping[str, set[str]],
        work_on: Callable[[str], DatasetRun],
        threads: int,
        on_event: Callable[[RunEvent], None] | None,
        stop: threading.Event,
        abort: threading.Event | None = None,
        workers: str = RUN_THREADS,
    ) -> None:
        self.order = order
        self.abort = abort
        self.queue = ReadyQueue(order, upstream)
        self.work_on = work_on
        self.threads = threads
        self.on_event = on_event
        self.stop = stop
        self.results: dict[str, DatasetRun] = {}
        self.running: dict[str, Future[DatasetRun]] = {}
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=workers)

    def run(self, cancelled: Callable[[str, str], DatasetRun]) -> dict[str, DatasetRun]:
        poll = None if self.abort is None else _ABORT_POLL_S
        while True:
            if self.abort is not None and self.abort.is_set():
                raise _Aborted
            if self.stop.is_set():
                self.queue.cancel()
            while self.queue and len(self.running) < self.threads:
                name = self.queue.pop()
                self.running[name] = self.pool.submit(self.work_on, name)
            if not self.running:  # all done, or interrupted
                break
            done, _ = wait(list(self.running.values()), timeout=poll, return_when=FIRST_COMPLETED)
            for name, future in list(self.running.items()):
                if future in done:
                    del self.running[name]
                    outcome = future.result()
                    self.results[name] = outcome
                    if outcome.status is Status.ERROR:
                        self._skip(self.queue.failed(name), name)
                    else:
                        self.queue.succeeded(name)
        self.pool.shutdown(wait=True)
        self._cancel_rest(cancelled, NOT_STARTED)
        return self.results

    def abandon(self, cancelled: Callable[[str, str], DatasetRun]) -> dict[str, DatasetRun]:
        """Stop at once: datasets in flight and not started become ``cancelled``; nothing is awaited."""
        self.stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
        for name, future in list(self.running.items()):
            if future.done() and not future.cancelled() and future.exception() is None:
                self.results[name] = future.result()
            else:
                self.results[name] = cancelled(name, ABANDONED)
                _emit(self.on_event, RunEvent(name, "finish", self.results[name].work, self.results[name]))
        self._cancel_rest(cancelled, NOT_STARTED)
        return self.results

    def _skip(self, names: tuple[str, ...], failed: str) -> None:
        for name in names:
            # Only derivatives have upstream datasets.
            skipped = DatasetRun(
                name, Work.TRANSFORM, Status.SKIPPED, message=f"upstream dataset {failed} failed"
            )
            self.results[name] = skipped
            _emit(self.on_event, RunEvent(name, "finish", Work.TRANSFORM, skipped))

    def _cancel_rest(self, cancelled: Callable[[str, str], DatasetRun], why: str) -> None:
        for name in self.order:
            if name not in self.results:
                result = cancelled(name, why)
                self.results[name] = result
                _emit(self.on_event, RunEvent(name, "finish", result.work, result))


def _emit(on_event: Callable[[RunEvent], None] | None, event: RunEvent) -> None:
    if on_event is not None:
        on_event(event)


# --- one dataset ---------------------------------------------------------------------------------


class _AnnouncingHolder:
    """A dataset's view of the shared holder: calls ``announce`` before waiting for the JVM to start."""

    def __init__(self, holder: SparkSessionHolder, announce: Callable[[], None]) -> None:
        self._holder = holder
        self._announce = announce
        self.settings = holder.settings

    @property
    def created(self) -> bool:
        return self._holder.created

    def get(self) -> Any:
        if not self._holder.created:
            self._announce()
        return self._holder.get()

    def stop(self) -> None:
        self._holder.stop()


def _run_step(
    workspace: Workspace,
    step: DataStep,
    holder: SparkSessionHolder,
    project_root: Path,
    system_time: datetime | None,
    environ: Mapping[str, str],
    on_event: Callable[[RunEvent], None] | None,
    ingested: Collection[str] | None = None,
    *,
    full_refresh: bool = False,
) -> DatasetRun:
    """Execute one data step of the plan; its failure is its result, never an exception.

    ``ingested``: for a ``FilesGlob`` root, the files its chain records as ingested, as the plan read
    them under this run's lock (the chain cannot have moved since), so the chain is walked once.
    """
    clock = time.monotonic()
    name, work = step.dataset, _work_of(step)
    try:
        _emit(on_event, RunEvent(name, "start", work, step=step))
        announcing = _AnnouncingHolder(holder, lambda: _emit(on_event, RunEvent(name, "spark", work)))
        engine = SparkEngine(announcing)  # type: ignore[arg-type]
        dataset = workspace.open(name)
        if isinstance(step, Ingest):
            polled = ingest_polling(
                dataset,
                engine,
                project_root=project_root,
                system_time=system_time,
                environ=environ,
                ingested=ingested,
            )
            result = DatasetRun(
                name,
                work,
                Status.SUCCESS,
                records_added=polled.records_added,
                blocks_added=polled.blocks_added,
                message="up to date" if polled.up_to_date else "",
            )
        else:
            head_before = dataset.head()
            outcome = update_derivative(
                workspace, name, engine, system_time or datetime.now(UTC), full_refresh=full_refresh
            )
            blocks = _blocks_since(workspace, name, head_before)
            # The path the query took (and why full, and what would make it incremental), when it ran.
            path = describe_path(outcome.mode, outcome.why_full, outcome.query_mode, outcome.hint)
            note = (outcome.reason or "up to date") if blocks == 0 else path
            result = DatasetRun(
                name,
                work,
                Status.SUCCESS,
                records_added=outcome.records,
                blocks_added=blocks,
                message=note,
                path=outcome.mode,
                why_full=outcome.why_full,
                mode=outcome.query_mode,
                hint=outcome.hint,
            )
    except OdfprojError as e:
        result = DatasetRun(name, work, Status.ERROR, message=str(e))
    except Exception as e:  # a bug must not stop the other datasets; it is reported as one
        result = DatasetRun(
            name, work, Status.ERROR, message=f"internal error: {type(e).__name__}: {e} (this is a bug)"
        )
    result = replace(result, seconds=time.monotonic() - clock)
    _emit(on_event, RunEvent(name, "finish", work, result))
    return result


def _work_of(step: DataStep) -> Work:
    return Work.INGEST if isinstance(step, Ingest) else Work.TRANSFORM


def _no_data_step(name: str) -> DatasetRun:
    """The result of a selected dataset the plan gives no data step: a root fed only by push sources."""
    return DatasetRun(name, Work.NONE, Status.SKIPPED, message="no polling source (push-only root)")


def _blocks_since(workspace: Workspace, name: str, head_before: Any) -> int:
    count = 0
    for block_hash, _ in workspace.open(name).iter_blocks():
        if block_hash == head_before:
            break
        count += 1
    return count


def _after_update(
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
