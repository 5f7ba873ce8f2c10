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
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odfproj import __version__
from odfproj.engine.session import LARGE_WORK_BYTES, SparkSessionHolder
from odfproj.errors import OdfprojError
from odfproj.odf.identity import DatasetId
from odfproj.odf.timestamps import format_rfc3339
from odfproj.plan.diff import ChainView
from odfproj.plan.model import Action, DataStep, Ingest, Plan, Transform
from odfproj.plan.sources import ProjectSnapshot, plan_project
from odfproj.project.config import ProjectConfig
from odfproj.project.loader import PlanRequest
from odfproj.quality.definitions import DataTest, TestSuite, load_suite
from odfproj.run.apply import ApplyResult, apply_plan, check_plan
from odfproj.run.environments import computed_here, ensure_environment
from odfproj.run.queue import ReadyQueue
from odfproj.run.runlog import RUN_THREADS, log_path, run_log
from odfproj.run.uptodate import Heads, UpToDate
from odfproj.storage.fsutil import replace_atomic
from odfproj.storage.update_record import describe_path
from odfproj.storage.workspace import Workspace

if TYPE_CHECKING:
    from odfproj.plan.queries import DerivativeCheck

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


class HandedOff(Exception):
    """``hand_off`` took the run: its plan needs Spark. Nothing was written (the log file is removed)."""


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
    hand_off: Callable[[Plan, TestSuite], bool] | None = None,
) -> RunResult:
    """Apply the selected definitions, then ingest/transform every selected dataset (see module doc).

    Changed queries are validated while planning (``validate_queries``), so a query that cannot run
    or breaks Schema Evolution stops the run before its SetTransform is appended. Setting ``cancel``
    (from a signal handler, another thread) stops the run between datasets. ``full_refresh`` makes
    every selected derivative recompute its query over its inputs' whole states (the full path), even
    a stateless or grouped one that would read only the new records. ``abort`` set acts as a second
    Ctrl-C that returns (see the module doc).

    ``hand_off`` is asked, once the plan is made (without the engine) and before anything is written,
    whether the run needs Spark somewhere else (``run.warm_run``: the warm engine's server): if it says
    so, :class:`HandedOff` is raised and the caller runs it there; otherwise this run goes on with that
    plan, so a run with nothing to do is planned once and starts no engine.
    """
    started = datetime.now(UTC)
    clock = time.monotonic()
    checker = _EngineChecks(holder) if validate_queries else None
    ensure_environment(config, request.target)  # --env: made on the first run, production untouched
    workspace = Workspace(config.workspace(request.target), odf_version=config.odf_version)
    stop = cancel or threading.Event()
    log_file = log_path(workspace.root, started)
    workers = f"{RUN_THREADS}-{uuid.uuid4().hex[:8]}"  # this run's, in its log (see run_log)
    lock = workspace.lock(purpose="odfproj run", timeout=lock_timeout)
    with lock, _removed_if_handed_off(log_file), run_log(log_file, workers) as log:
        log.info(
            "odfproj %s: project %s, target %s", __version__, config.name, config.target(request.target).name
        )
        # The plan's query checks may start the JVM before the plan says what the run reads: then the data
        # the workspace holds sizes it (a run that changes queries over large data likely reads it).
        holder.size_work_by(lambda: workspace.stored_data_bytes(LARGE_WORK_BYTES))
        # Planned under the lock, so no other apply or run can move a chain between plan and apply.
        # A run that may be handed off is planned without the engine's checks (they would start one).
        checks = checker if hand_off is None else None
        plan, snapshot = plan_project(config, request, environ=environ, query_checker=checks)
        suite = load_suite(config, snapshot.manifests.by_name)
        if hand_off is not None:
            if hand_off(plan, suite):
                raise HandedOff
            if plan.has_changes and checker is not None:  # kept here: plan again, with the checks
                plan, snapshot = plan_project(config, request, environ=environ, query_checker=checker)
        for warning in plan.warnings:
            log.info("warning: %s", warning)
        environ = dict(os.environ) if environ is None else environ

        def report(event: RunEvent) -> None:
            line = event.line()
            if line is not None:
                log.info("%s", line)
            _emit(on_event, event)

        suite.raise_for_problems()  # wrong data test files stop the run before anything is written
        # Refusals stop the run before anything is written (apply_plan checks the plan itself).
        applied: ApplyResult | None = None
        if plan.has_changes:
            applied = apply_plan(plan, workspace, cancel=stop)
            log.info("%s", applied.summary())
        else:
            check_plan(plan, workspace)
        # The plan read every chain's id: derivatives resolve their inputs from that, not by a scan.
        workspace.remember_ids(
            {DatasetId.from_did_str(v.dataset_id): name for name, v in snapshot.state.views.items()}
        )
        # In an environment only forked and created datasets are computed; the rest are production's,
        # read at their pinned heads, and are not part of this run.
        selected = tuple(s.dataset for s in plan.definitions if s.action is not Action.ORPHAN)
        order = tuple(n for n in selected if computed_here(workspace, n))
        if len(order) < len(selected):
            log.info("%d dataset(s) read from production at their pinned heads", len(selected) - len(order))
        computed = set(order)
        steps = {step.dataset: step for step in plan.data_steps if step.dataset in computed}
        upstream = {n: set(snapshot.graph.upstream(n)) & set(steps) for n in steps}
        runner = _StepRunner(
            workspace,
            holder,
            config.root,
            system_time,
            environ,
            report,
            full_refresh,
            _Chains.of(plan, snapshot, workspace.root),
        )

        def work_bytes() -> int:
            """Asked when a step starts the JVM: a run that reads large input gets the JIT for long work."""
            found = runner.pending_input_bytes(steps.values())
            if found >= LARGE_WORK_BYTES:
                log.info("%d MiB or more of input to read: the JVM compiles for long work", found >> 20)
            return found

        holder.size_work_by(work_bytes)

        def work_on(name: str) -> DatasetRun:
            return _after_update(runner.run(steps[name]), suite.of(name), workspace, holder, report)

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
            runner.chains.uptodate.save()
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


