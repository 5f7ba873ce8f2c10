"""``odfproj watch``: re-plan (and optionally apply and run) whenever a manifest, macro or odfproj.yaml changes.

The pieces, each small enough to test on its own:

- :class:`Watcher` holds no threads. ``changed_files`` turns raw file-system paths into the project files
  whose *content* changed (editors touch, rename and re-create files on every save; none of that should
  cost a plan), and ``cycle`` re-plans through exactly the code path of ``odfproj plan``
  (:func:`~odfproj.plan.sources.plan_project`), so what watch shows can never differ from what plan
  would show. With ``apply`` it then runs the changed datasets and their downstream through
  :func:`~odfproj.run.run.run_project`, reusing one ``SparkSessionHolder`` for every cycle: the JVM
  starts on the first data work and stays warm.
- :class:`WarmQueryChecks` checks changed queries without ``--apply``: ``plan``'s own checks (the
  analysis sandbox's settings and SQL allowlist), answered by the warm engine's server, which is found
  or started in the background when watching starts and leased until it ends. A cycle never waits for
  a server that is starting: it plans without the checks, says so, and is planned again once the
  server is up. Answers are remembered, so a save that changes no query asks the server nothing.
- :func:`watch` is the loop: a watchdog observer feeds paths into a queue, bursts are coalesced until
  the files have been quiet for ``debounce`` seconds, and each burst becomes one cycle handed to
  ``on_cycle``. It stops when ``stop_event`` is set (or on KeyboardInterrupt), always stopping and
  joining the observer.

Only the folders manifests can live in, ``macros/`` and the project folder itself (non-recursively,
for odfproj.yaml) are observed: never the workspace (a run writes thousands of files there) nor
``.git`` or other hidden folders.

A cycle never raises for what is in the files: a broken manifest, odfproj.yaml or template is
reported as a cycle with a one-line ``error`` and the next good edit plans again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar, cast

import pyarrow as pa
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.session import SparkSessionHolder
from odfproj.engine.spark import SparkEngine
from odfproj.engine.warm.client import WarmSessionHolder, call
from odfproj.engine.warm.lifecycle import PING_TIMEOUT_S, WarmEngine
from odfproj.engine.warm.protocol import STATE_FILE
from odfproj.errors import EngineError, ManifestError, OdfprojError
from odfproj.plan.engine_checks import query_checker
from odfproj.plan.model import Plan
from odfproj.plan.queries import QueryChecker
from odfproj.plan.sources import ProjectSnapshot, plan_project
from odfproj.project.config import CONFIG_FILE, ProjectConfig, load_project
from odfproj.project.loader import PlanRequest
from odfproj.run.environments import planned_config
from odfproj.run.run import RunEvent, RunResult, run_project
from odfproj.transform.modes import CheckedQuery

__all__ = [
    "DEBOUNCE_SECONDS",
    "MAX_DELAY_SECONDS",
    "READY_GRACE_SECONDS",
    "RECHECK_REASON",
    "ChecksNotReady",
    "WarmQueryChecks",
    "WatchCycle",
    "WatchError",
    "WatchedDir",
    "Watcher",
    "affected_datasets",
    "one_line",
    "watch",
]

#: Quiet period after the last event before re-planning: long enough to coalesce an editor's
#: write-rename-delete save or a ``git checkout``, short enough to feel immediate.
DEBOUNCE_SECONDS = 0.2
#: Upper bound on how long a continuous stream of events may postpone a cycle.
MAX_DELAY_SECONDS = 2.0
#: How often the idle loop looks at ``stop_event``.
_POLL_SECONDS = 0.1
#: How long a cycle's first query check waits for the warm engine's lease before planning without it:
#: plenty to find a running server, far too short to wait for one to start (20 to 70 s).
READY_GRACE_SECONDS = 1.0
#: The header of the cycle that plans again once the warm engine is up (see :class:`WarmQueryChecks`).
RECHECK_REASON = "planned again with the query checks"
#: Query checks remembered by one watch; each answer depends on nothing but what was asked.
_REMEMBERED_CHECKS = 256

_Answer = TypeVar("_Answer")

#: Only events that can change a file's content, or move a folder of files. Opened and
#: closed-without-write events are left out on purpose: every plan reads every manifest, and those
#: reads must not trigger the next plan. A folder's "modified" event only repeats its files' events.
_EVENT_TYPES: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]


class WatchError(OdfprojError):
    """The project's folders cannot be observed (e.g. the inotify watch limit is reached)."""


