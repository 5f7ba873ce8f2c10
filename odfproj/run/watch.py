"""``odfproj watch``: re-plan (and optionally apply and run) whenever a manifest, macro or odfproj.yaml changes.

The pieces, each small enough to test on its own:

- :class:`Watcher` holds no threads. ``changed_files`` turns raw file-system paths into the project files
  whose *content* changed (editors touch, rename and re-create files on every save; none of that should
  cost a plan), and ``cycle`` re-plans through exactly the code path of ``odfproj plan``
  (:func:`~odfproj.plan.sources.plan_project`), so what watch shows can never differ from what plan
  would show. With ``apply`` it then runs the changed datasets and their downstream through
  :func:`~odfproj.run.run.run_project`, reusing one ``SparkSessionHolder`` for every cycle: the JVM
  starts on the first data work and stays warm.
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
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

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

from odfproj.engine.session import SparkSessionHolder
from odfproj.engine.spark import SparkEngine
from odfproj.errors import ManifestError, OdfprojError
from odfproj.plan.engine_checks import query_checker
from odfproj.plan.model import Plan
from odfproj.plan.queries import QueryChecker
from odfproj.plan.sources import ProjectSnapshot, plan_project
from odfproj.project.config import CONFIG_FILE, ProjectConfig, load_project
from odfproj.project.loader import PlanRequest
from odfproj.run.run import RunEvent, RunResult, run_project

__all__ = [
    "DEBOUNCE_SECONDS",
    "MAX_DELAY_SECONDS",
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
    ) -> None:
        """``holder`` is required with ``apply`` and kept for every cycle (the session stays warm).

        With ``apply``, ``on_planned`` receives the cycle as planned (no run yet) just before it is
        applied and run, so that the plan can be shown before the run's progress (``on_run_event``);
        the finished cycle is still what :meth:`cycle` returns.

        ``cancel`` (usually the loop's ``stop_event``) stops a run in progress between datasets.

        ``debug`` re-raises unexpected exceptions (bugs) so that ``--debug`` shows their traceback;
        otherwise they are reported as a cycle's error and watching goes on.
        """
        if apply and holder is None:
            raise ValueError("apply=True needs a SparkSessionHolder (kept across cycles)")
        self.config = config
        self.request = request
        self.apply = apply
        self.holder = holder
        self.threads = max(1, threads)
        self.on_run_event = on_run_event
        self.on_planned = on_planned
        self.environ = environ
        self.debug = debug
        self.cancel = cancel
        # Without --apply no engine exists at all, so no JVM can start; changed queries are then shown
        # as not validated. With it, queries are checked on the warm session before anything is applied.
        self._checker: QueryChecker | None = (
            query_checker(SparkEngine(holder)) if apply and holder is not None else None
        )
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

    def cycle(self, changed: Sequence[Path] = ()) -> WatchCycle:
        """Re-read odfproj.yaml, re-plan, and with ``apply`` apply and run what changed.

        Never raises for bad input: every ``OdfprojError`` (a malformed manifest, a schema violation,
        a template error, a locked workspace) becomes the cycle's one-line ``error``; anything else is
        reported as an internal error, so that one bug does not end a watch session.
        """
        number = self._cycles
        self._cycles += 1
        at = datetime.now().astimezone()
        clock = time.monotonic()
        rel = tuple(self._rel(p) for p in changed)
        plan: Plan | None = None
        run: RunResult | None = None
        error: str | None = None
        try:
            self.config = load_project(self.root)
            self._remember(self._project_files())
            plan, snapshot = plan_project(
                self.config, self.request, environ=self.environ, query_checker=self._checker
            )
            if self.apply and plan.has_changes and not plan.has_refusals:
                if self.on_planned is not None:
                    self.on_planned(WatchCycle(number, at, rel, time.monotonic() - clock, plan))
                run = self._run(plan, snapshot)
        except OdfprojError as e:
            error = one_line(e)
        except Exception as e:  # a bug: report it like `run` does and keep watching
            if self.debug:
                raise
            error = f"internal error: {type(e).__name__}: {e} (this is a bug; rerun with --debug)"
        return WatchCycle(number, at, rel, time.monotonic() - clock, plan, run, error)

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
    stop_event: threading.Event | None = None,
    debounce: float = DEBOUNCE_SECONDS,
    max_delay: float = MAX_DELAY_SECONDS,
    observer_factory: Callable[[], BaseObserver] = Observer,
) -> None:
    """Plan once, then re-plan after every burst of changes until ``stop_event`` is set.

    The observer starts before the first plan, so an edit made while it runs is not lost. A burst
    ends when no event arrived for ``debounce`` seconds, or ``max_delay`` after its first event.
    The observer is stopped and joined however the loop ends (KeyboardInterrupt included).
    """
    stop = stop_event or threading.Event()
    events: queue.SimpleQueue[tuple[Path, ...]] = queue.SimpleQueue()
    observation = _Observation(observer_factory(), _Collector(events, watcher.ignored_prefixes()))
    observation.sync(watcher.watched_dirs())
    observation.observer.start()
    try:
        on_cycle(watcher.cycle())
        pending: set[Path] = set()
        first = last = 0.0
        while not stop.is_set():
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