@contextmanager
def _removed_if_handed_off(log_file: Path) -> Iterator[None]:
    """A handed-off run ran nothing here: its log is the one of the process that runs it."""
    try:
        yield
    except HandedOff:
        log_file.unlink(missing_ok=True)
        raise


class _EngineChecks:
    """The plan's query checks on this run's engine (``plan.engine_checks``), loaded on the first check:
    a plan without a created or changed query loads no engine code and starts no engine."""

    def __init__(self, holder: SparkSessionHolder) -> None:
        self._holder = holder
        self._checks: Any = None

    def _loaded(self) -> Any:
        if self._checks is None:
            from odfproj.engine.spark import SparkEngine
            from odfproj.plan.engine_checks import query_checker

            self._checks = query_checker(SparkEngine(self._holder))
        return self._checks

    def __call__(self, check: DerivativeCheck) -> Any:
        return self._loaded()(check)

    def source_schema(self, dataset: str, source: Any, vocab: Any) -> Any:
        return self._loaded().source_schema(dataset, source, vocab)


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
    """A dataset's view of the shared holder: calls ``announce`` before waiting for the JVM to start,
    and remembers whether the dataset asked for Spark at all (``asked``)."""

    def __init__(self, holder: SparkSessionHolder, announce: Callable[[], None]) -> None:
        self._holder = holder
        self._announce = announce
        self.settings = holder.settings
        self.asked = False

    @property
    def created(self) -> bool:
        return self._holder.created

    def get(self) -> Any:
        self.asked = True
        if not self._holder.created:
            self._announce()
        return self._holder.get()

    def stop(self) -> None:
        self._holder.stop()


#: The fields of an update's result that ``run/uptodate.py`` records (the rest are those of any no-op).
_RECORDED = ("message", "path", "why_full", "mode", "hint")

#: What a root whose source has nothing new reports (as ``ingest_polling``'s empty result does).
UP_TO_DATE = "up to date"