@dataclass(frozen=True)
class WatchedDir:
    """A folder given to the observer; ``recursive`` folders are observed with all their sub-folders."""

    path: Path
    recursive: bool


@dataclass(frozen=True)
class WatchCycle:
    """One re-plan: the files that caused it and the plan (and run) it produced, or why it failed.

    ``number`` is 0 for the plan made at start. ``error`` is one line, for the user; when it is set,
    ``plan`` and ``run`` are whatever was done before the failure (usually nothing).
    """

    number: int
    at: datetime
    changed: tuple[str, ...]
    seconds: float
    plan: Plan | None = None
    run: RunResult | None = None
    error: str | None = None
    #: Why the cycle was planned although no file changed (:data:`RECHECK_REASON`).
    reason: str | None = None
    #: A line to show under the plan: why its changed queries were not checked this time.
    notice: str | None = None

    @property
    def initial(self) -> bool:
        return self.number == 0

    @property
    def refused(self) -> bool:
        """The plan has changes ODF's evolution rules refuse; with ``apply`` nothing was applied."""
        return self.plan is not None and self.plan.has_refusals

    @property
    def ok(self) -> bool:
        return self.error is None and not self.refused and (self.run is None or self.run.ok)


class ChecksNotReady(Exception):
    """A query check asked while the warm engine is not (yet, or no longer) there: the cycle plans again
    without checks. ``notice`` is the line to show under that plan (``None``: it was said already)."""

    def __init__(self, notice: str | None) -> None:
        super().__init__(notice or "query checks are not available")
        self.notice = notice


