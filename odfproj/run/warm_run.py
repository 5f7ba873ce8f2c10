"""``odfproj run`` on the warm engine: the command's request and the server's answer to it.

A cold ``run`` starts a JVM of its own (about 20 s before its first dataset on a 2-core machine) and
plans every Spark query on a cold JIT. Its incremental paths need the analysed plan in-process (py4j),
which Spark Connect does not give, so a warm ``run`` is not a Connect client: the command sends the
whole request over the server's socket (:func:`run_on_warm_engine`), and the server runs
:func:`~odfproj.run.run.run_project` itself (:func:`_serve_run`), the very code a cold run runs, on a
child session of its classic session, and streams the run's events back. The command prints them as a
cold run prints its own: the same lines, summary table, results file and exit code.

A run with nothing that needs Spark never reaches the server: the command plans under the workspace
lock first, without the engine (``run_project``'s ``hand_off``), and when :func:`plan_needs_spark` finds
nothing (no definition change, no file or source to poll, no unread input record, no data test), it goes
on with that plan in its own process: planned once, no JVM, no server started or contacted.

What the run sees is the command's, never the server's:

- **settings**: the target's ``spark.sql.*`` settings on a child session (``newSession()``) of its
  own, so two runs at once never see each other's; a target the server cannot honour (a master that
  is not local, JVM settings, a static SQL setting it lacks) runs cold, and says why with ``--verbose``;
- **environment**: the command's variables, passed with the request (templates read the declared ones;
  secrets stay unrendered, as in a cold run) and used for that run only, never stored or put in the
  server's ``os.environ``;
- **paths**: the project folder and workspace resolved by the command from its working folder, so the
  server's own working folder plays no part; every option (``--select``, ``--threads``, ...) as given.

Ctrl-C: the first asks the run to finish the datasets in progress and start no more (as cold); the
second makes it abandon them at once: its Spark jobs (one job group per run) are cancelled, they are
recorded as cancelled, the results are written, and the workspace lock is released only once their
threads have ended. The server stays up for the next command.

The server's entry point, which answers this request beside the plan's checks and ``sql``, is
:mod:`odfproj.run.warm_server`.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from odfproj.engine.session import SparkSessionHolder, SparkSettings, apply_sql_conf
from odfproj.engine.warm.choice import session_refusal, warm_choice, warm_refusal
from odfproj.engine.warm.client import stream
from odfproj.engine.warm.lifecycle import WarmEngine
from odfproj.engine.warm.server import Channel
from odfproj.errors import OdfprojError
from odfproj.plan.model import Ingest, Plan, Transform
from odfproj.plan.sources import plan_project
from odfproj.project.config import ProjectConfig, load_project
from odfproj.project.loader import PlanRequest
from odfproj.quality.definitions import TestSuite, load_suite
from odfproj.run.run import RunEvent, RunResult, Status, run_project
from odfproj.run.runlog import RUN_THREADS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "WarmRunRefused",
    "WarmRunRequest",
    "needs_spark",
    "plan_needs_spark",
    "run_on_warm_engine",
    "warm_run_refusal",
]

_RUN = "run_project"

#: How often the Spark jobs of an aborted run are cancelled again, until its threads have ended.
_CANCEL_EVERY_S = 0.5


@dataclass(frozen=True)
class WarmRunRequest:
    """Everything a run needs from the command, resolved there (plain values: it is pickled)."""

    project: Path
    """The project folder, resolved from the command's working folder."""
    workspace: Path
    """The workspace folder the command would use (``ODFPROJ_WORKSPACE``, the target's, a remote's cache)."""
    target: str
    master: str
    conf: Mapping[str, str]
    environ: Mapping[str, str]
    """The command's environment, for this run only."""
    variables: Mapping[str, Any] = field(default_factory=dict)
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    changed_since: str | None = None
    threads: int = 1
    lock_timeout: float | None = None
    validate_queries: bool = True
    full_refresh: bool = False
    verbose: bool = False

    @staticmethod
    def of(
        config: ProjectConfig,
        request: PlanRequest,
        settings: SparkSettings,
        *,
        environ: Mapping[str, str] | None = None,
        threads: int = 1,
        lock_timeout: float | None = None,
        validate_queries: bool = True,
        full_refresh: bool = False,
    ) -> WarmRunRequest:
        target = config.target(request.target).name
        return WarmRunRequest(
            project=config.root.resolve(),
            workspace=config.workspace(request.target),
            target=target,
            master=settings.master,
            conf=dict(settings.conf),
            environ=dict(os.environ if environ is None else environ),
            variables=dict(request.vars_override),
            select=tuple(request.select),
            exclude=tuple(request.exclude),
            changed_since=request.changed_since,
            threads=threads,
            lock_timeout=lock_timeout,
            validate_queries=validate_queries,
            full_refresh=full_refresh,
            verbose=settings.verbose,
        )

    def plan_request(self) -> PlanRequest:
        return PlanRequest(
            target=self.target,
            vars_override=MappingProxyType(dict(self.variables)),
            select=self.select,
            exclude=self.exclude,
            changed_since=self.changed_since,
        )

    def settings(self) -> SparkSettings:
        return SparkSettings(self.master, conf=MappingProxyType(dict(self.conf)), verbose=self.verbose)