@dataclass
class _Chains:
    """The chain heads this run knows without reading a chain: the plan's (read under this run's lock),
    except for the datasets this run has moved (``moved``, lower-case names), and the record of what
    earlier runs found up to date at such heads (:mod:`odfproj.run.uptodate`)."""

    views: Mapping[str, ChainView]
    by_id: Mapping[str, str]
    moved: set[str]
    uptodate: UpToDate
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def of(plan: Plan, snapshot: ProjectSnapshot, workspace: Path) -> _Chains:
        views = snapshot.state.views
        moved = {s.dataset.lower() for s in plan.definitions if s.has_changes}
        moved.update(n.lower() for r in plan.renames for n in (r.source, r.dataset))
        return _Chains(
            views,
            {view.dataset_id: name for name, view in views.items()},
            moved,
            UpToDate.load(workspace),
        )

    def heads(self, step: Transform) -> Heads | None:
        """The derivative's and its inputs' heads, or None when one of them is not known unmoved."""
        with self.lock:
            own = step.dataset.lower()
            if own in self.moved or own not in self.views:
                return None
            inputs: dict[str, str] = {}
            for item in step.inputs:
                name = self.by_id.get(item.dataset_id or "")
                if name is None or name in self.moved:
                    return None
                inputs[self.views[name].dataset_id] = self.views[name].head
            return Heads.of(self.views[own].head, inputs)

    def moving(self, dataset: str) -> None:
        """``dataset``'s step ran: its chain may have moved, so the plan's head of it is no longer known."""
        with self.lock:
            self.moved.add(dataset.lower())