class WarmQueryChecks:
    """``watch``'s query checks on the warm engine, a ``plan.queries.QueryChecker``.

    ``checker`` is ``plan``'s warm checker (the analysis sandbox's settings and SQL allowlist, run in the
    server: nothing a manifest names is executed) and ``holder`` the session holder it asks, whose lease
    is this watch's: :meth:`start` finds or starts the server on a thread of its own and leases it until
    :meth:`close`. The lease is held while watching, not taken per check, so that the idle timeout never
    stops the server under an editor that saves every few minutes (the next save would wait for a JVM
    start); a watch that ends, Ctrl-C included, releases it and the server stops once idle.

    A check never waits for a starting server beyond ``grace`` seconds: it raises :class:`ChecksNotReady`
    and the cycle plans without checks; :meth:`recheck_due` then asks for one more cycle once the
    server is up. A server that could not start is said once (:meth:`take_notices`) and watching goes
    on without checks; one that goes away (``engine stop``, a crash) is started again on the next check.
    Answers, refusals included, are remembered: a save that changes no query asks the server nothing.
    """

    def __init__(
        self, checker: QueryChecker, holder: WarmSessionHolder, *, grace: float = READY_GRACE_SECONDS
    ) -> None:
        self.checker = checker
        self.holder = holder
        self.grace = grace
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: str | None = None
        self._missed = False
        self._notices: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._answers: OrderedDict[bytes, tuple[bool, object]] = OrderedDict()

    # -- the server --

    def start(self, *, again: bool = False) -> None:
        """Find or start the server and lease it, on a thread of its own; returns at once.

        With no server recorded at all, "starting" is said before this returns, so that it comes
        before the first plan; a record is looked at (and its server pinged) on the thread.
        """
        self._ready.clear()
        engine = self.holder.engine
        starting = isinstance(engine, WarmEngine) and not (engine.directory / STATE_FILE).exists()
        if starting:
            self._say_starting(again)
        self._thread = threading.Thread(
            target=self._lease, args=(again, starting), daemon=True, name="watch-warm-engine"
        )
        self._thread.start()

    def _say_starting(self, again: bool) -> None:
        self._notices.put(
            "the warm engine went away: starting it again for query checks..."
            if again
            else "starting the warm engine for query checks..."
        )

    def _lease(self, again: bool, starting: bool) -> None:
        clock = time.monotonic()
        try:
            engine = self.holder.engine
            if not starting and isinstance(engine, WarmEngine) and engine.status() is None:
                starting = True  # a stale record: removed by status()
                self._say_starting(again)
            self.holder.server()
        except Exception as e:  # any failure: said once, and watching goes on without checks
            cause = one_line(e) if isinstance(e, OdfprojError) else f"{type(e).__name__}: {e}"
            self._failure = cause
            self._notices.put(f"queries are not checked while watching: {cause}; run checks them")
        else:
            if starting:
                seconds = time.monotonic() - clock
                self._notices.put(
                    f"the warm engine is up ({seconds:.0f}s): changed queries are checked on save"
                )
        finally:
            self._ready.set()

    def close(self) -> None:
        """Release the server, which stops once idle. A start still under way is not waited for: its
        locks end with this process, and the server it starts stops once idle."""
        if self._thread is not None and self._thread.is_alive():
            return
        self.holder.stop()

    # -- what the loop asks --

    def available(self) -> bool:
        """Whether checks can be asked for (the server is up, or still starting)."""
        return self._failure is None

    def cycle_starts(self) -> None:
        """A cycle with the checks begins: once the server is up, it checks whatever an earlier one missed."""
        if self._ready.is_set():
            self._missed = False

    def recheck_due(self) -> bool:
        """Once the server is up: whether a cycle planned without checks while it was starting."""
        if not (self._missed and self._ready.is_set()):
            return False
        self._missed = False
        return self._failure is None

    def take_notices(self) -> list[str]:
        """What the server's start said since the last call (started, up, could not start)."""
        out = []
        while True:
            try:
                out.append(self._notices.get_nowait())
            except queue.Empty:
                return out

    # -- the QueryChecker: each check forwarded as it was called (its parameters are the protocol's) --

    def __call__(self, *arguments: Any, **keywords: Any) -> CheckedQuery:
        key = ("derivative", arguments, keywords)
        return self._ask(key, lambda: self.checker(*arguments, **keywords))

    def source_schema(self, *arguments: Any, **keywords: Any) -> pa.Schema | None:
        key = ("source", arguments, keywords)
        return self._ask(key, lambda: self.checker.source_schema(*arguments, **keywords))

    def _ask(self, key: tuple[object, ...], ask: Callable[[], _Answer]) -> _Answer:
        try:
            memo: bytes | None = pickle.dumps(key)  # what is sent to the server anyway
        except Exception:  # pragma: no cover - every argument pickles (it crosses the socket)
            memo = None
        if memo is not None and memo in self._answers:
            self._answers.move_to_end(memo)
            ok, value = self._answers[memo]
            if ok:
                return cast(_Answer, value)
            assert isinstance(value, InvalidQueryError)
            raise value.with_traceback(None)
        if not self._ready.wait(self.grace):
            self._missed = True
            raise ChecksNotReady(
                "queries not checked yet: the warm engine is starting; they are checked once it is up"
            )
        if self._failure is not None:
            raise ChecksNotReady(None)
        try:
            value = ask()
        except InvalidQueryError as e:
            self._remember(memo, (False, e))
            raise
        except (EngineError, OSError, EOFError):
            if self._server_answers():
                raise  # the check's own failure: the cycle's error
            self.holder.stop()
            self._missed = True
            self.start(again=True)
            raise ChecksNotReady(
                "queries not checked: the warm engine went away; they are checked once it is up again"
            ) from None
        self._remember(memo, (True, value))
        return value

    def _remember(self, memo: bytes | None, answer: tuple[bool, object]) -> None:
        if memo is None:
            return
        self._answers[memo] = answer
        while len(self._answers) > _REMEMBERED_CHECKS:
            self._answers.popitem(last=False)

    def _server_answers(self) -> bool:
        try:
            return call(self.holder.server(), "ping", timeout=PING_TIMEOUT_S) == "pong"
        except Exception:
            return False