@dataclass(frozen=True)
class WarmRunRefused:
    """The server cannot honour the target's settings: the command runs cold (``reason`` with -v)."""

    reason: str


# --- the command's side ------------------------------------------------------------------------------


def needs_spark(
    config: ProjectConfig, request: PlanRequest, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether a run of ``request`` may need Spark, judged from a plan made without the engine
    (:func:`plan_needs_spark`); a plan that fails is left to the run, which reports it without Spark."""
    try:
        plan, snapshot = plan_project(config, request, environ=environ)
        suite = load_suite(config, snapshot.manifests.by_name)
    except OdfprojError:
        return False
    return plan_needs_spark(plan, suite)


def plan_needs_spark(plan: Plan, suite: TestSuite) -> bool:
    """Whether running ``plan`` may need Spark: any definition change (a changed query is checked in the
    engine), a file or source to poll, a derivative with unread input records, or a data test to run.

    ``odfproj run`` asks this of the plan it makes under the workspace lock before anything is written
    (``run_project``'s ``hand_off``): a run with nothing to do goes on in the command's process, starting
    no JVM and never contacting the warm engine; any other is handed to the warm engine's server.
    """
    if plan.has_changes:
        return True
    for step in plan.data_steps:
        if suite.of(step.dataset):
            return True
        if isinstance(step, Ingest) and (step.files or step.fetch != "FilesGlob"):
            return True
        if isinstance(step, Transform) and step.has_new_data:
            return True
    return False


def warm_run_refusal(flag: bool | None, settings: SparkSettings) -> str | None:
    """Why this run does not go to the warm engine, or ``None``: it does unless ``--cold``, CI or
    ``ODFPROJ_WARM_ENGINE=off`` say so, or the target is one the server cannot serve. Even then a run
    whose plan needs no Spark stays in the command (:func:`plan_needs_spark`)."""
    choice = warm_choice(flag)
    if not choice.enabled:
        return choice.reason
    return warm_refusal(settings)


def run_on_warm_engine(
    engine: WarmEngine,
    request: WarmRunRequest,
    *,
    on_event: Callable[[RunEvent], None] | None = None,
    cancel: threading.Event | None = None,
) -> RunResult | WarmRunRefused:
    """``run_project`` in the warm server (found or started, and leased while it runs).

    Events arrive on this thread as the run makes them; ``cancel`` and a ``KeyboardInterrupt`` stop it
    as they stop a cold run (see :func:`odfproj.engine.warm.client.stream`). The returned result has no
    ``plan`` (the server keeps it).
    """
    with engine.lease() as info:
        return stream(info, _RUN, request, on_message=on_event or (lambda _: None), cancel=cancel)


# --- the server's side -------------------------------------------------------------------------------


class _RunSession(SparkSessionHolder):
    """A run's child session of the server's, in the run's job group on every thread that asks for it.

    Every Spark job of the run starts on a thread that got the session from here (the run's own
    thread and its workers), so cancelling the group cancels exactly this run's jobs. The session
    is the server's to keep: stopping it would stop the server's SparkContext, so :meth:`stop` does not.
    """

    def __init__(self, settings: SparkSettings, session: SparkSession, group: str) -> None:
        super().__init__(settings, session)
        self.group = group

    def get(self) -> SparkSession:
        session = super().get()
        session.sparkContext.setJobGroup(self.group, "odfproj run", interruptOnCancel=True)
        return session

    def stop(self) -> None:
        pass

    def cancel_jobs(self) -> None:
        session = super().get()
        session.sparkContext.cancelJobGroup(self.group)


def _serve_run(
    session: SparkSession, channel: Channel, request: WarmRunRequest
) -> RunResult | WarmRunRefused:
    """In the server: ``request`` run on a child session with the target's settings, events streamed."""
    # Named as a run's thread, so that another run's log never takes this one's records (run.runlog).
    threading.current_thread().name = f"{RUN_THREADS}-request-{uuid.uuid4().hex[:8]}"
    settings = request.settings()
    refused = session_refusal(session, settings)
    if refused is not None:
        return WarmRunRefused(refused)
    child = session.newSession()
    apply_sql_conf(child, settings.effective_conf())
    holder = _RunSession(settings, child, f"odfproj-run-{uuid.uuid4().hex}")
    config = _pinned(load_project(request.project), request.target, request.workspace)
    ended = threading.Event()
    canceller = threading.Thread(
        target=_cancel_when_aborted, args=(channel, holder, ended), daemon=True, name="warm-run-cancel"
    )
    canceller.start()
    try:
        result = run_project(
            config,
            request.plan_request(),
            holder=holder,
            threads=request.threads,
            on_event=_Relay(channel).send,
            environ=MappingProxyType(dict(request.environ)),
            lock_timeout=request.lock_timeout,
            validate_queries=request.validate_queries,
            cancel=channel.stop,
            full_refresh=request.full_refresh,
            abort=channel.abort,
        )
    finally:
        ended.set()
    return replace(result, plan=None)


def _cancel_when_aborted(channel: Channel, holder: _RunSession, ended: threading.Event) -> None:
    """Once the caller aborts, cancel the run's Spark jobs, again and again until the run has returned
    (a cancelled group only cancels the jobs running at that moment)."""
    while not ended.is_set():
        if channel.abort.wait(_CANCEL_EVERY_S) and not ended.is_set():
            try:
                holder.cancel_jobs()
            except Exception:  # the JVM is going away: the run ends anyway
                return


class _Relay:
    """The run's events to the command, without the plan's step (the command does not show it).

    After an abort, a dataset already reported cancelled stays so: its thread, ending later with its
    cancelled Spark job's error, would otherwise report it again.
    """

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()

    def send(self, event: RunEvent) -> None:
        with self._lock:
            if event.dataset in self._cancelled:
                return
            if event.result is not None and event.result.status is Status.CANCELLED:
                self._cancelled.add(event.dataset)
        self.channel.send(replace(event, step=None))


def _pinned(config: ProjectConfig, target: str, workspace: Path) -> ProjectConfig:
    """``config`` with its workspace fixed to the one the command resolved, whatever the server's
    environment or a remote workspace setting would say."""
    chosen = replace(config.target(target), storage_root=workspace)
    targets = MappingProxyType({**config.targets, chosen.name: chosen})
    return replace(config, workspace_setting=str(workspace), targets=targets)


def streams() -> dict[str, Callable[..., Any]]:
    """The streaming requests of the warm server."""
    return {_RUN: _serve_run}