class _StepRunner:
    """Executes the data steps of one run; what they share (engine, environment, chains) is kept here.

    A step whose dataset is known to have nothing to do is answered without the ingest or transform code
    and without an engine: a root whose source :func:`~odfproj.ingest.fetch.nothing_new` clears, a
    derivative that an earlier run found up to date at the heads it and its inputs have now. Its result
    is the one the executor gives (the same message, lines and events); only faster.
    """

    def __init__(
        self,
        workspace: Workspace,
        holder: SparkSessionHolder,
        project_root: Path,
        system_time: datetime | None,
        environ: Mapping[str, str],
        on_event: Callable[[RunEvent], None] | None,
        full_refresh: bool,
        chains: _Chains,
    ) -> None:
        self.workspace = workspace
        self.holder = holder
        self.project_root = project_root
        self.system_time = system_time
        self.environ = environ
        self.on_event = on_event
        self.full_refresh = full_refresh
        self.chains = chains

    def run(self, step: DataStep) -> DatasetRun:
        """Execute one data step of the plan; its failure is its result, never an exception."""
        clock = time.monotonic()
        name, work = step.dataset, _work_of(step)
        try:
            _emit(self.on_event, RunEvent(name, "start", work, step=step))
            result = self._known(step) or self._execute(step)
        except OdfprojError as e:
            self.chains.moving(name)
            result = DatasetRun(name, work, Status.ERROR, message=str(e))
        except Exception as e:  # a bug must not stop the other datasets; it is reported as one
            self.chains.moving(name)
            result = DatasetRun(
                name, work, Status.ERROR, message=f"internal error: {type(e).__name__}: {e} (this is a bug)"
            )
        result = replace(result, seconds=time.monotonic() - clock)
        _emit(self.on_event, RunEvent(name, "finish", work, result))
        return result

    def _known(self, step: DataStep) -> DatasetRun | None:
        """The step's result when it is known to have nothing to do, without its executor; else None."""
        name = step.dataset
        if isinstance(step, Ingest):
            view = self.chains.views.get(name.lower())
            if self._source_has_nothing_new(name, view.ingested_files if view is not None else None):
                return DatasetRun(name, Work.INGEST, Status.SUCCESS, message=UP_TO_DATE)
            return None
        heads = self.chains.heads(step) if isinstance(step, Transform) and not self.full_refresh else None
        known = self.chains.uptodate.outcome(name, heads) if heads is not None else None
        if known is None or known.keys() != set(_RECORDED):
            return None
        return DatasetRun(name, Work.TRANSFORM, Status.SUCCESS, **known)

    def _source_has_nothing_new(self, name: str, ingested: Collection[str] | None) -> bool:
        from odfproj.ingest.fetch import nothing_new

        polling = self._polling(name, ingested)
        return polling is not None and nothing_new(**polling)

    def pending_input_bytes(self, steps: Iterable[DataStep]) -> int:
        """The bytes of input ``steps`` would read now: the local files an ``Ingest`` would ingest (HTTP
        and container sources count nothing) and the data files a ``Transform``'s inputs added since it
        last consumed them. The size of the work the engine is started for
        (``SparkSessionHolder.size_work_by``); counting stops once it is large. A step whose chain or
        files cannot be read counts nothing here: its own execution reports why."""
        total = 0
        for step in steps:
            try:
                total += self._ingest_bytes(step) if isinstance(step, Ingest) else self._transform_bytes(step)
            except (OdfprojError, OSError):
                continue
            if total >= LARGE_WORK_BYTES:
                break
        return total

    def _ingest_bytes(self, step: Ingest) -> int:
        from odfproj.ingest.fetch import pending_bytes

        view = self.chains.views.get(step.dataset.lower())
        polling = self._polling(step.dataset, view.ingested_files if view is not None else None)
        return pending_bytes(**polling) if polling is not None else 0

    def _transform_bytes(self, step: DataStep) -> int:
        """What a derivative's inputs added since it consumed them (all of their data on its first run).
        The roots ingesting in this run add theirs later: their files are counted as theirs."""
        from odfproj.storage.projection import InputPosition
        from odfproj.transform.inputs import resolve_inputs

        projection = self.workspace.open(step.dataset).projection()
        if projection.set_transform is None:
            return 0
        inputs = resolve_inputs(self.workspace, step.dataset, projection.set_transform.inputs)
        total = 0
        for _, dataset_id, dataset in inputs:
            consumed = projection.inputs.get(dataset_id, InputPosition()).new_block_hash
            total += dataset.data_bytes_since(consumed.to_multibase() if consumed is not None else None)
        return total

    def _polling(self, name: str, ingested: Collection[str] | None) -> dict[str, Any] | None:
        """The arguments of a listing of ``name``'s polling source (``ingest.fetch``); None without one."""
        from odfproj.ingest.fetch import POLLING_SOURCE_NAME

        projection = self.workspace.open(name).projection()
        source = projection.set_polling_source
        if source is None:
            return None
        return {
            "step": source.fetch,
            "dataset": name,
            "source": POLLING_SOURCE_NAME,
            "prev_state": projection.source_states.get(POLLING_SOURCE_NAME),
            "project_root": self.project_root,
            "environ": self.environ,
            "ingested": ingested,
        }

    def _execute(self, step: DataStep) -> DatasetRun:
        """The step by its executor (``ingest_polling``, ``update_derivative``), on an engine started
        only if the step asks for one.

        An ``Ingest`` passes the files the plan read from the chain as ingested (the chain cannot have
        moved since, under this run's lock), so the chain is walked once.
        """
        from odfproj.engine.spark import SparkEngine

        name, work = step.dataset, _work_of(step)
        heads = self.chains.heads(step) if isinstance(step, Transform) else None
        announcing = _AnnouncingHolder(
            self.holder, lambda: _emit(self.on_event, RunEvent(name, "spark", work))
        )
        engine = SparkEngine(announcing)  # type: ignore[arg-type]
        dataset = self.workspace.open(name)
        if isinstance(step, Ingest):
            from odfproj.ingest.pipeline import ingest_polling

            view = self.chains.views.get(name.lower())
            polled = ingest_polling(
                dataset,
                engine,
                project_root=self.project_root,
                system_time=self.system_time,
                environ=self.environ,
                ingested=view.ingested_files if view is not None else None,
            )
            if not polled.up_to_date:
                self.chains.moving(name)
            return DatasetRun(
                name,
                work,
                Status.SUCCESS,
                records_added=polled.records_added,
                blocks_added=polled.blocks_added,
                message=UP_TO_DATE if polled.up_to_date else "",
            )
        from odfproj.transform.coordinator import update_derivative

        head_before = dataset.head()
        outcome = update_derivative(
            self.workspace,
            name,
            engine,
            self.system_time or datetime.now(UTC),
            full_refresh=self.full_refresh,
        )
        blocks = _blocks_since(self.workspace, name, head_before)
        # The path the query took (and why full, and what would make it incremental), when it ran.
        path = describe_path(outcome.mode, outcome.why_full, outcome.query_mode, outcome.hint)
        note = (outcome.reason or UP_TO_DATE) if blocks == 0 else path
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
        if heads is not None and blocks == 0 and outcome.records == 0 and not announcing.asked:
            # Decided from the chains alone: at these heads the update finds the same nothing again.
            self.chains.uptodate.remember(name, heads, {k: getattr(result, k) for k in _RECORDED})
        else:
            self.chains.uptodate.forget(name)
        if blocks:
            self.chains.moving(name)
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
    from odfproj.engine.spark import SparkEngine
    from odfproj.quality.execute import blocking, run_tests

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