class Watcher:
    """Re-plans a project on demand and decides which file-system changes deserve a re-plan.

    Holds the last good ``ProjectConfig`` (odfproj.yaml is read again on every cycle, so a change of
    vars, globs or targets takes effect at once) and a digest of every project file seen, so that an
    event which leaves a file's bytes as they were (a ``touch``, an editor's backup dance, a
    checkout of the same content) causes no cycle.
    """

    def __init__(
        self,
        config: ProjectConfig,
        request: PlanRequest,
        *,
        apply: bool = False,
        holder: SparkSessionHolder | None = None,
        threads: int = 1,
        on_run_event: Callable[[RunEvent], None] | None = None,
        on_planned: Callable[[WatchCycle], None] | None = None,
        environ: Mapping[str, str] | None = None,
        debug: bool = False,
        cancel: threading.Event | None = None,
        query_checks: WarmQueryChecks | None = None,
    ) -> None:
        """``holder`` is required with ``apply`` and kept for every cycle (the session stays warm).

        ``query_checks`` (without ``apply`` only) checks changed queries on the warm engine; without it
        they are shown as not validated.

        With ``apply``, ``on_planned`` receives the cycle as planned (no run yet) just before it is
        applied and run, so that the plan can be shown before the run's progress (``on_run_event``);
        the finished cycle is still what :meth:`cycle` returns.

        ``cancel`` (usually the loop's ``stop_event``) stops a run in progress between datasets.

        ``debug`` re-raises unexpected exceptions (bugs) so that ``--debug`` shows their traceback;
        otherwise they are reported as a cycle's error and watching goes on.
        """
        if apply and holder is None:
            raise ValueError("apply=True needs a SparkSessionHolder (kept across cycles)")
        if apply and query_checks is not None:
            raise ValueError("with apply=True queries are checked on the kept session, not query_checks")
        self.config = config
        #: ``--env``: kept across cycles, each of which re-reads odfproj.yaml.
        self.environment = config.environment
        self.request = request
        self.apply = apply
        self.holder = holder
        self.threads = max(1, threads)
        self.on_run_event = on_run_event
        self.on_planned = on_planned
        self.environ = environ
        self.debug = debug
        self.cancel = cancel
        # With --apply, queries are checked on the kept session before anything is applied: the JVM
        # that runs them, which run_project checks them on again. Without it, this process starts no
        # JVM: the warm engine's server answers the checks (query_checks), or none are made and changed
        # queries are shown as not validated.
        self._checker: QueryChecker | None = (
            query_checker(SparkEngine(holder)) if apply and holder is not None else None
        )
        self.query_checks = query_checks
        self._cycles = 0
        self._digests: dict[Path, bytes | None] = {}
        self._remember(self._project_files())

    @property
    def root(self) -> Path:
        return self.config.root

    def manifest_count(self) -> int:
        return len(self.config.manifest_files())

    # -- which folders to observe ------------------------------------------------------------------

    def watched_dirs(self) -> frozenset[WatchedDir]:
        """The folders to observe now; recomputed after every burst (folders come and go, globs change).

        The project folder is observed non-recursively (odfproj.yaml, top-level manifests, and the
        creation of a folder a glob names). For a glob such as ``datasets/**/*.yaml`` its fixed prefix
        ``datasets`` is observed recursively, or its nearest existing ancestor non-recursively until
        it exists. A glob rooted at the project folder (``**/*.yaml``) is served by observing each
        visible sub-folder recursively, never the workspace or hidden folders.
        """
        root = self.root
        dirs = {WatchedDir(root, False)}
        if self.config.macro_dir.is_dir():
            dirs.add(WatchedDir(self.config.macro_dir, True))
        for pattern in self.config.manifest_globs:
            base, deep = _glob_base(pattern)
            if base == PurePosixPath("."):
                if deep:
                    dirs.update(WatchedDir(child, True) for child in self._visible_children())
                continue
            folder = root / base
            if folder.is_dir():
                if not self._excluded(folder):
                    dirs.add(WatchedDir(folder, True))
                continue
            for ancestor in folder.parents:
                if ancestor == root or root not in ancestor.parents:
                    break
                if ancestor.is_dir():
                    dirs.add(WatchedDir(ancestor, False))
                    break
        return frozenset(dirs)

    def _visible_children(self) -> list[Path]:
        try:
            children = sorted(self.root.iterdir())
        except OSError:
            return []
        return [c for c in children if c.is_dir() and not c.name.startswith(".") and not self._excluded(c)]

    def _excluded(self, path: Path) -> bool:
        """Inside the workspace or ``.git``: files there are never project files, whatever the globs."""
        resolved = path.resolve()
        return any(resolved == d or d in resolved.parents for d in (self.workspace_dir(), self._git_dir()))

    def _git_dir(self) -> Path:
        return (self.root / ".git").resolve()

    def workspace_dir(self) -> Path:
        """The workspace of the requested target (the default's while the target is unknown)."""
        try:
            return self.config.workspace(self.request.target)
        except OdfprojError:  # an unknown target is reported by the cycle, not here
            return self.config.workspace()

    def ignored_prefixes(self) -> tuple[str, ...]:
        """Path prefixes whose events are dropped at once, before they reach the loop's queue."""
        return (str(self.workspace_dir()) + os.sep, str(self._git_dir()) + os.sep)

    # -- which changes count -----------------------------------------------------------------------

    def changed_files(self, paths: Iterable[Path]) -> tuple[Path, ...]:
        """The project files among ``paths`` (or under a folder among them) whose bytes changed.

        A project file is odfproj.yaml, a macro file, or a manifest matched by the project's globs
        (now or at the last look, so deletions and renames away count). Files in the workspace or
        ``.git`` never count; neither do editors' temporary and backup files, which the globs do
        not match. A folder among ``paths`` (deleted or renamed) stands for the known files under it.
        """
        candidates = {Path(p) for p in paths}
        if not candidates:
            return ()
        current = set(self._project_files())
        known = set(self._digests) | current
        check: set[Path] = set()
        for path in candidates:
            if path in known:
                check.add(path)
            check.update(k for k in known if path in k.parents)
        changed = []
        for path in sorted(check):
            if self._excluded(path):
                continue
            digest = _digest(path)
            if self._digests.get(path) != digest:
                self._digests[path] = digest
                changed.append(path)
        return tuple(changed)

    def _project_files(self) -> list[Path]:
        return [self.config.config_path, *self.config.manifest_files(), *self.config.macro_files()]

    def _remember(self, paths: Iterable[Path]) -> None:
        for path in paths:
            if path not in self._digests:
                self._digests[path] = _digest(path)

    # -- one cycle -----------------------------------------------------------------------------------

    def cycle(self, changed: Sequence[Path] = (), *, reason: str | None = None) -> WatchCycle:
        """Re-read odfproj.yaml, re-plan, and with ``apply`` apply and run what changed.

        Never raises for bad input: every ``OdfprojError`` (a malformed manifest, a schema violation,
        a template error, a locked workspace) becomes the cycle's one-line ``error``; anything else is
        reported as an internal error, so that one bug does not end a watch session. ``reason`` says
        why a cycle no file caused was planned.
        """
        number = self._cycles
        self._cycles += 1
        at = datetime.now().astimezone()
        clock = time.monotonic()
        rel = tuple(self._rel(p) for p in changed)
        plan: Plan | None = None
        run: RunResult | None = None
        error: str | None = None
        notice: str | None = None
        try:
            config = load_project(self.root).in_environment(self.environment)
            if not self.apply:  # planning only: an environment not made yet is planned as production
                config, _ = planned_config(config, self.request.target)
            self.config = config
            self._remember(self._project_files())
            plan, snapshot, notice = self._plan()
            if self.apply and plan.has_changes and not plan.has_refusals:
                if self.on_planned is not None:
                    self.on_planned(
                        WatchCycle(number, at, rel, time.monotonic() - clock, plan, reason=reason)
                    )
                run = self._run(plan, snapshot)
        except OdfprojError as e:
            error = one_line(e)
        except Exception as e:  # a bug: report it like `run` does and keep watching
            if self.debug:
                raise
            error = f"internal error: {type(e).__name__}: {e} (this is a bug; rerun with --debug)"
        return WatchCycle(number, at, rel, time.monotonic() - clock, plan, run, error, reason, notice)

    def _plan(self) -> tuple[Plan, ProjectSnapshot, str | None]:
        """The plan with its queries checked when a checker is at hand; else without, and why not."""
        checker = self._checker
        checks = self.query_checks
        if checker is None and checks is not None and checks.available():
            checks.cycle_starts()
            checker = checks
        try:
            plan, snapshot = plan_project(
                self.config, self.request, environ=self.environ, query_checker=checker
            )
            return plan, snapshot, None
        except ChecksNotReady as e:
            plan, snapshot = plan_project(self.config, self.request, environ=self.environ)
            return plan, snapshot, e.notice

    def recheck_due(self) -> bool:
        """Whether to plan again although no file changed: the warm engine is up now, and a cycle
        planned without its checks while it was starting."""
        return self.query_checks is not None and self.query_checks.recheck_due()

    def take_notices(self) -> list[str]:
        """Lines to show between cycles: what the warm engine's start said (see :class:`WarmQueryChecks`)."""
        return self.query_checks.take_notices() if self.query_checks is not None else []

    def failed(self, error: str) -> WatchCycle:
        """A cycle that could not plan at all (the loop lost track of a folder, for instance)."""
        number = self._cycles
        self._cycles += 1
        return WatchCycle(number, datetime.now().astimezone(), (), 0.0, error=error)

    def _run(self, plan: Plan, snapshot: ProjectSnapshot) -> RunResult:
        """Apply, then run the datasets :func:`affected_datasets` names, on the one kept holder.

        ``run_project`` plans again under the workspace lock, so a file saved in between is applied
        as it is then, never half of it.
        """
        request = PlanRequest(
            target=self.request.target,
            vars_override=self.request.vars_override,
            select=affected_datasets(plan, snapshot),
        )
        assert self.holder is not None
        return run_project(
            self.config,
            request,
            holder=self.holder,
            threads=self.threads,
            on_event=self.on_run_event,
            environ=self.environ,
            cancel=self.cancel,
        )

    def _rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


