"""``odfproj run``: apply the definitions, then bring every selected dataset's data up to date.

Order of work, all under the workspace lock:

1. Plan and apply the selected manifests exactly like ``odfproj apply`` (a plan with refused changes
   stops the run before anything is written).
2. Walk the selected datasets in topological order (inputs first). A root with a polling source is
   ingested (:func:`odfproj.ingest.pipeline.ingest_polling`); a derivative is updated by
   ``odfproj.transform.coordinator.update_derivative`` when that module is available, else recorded
   as skipped; anything else (a root fed only by push sources) is skipped with the reason.
3. A dataset that fails is recorded with its one-line error; its downstream datasets are skipped
   (their inputs did not advance) and every other dataset still runs.

Interruption (Ctrl-C) is cooperative: once ``cancel`` is set no dataset starts any more, the ones
in flight finish (each commit is atomic, so a dataset is either updated or untouched) and every
dataset not started is recorded as ``cancelled``. A ``KeyboardInterrupt`` reaching the scheduler
(a second Ctrl-C) abandons the datasets in flight at once: they too are recorded as ``cancelled``,
the results are written and the interrupt goes on up to the caller, which must end the process
(worker threads cannot be stopped from outside).

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
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from odfproj import __version__
from odfproj.engine.session import SparkSessionHolder
from odfproj.engine.spark import SparkEngine
from odfproj.errors import OdfprojError
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf import model
from odfproj.odf.timestamps import format_rfc3339
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import ProjectConfig
from odfproj.quality.definitions import load_suite
from odfproj.run.apply import ApplyResult, apply_plan, check_plan
from odfproj.run.data_tests import after_update
from odfproj.run.runlog import log_path, run_log
from odfproj.storage.fsutil import replace_atomic
from odfproj.storage.projection import ChainProjection
from odfproj.storage.workspace import Workspace
from odfproj.transform.validate import query_checker

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

    def to_json(self) -> dict[str, Any]:
        return {
            "unique_id": self.dataset,
            "work": self.work.value,
            "status": self.status.value,
            "records_added": self.records_added,
            "blocks_added": self.blocks_added,
            "execution_time": round(self.seconds, 3),
            "message": self.message,
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
    #: This run's log file (see :mod:`odfproj.run.runlog`).
    log_file: Path | None = None
    #: True when the run was interrupted (Ctrl-C): some datasets are ``cancelled``.
    interrupted: bool = False

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
) -> RunResult:
    """Apply the selected definitions, then ingest/transform every selected dataset (see module doc).

    Changed queries are validated while planning (``validate_queries``), so a query that cannot run
    or breaks Schema Evolution stops the run before its SetTransform is appended. Setting ``cancel``
    (from a signal handler, another thread) stops the run between datasets.
    """
    started = datetime.now(UTC)
    clock = time.monotonic()
    checker = query_checker(SparkEngine(holder)) if validate_queries else None
    plan, snapshot = plan_project(config, request, environ=environ, query_checker=checker)
    workspace = Workspace(snapshot.workspace)
    environ = dict(os.environ) if environ is None else environ
    stop = cancel or threading.Event()
    log_file = log_path(workspace.root, started)
    with workspace.lock(purpose="odfproj run", timeout=lock_timeout), run_log(log_file) as log:
        log.info(
            "odfproj %s: project %s, target %s", __version__, config.name, config.target(request.target).name
        )

        def report(event: RunEvent) -> None:
            line = event.line()
            if line is not None:
                log.info("%s", line)
            _emit(on_event, event)

        check_plan(plan, workspace)  # refusals stop the run before anything is written
        suite = load_suite(config, snapshot.manifests.by_name)
        suite.raise_for_problems()  # so do wrong data test files
        applied = apply_plan(plan, workspace, cancel=stop) if plan.has_changes else None
        if applied is not None:
            log.info("%s", applied.summary())
        order = snapshot.graph.topological_order(snapshot.selection.names)
        upstream = {n: set(snapshot.graph.upstream(n)) & set(order) for n in order}
        downstream = {n: set(snapshot.graph.downstream(n)) & set(order) for n in order}

        def work_on(name: str) -> DatasetRun:
            outcome = _run_dataset(workspace, name, holder, config.root, system_time, environ, report)
            return after_update(outcome, suite.of(name), workspace, holder, report)  # run.data_tests

        def finish(results: Mapping[str, DatasetRun]) -> RunResult:
            result = RunResult(
                project=config.name,
                target=config.target(request.target).name,
                workspace=workspace.root,
                started_at=started,
                seconds=time.monotonic() - clock,
                results=tuple(results[n] for n in order),
                apply=applied,
                log_file=log_file,
                interrupted=stop.is_set() or any(r.status is Status.CANCELLED for r in results.values()),
            )
            write_run_results(result)
            log.info("%s", result.summary())
            return result

        def cancelled(name: str, why: str) -> DatasetRun:
            return DatasetRun(name, _planned_work(workspace, name), Status.CANCELLED, message=why)

        scheduler = _Scheduler(order, upstream, downstream, work_on, max(1, threads), report, stop)
        try:
            results = scheduler.run(cancelled)
        except KeyboardInterrupt:
            finish(scheduler.abandon(cancelled))
            raise
        return finish(results)


def write_run_results(result: RunResult) -> Path:
    path = result.workspace / RUN_RESULTS_FILE
    replace_atomic(path, (json.dumps(result.to_json(), indent=2) + "\n").encode(), durable=False)
    return path


# --- scheduling ----------------------------------------------------------------------------------


class _Scheduler:
    """Runs ``work_on`` for every dataset once its upstream finished; skips the downstream of failures.

    A worker pool does the work, so the calling (main) thread only waits, and signal handlers run
    promptly there. ``stop`` ends the starting of new datasets.
    """

    def __init__(
        self,
        order: tuple[str, ...],
        upstream: Mapping[str, set[str]],
        downstream: Mapping[str, set[str]],
        work_on: Callable[[str], DatasetRun],
        threads: int,
        on_event: Callable[[RunEvent], None] | None,
        stop: threading.Event,
    ) -> None:
        self.order = order
        self.upstream = upstream
        self.downstream = downstream
        self.work_on = work_on
        self.threads = threads
        self.on_event = on_event
        self.stop = stop
        self.results: dict[str, DatasetRun] = {}
        self.running: dict[str, Future[DatasetRun]] = {}
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="odfproj-run")

    def run(self, cancelled: Callable[[str, str], DatasetRun]) -> dict[str, DatasetRun]:
        for name in self.order:
            _emit(self.on_event, RunEvent(name, "queued", Work.NONE))
        while len(self.results) < len(self.order):
            if not self.stop.is_set():
                for name in self._ready():
                    if len(self.running) >= self.threads:
                        break
                    self.running[name] = self.pool.submit(self.work_on, name)
            if not self.running:  # interrupted, or (never) nothing ready in an acyclic graph
                break
            done, _ = wait(list(self.running.values()), return_when=FIRST_COMPLETED)
            for name, future in list(self.running.items()):
                if future in done:
                    del self.running[name]
                    outcome = future.result()
                    self.results[name] = outcome
                    if outcome.status is Status.ERROR:
                        self._skip_downstream(name)
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

    def _ready(self) -> list[str]:
        return [
            n
            for n in self.order
            if n not in self.results
            and n not in self.running
            and all(u in self.results for u in self.upstream[n])
        ]

    def _skip_downstream(self, failed: str) -> None:
        for name in self.order:
            if name in self.downstream[failed] and name not in self.results:
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


def _run_dataset(
    workspace: Workspace,
    name: str,
    holder: SparkSessionHolder,
    project_root: Path,
    system_time: datetime | None,
    environ: Mapping[str, str],
    on_event: Callable[[RunEvent], None] | None,
) -> DatasetRun:
    clock = time.monotonic()
    work = Work.NONE
    if not workspace.exists(name):
        result = DatasetRun(name, work, Status.SKIPPED, message="not in the workspace")
        _emit(on_event, RunEvent(name, "finish", work, result))
        return result
    try:
        dataset = workspace.open(name)
        work = _work_of(dataset.projection())
        _emit(on_event, RunEvent(name, "start", work))
        announcing = _AnnouncingHolder(holder, lambda: _emit(on_event, RunEvent(name, "spark", work)))
        engine = SparkEngine(announcing)  # type: ignore[arg-type]
        if work is Work.INGEST:
            ingested = ingest_polling(
                dataset, engine, project_root=project_root, system_time=system_time, environ=environ
            )
            result = DatasetRun(
                name,
                work,
                Status.SUCCESS,
                records_added=ingested.records_added,
                blocks_added=ingested.blocks_added,
                message="up to date" if ingested.up_to_date else "",
            )
        elif work is Work.TRANSFORM:
            result = _transform(workspace, name, engine, system_time, dataset.head())
        else:
            result = DatasetRun(name, work, Status.SKIPPED, message="no polling source (push-only root)")
    except OdfprojError as e:
        result = DatasetRun(name, work, Status.ERROR, message=str(e))
    except Exception as e:  # a bug must not stop the other datasets; it is reported as one
        result = DatasetRun(
            name, work, Status.ERROR, message=f"internal error: {type(e).__name__}: {e} (this is a bug)"
        )
    result = _timed(result, time.monotonic() - clock)
    _emit(on_event, RunEvent(name, "finish", work, result))
    return result


def _work_of(projection: ChainProjection) -> Work:
    if projection.kind is model.DatasetKind.Derivative:
        return Work.TRANSFORM
    if projection.set_polling_source is not None:
        return Work.INGEST
    return Work.NONE


def _planned_work(workspace: Workspace, name: str) -> Work:
    """What a dataset that did not run would have needed (``none`` if that cannot be told)."""
    try:
        return _work_of(workspace.open(name).projection()) if workspace.exists(name) else Work.NONE
    except OdfprojError:
        return Work.NONE


def _timed(result: DatasetRun, seconds: float) -> DatasetRun:
    return DatasetRun(
        result.dataset,
        result.work,
        result.status,
        result.records_added,
        result.blocks_added,
        seconds,
        result.message,
    )


def _transform(
    workspace: Workspace, name: str, engine: SparkEngine, system_time: datetime | None, head_before: Any
) -> DatasetRun:
    """Update a derivative through the transform coordinator, if this build has one."""
    try:
        from odfproj.transform import coordinator  # type: ignore[attr-defined]

        update = coordinator.update_derivative
    except (ImportError, AttributeError):
        return DatasetRun(name, Work.TRANSFORM, Status.SKIPPED, message="transforms are not available yet")
    outcome = update(workspace, name, engine, system_time or datetime.now(UTC))
    records = _records_of(outcome)
    blocks = _blocks_since(workspace, name, head_before)
    reason = getattr(outcome, "reason", None)
    note = (reason if isinstance(reason, str) and reason else "up to date") if blocks == 0 else ""
    return DatasetRun(
        name, Work.TRANSFORM, Status.SUCCESS, records_added=records, blocks_added=blocks, message=note
    )


def _records_of(outcome: Any) -> int:
    if isinstance(outcome, int) and not isinstance(outcome, bool):
        return outcome
    for attribute in ("records_added", "num_records", "records"):
        value = getattr(outcome, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def _blocks_since(workspace: Workspace, name: str, head_before: Any) -> int:
    count = 0
    for block_hash, _ in workspace.open(name).iter_blocks():
        if block_hash == head_before:
            break
        count += 1
    return count