def affected_datasets(plan: Plan, snapshot: ProjectSnapshot) -> tuple[str, ...]:
    """The datasets whose definitions the plan changes and everything downstream of them, in order.

    Limited to the planned selection: ``--exclude`` keeps a dataset out of the run even when an
    input of it changed. Unchanged datasets upstream are not run; their data is used as it is.
    """
    changed = {s.dataset.lower() for s in plan.definitions if s.has_changes}
    affected = set(changed)
    for name in snapshot.selection.names:
        if name.lower() in changed:
            affected.update(d.lower() for d in snapshot.graph.downstream(name))
    return tuple(n for n in snapshot.selection.names if n.lower() in affected)


def one_line(error: OdfprojError) -> str:
    """The error's message on one line; of several manifest problems, the first and how many more."""
    if isinstance(error, ManifestError) and len(error.problems) > 1:
        more = len(error.problems) - 1
        return f"{error.problems[0]} (and {more} more problem{'s' if more > 1 else ''})"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(lines) if lines else type(error).__name__


def _glob_base(pattern: str) -> tuple[PurePosixPath, bool]:
    """The fixed folder a glob starts in, and whether the glob may match below it in sub-folders."""
    parts = PurePosixPath(pattern).parts
    fixed: list[str] = []
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return PurePosixPath(*fixed) if fixed else PurePosixPath("."), i < len(parts) - 1
        fixed.append(part)
    # No wildcard at all: one file; its folder is enough.
    return PurePosixPath(*fixed[:-1]) if len(fixed) > 1 else PurePosixPath("."), False


def _digest(path: Path) -> bytes | None:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
    except OSError:  # deleted, a folder, unreadable: all "not a file with content"
        return None


# --- the loop ------------------------------------------------------------------------------------


class _Collector(FileSystemEventHandler):
    """Runs on watchdog's thread: forwards every path an event names to the loop's queue."""

    def __init__(self, sink: queue.SimpleQueue[tuple[Path, ...]], ignore: tuple[str, ...]) -> None:
        self._sink = sink
        self._ignore = ignore

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = [os.fsdecode(event.src_path)]
        if event.dest_path:
            paths.append(os.fsdecode(event.dest_path))
        kept = tuple(Path(p) for p in paths if not p.startswith(self._ignore))
        if kept:
            self._sink.put(kept)


class _Observation:
    """The observer and the watches it holds, kept in line with ``Watcher.watched_dirs``."""

    def __init__(self, observer: BaseObserver, handler: _Collector) -> None:
        self.observer = observer
        self._handler = handler
        self._watches: dict[WatchedDir, ObservedWatch] = {}

    def sync(self, wanted: frozenset[WatchedDir]) -> list[Path]:
        """Schedule new folders, drop vanished ones; returns the folders that are new."""
        for watched in [w for w in self._watches if w not in wanted or not w.path.is_dir()]:
            watch = self._watches.pop(watched)
            with contextlib.suppress(KeyError, OSError):  # its emitter may have stopped with the folder
                self.observer.unschedule(watch)
        added = []
        for watched in sorted(wanted, key=lambda w: (str(w.path), w.recursive)):
            if watched in self._watches or not watched.path.is_dir():
                continue
            try:
                self._watches[watched] = self.observer.schedule(
                    self._handler, str(watched.path), recursive=watched.recursive, event_filter=_EVENT_TYPES
                )
            except OSError as e:
                raise WatchError(
                    f"cannot watch {watched.path}: {e.strerror or e}"
                    " (on Linux, raise fs.inotify.max_user_watches)"
                ) from None
            added.append(watched.path)
        return added


def watch(
    watcher: Watcher,
    *,
    on_cycle: Callable[[WatchCycle], None],
    on_notice: Callable[[str], None] | None = None,
    stop_event: threading.Event | None = None,
    debounce: float = DEBOUNCE_SECONDS,
    max_delay: float = MAX_DELAY_SECONDS,
    observer_factory: Callable[[], BaseObserver] = Observer,
) -> None:
    """Plan once, then re-plan after every burst of changes until ``stop_event`` is set.

    The observer starts before the first plan, so an edit made while it runs is not lost. A burst
    ends when no event arrived for ``debounce`` seconds, or ``max_delay`` after its first event.
    The observer is stopped and joined however the loop ends (KeyboardInterrupt included).

    Between cycles, the watcher's notices go to ``on_notice`` (on this thread, so never in the middle
    of a cycle's output), and a cycle planned without query checks while the warm engine was starting
    is planned again once it is up (``reason`` :data:`RECHECK_REASON`).
    """
    stop = stop_event or threading.Event()
    events: queue.SimpleQueue[tuple[Path, ...]] = queue.SimpleQueue()
    observation = _Observation(observer_factory(), _Collector(events, watcher.ignored_prefixes()))
    observation.sync(watcher.watched_dirs())
    observation.observer.start()
    try:
        _notify(watcher, on_notice)
        on_cycle(watcher.cycle())
        pending: set[Path] = set()
        first = last = 0.0
        while not stop.is_set():
            _notify(watcher, on_notice)
            if not pending and watcher.recheck_due():
                on_cycle(watcher.cycle(reason=RECHECK_REASON))
                continue
            now = time.monotonic()
            if pending and (now - last >= debounce or now - first >= max_delay):
                pending = _flush(watcher, observation, pending, on_cycle)
                first = last = now
                continue
            wait = _POLL_SECONDS
            if pending:
                wait = max(0.0, min(wait, last + debounce - now, first + max_delay - now))
            try:
                paths = events.get(timeout=wait)
            except queue.Empty:
                continue
            now = time.monotonic()
            if not pending:
                first = now
            last = now
            pending.update(paths)
            while True:  # drain what is already queued without waiting
                try:
                    pending.update(events.get_nowait())
                except queue.Empty:
                    break
    finally:
        observation.observer.stop()
        observation.observer.join()


def _notify(watcher: Watcher, on_notice: Callable[[str], None] | None) -> None:
    for notice in watcher.take_notices():
        if on_notice is not None:
            on_notice(notice)


def _flush(
    watcher: Watcher,
    observation: _Observation,
    pending: set[Path],
    on_cycle: Callable[[WatchCycle], None],
) -> set[Path]:
    """One burst: follow new or vanished folders, keep the files whose bytes changed, plan if any.

    Returns the files to look at with the next burst: those of folders first observed after the
    cycle (an odfproj.yaml change can name new ones), which produced no event of their own.
    """
    pending = pending | _follow(watcher, observation, on_cycle)
    changed = watcher.changed_files(pending)
    if not changed:
        return set()
    on_cycle(watcher.cycle(changed))
    if any(p.name == CONFIG_FILE and p.parent == watcher.root for p in changed):
        return _follow(watcher, observation, on_cycle)
    return set()


def _follow(watcher: Watcher, observation: _Observation, on_cycle: Callable[[WatchCycle], None]) -> set[Path]:
    """Bring the observed folders in line with the project; the files of newly observed folders."""
    try:
        added = observation.sync(watcher.watched_dirs())
    except WatchError as e:
        on_cycle(watcher.failed(str(e)))
        return set()
    # Files written before a new folder's watch existed produced no event of their own.
    return {p for folder in added for p in folder.rglob("*") if p.is_file()}
