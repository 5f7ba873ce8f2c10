"""Preview environments as commands use them: made on first write, required by readers, listed,
refreshed, destroyed and published (the storage of each is ``storage.environment``).

A command given ``--env NAME`` works in the environment's folder (``ProjectConfig.workspace``), so
every command reads and writes there and nothing it does reaches production's files. What differs
is decided here: ``apply``/``run`` make the environment when it does not exist yet and fork what
they change (:func:`fork_changed`), ``run`` computes only forked and created datasets, readers
refuse an environment that does not exist, and ``plan`` of one that does not exist yet plans
against production, which is exactly what a new environment would start from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from odfproj.project.config import ProjectConfig
from odfproj.storage.env_record import (
    EnvironmentRecord,
    PreviewEnvironmentError,
    list_environments,
    read_record,
)
from odfproj.storage.environment import (
    create_environment,
    destroy_environment,
    fork,
    inputs_among,
    refresh_environment,
)
from odfproj.storage.publish import PublishOutcome, publish_environment
from odfproj.storage.workspace import Workspace
from odfproj.workspace_paths import environment_root

__all__ = [
    "EnvironmentSummary",
    "computed_here",
    "destroy",
    "ensure_environment",
    "existing_environment",
    "fork_changed",
    "planned_config",
    "publish",
    "refresh",
    "require_environment",
    "summaries",
]


def ensure_environment(config: ProjectConfig, target: str | None) -> EnvironmentRecord | None:
    """The environment of ``config`` (``--env``), made now if it does not exist; ``None`` without ``--env``.

    Making one takes no lock: it only reads production's heads and writes the environment's own
    folder, whose record is written last (``create_environment``), so two makers at once each
    leave a whole environment and the second one's record wins.
    """
    if config.environment is None:
        return None
    root = environment_root(config.production_workspace(target), config.environment)
    record = read_record(root)
    if record is not None:
        return record
    production = Workspace(config.production_workspace(target), odf_version=config.odf_version)
    return create_environment(production, config.environment)


def require_environment(config: ProjectConfig, target: str | None) -> None:
    """Refuse ``--env NAME`` of an environment that does not exist (readers: query, log, show, ...)."""
    if config.environment is None:
        return
    root = environment_root(config.production_workspace(target), config.environment)
    if read_record(root) is None:
        raise PreviewEnvironmentError(_missing(config.environment, config.production_workspace(target)))


def planned_config(config: ProjectConfig, target: str | None) -> tuple[ProjectConfig, str | None]:
    """The project ``plan --env`` plans against, and a note when the environment does not exist yet.

    A new environment starts with every dataset pinned at production's head, so its first plan is
    production's plan; plan writes nothing, so it does not make the environment.
    """
    if config.environment is None:
        return config, None
    root = environment_root(config.production_workspace(target), config.environment)
    if read_record(root) is not None:
        return config, None
    note = (
        f"environment {config.environment!r} does not exist yet: planned against production, where "
        f"`odfproj apply --env {config.environment}` would start it"
    )
    return config.in_environment(None), note


def fork_changed(workspace: Workspace, changed: Iterable[str]) -> tuple[str, ...]:
    """In an environment, fork the datasets a plan changes and every dataset downstream of them.

    The downstream is read from the chains (each derivative's inputs by id), so what recomputes in
    the environment is exactly what reads a changed dataset; everything else stays pinned to
    production. Outside an environment, nothing (production's datasets are all its own).
    """
    if workspace.environment is None:
        return ()
    wanted = {n.lower() for n in changed}
    if not wanted:
        return ()
    readers: dict[str, set[str]] = {}
    for name, inputs in inputs_among(workspace, workspace.list_datasets()).items():
        for upstream in inputs:
            readers.setdefault(upstream.lower(), set()).add(name)
    closure: set[str] = set()
    frontier = [n for n in workspace.list_datasets() if n.lower() in wanted]
    while frontier:
        name = frontier.pop()
        if name.lower() in closure:
            continue
        closure.add(name.lower())
        frontier.extend(readers.get(name.lower(), ()))
    return fork(workspace, [n for n in workspace.list_datasets() if n.lower() in closure])


def computed_here(workspace: Workspace, name: str) -> bool:
    """Whether ``run`` computes ``name`` in this workspace: always in production; in an environment
    only a forked or created dataset (a pinned one is production's, read at its pinned head)."""
    record = workspace.environment
    if record is None:
        return True
    pin = record.pin(name)
    return pin is None or pin.state != "pinned"


@dataclass(frozen=True)
class EnvironmentSummary:
    """One line of ``odfproj env list``."""

    record: EnvironmentRecord
    stale: bool
    #: Bytes of the objects the environment holds itself (blocks, slices, checkpoints); ``None``
    #: where they are not counted (a remote workspace's).
    own_bytes: int | None

    @property
    def changed(self) -> tuple[str, ...]:
        return self.record.changed()


def summaries(
    config: ProjectConfig, target: str | None, *, now: datetime | None = None
) -> list[EnvironmentSummary]:
    """Every environment of the target's workspace, with whether it outlived the TTL and its size.

    For a remote workspace, the environments the store holds; their size is not counted (``None``).
    """
    moment = now or datetime.now(UTC)
    ttl = config.environment_ttl
    url = config.remote_workspace()
    if url is not None:
        from odfproj.remote.environments import remote_environments
        from odfproj.storage.object_store import open_store

        return [
            EnvironmentSummary(r, r.is_stale(moment, ttl), None) for r in remote_environments(open_store(url))
        ]
    production = config.production_workspace(target)
    return [
        EnvironmentSummary(r, r.is_stale(moment, ttl), _own_bytes(environment_root(production, r.name)))
        for r in list_environments(production)
    ]


def refresh(
    config: ProjectConfig, target: str | None, name: str, *, lock_timeout: float | None = None
) -> tuple[EnvironmentRecord, tuple[str, ...]]:
    """Re-pin environment ``name`` to production's heads now (see ``storage.environment``)."""
    with _remote_environment(config, target, name, purpose="odfproj env refresh"):
        production = Workspace(config.production_workspace(target), odf_version=config.odf_version)
        environment = _existing(config, target, name)
        with environment.lock(purpose="odfproj env refresh", timeout=lock_timeout):
            return refresh_environment(production, environment)


def destroy(
    config: ProjectConfig, target: str | None, name: str, *, lock_timeout: float | None = None
) -> None:
    """Remove environment ``name``: only its own folder (or prefix), which production never references."""
    url = config.remote_workspace()
    if url is not None:
        from odfproj.remote.environments import destroy_remote_environment, environment_store
        from odfproj.remote.workspace import remote_lock
        from odfproj.storage.object_store import open_store

        store = open_store(url)
        with remote_lock(environment_store(store, name), purpose="odfproj env destroy"):
            destroy_remote_environment(store, name)
        root = environment_root(config.production_workspace(target), name)
        if read_record(root) is not None:
            destroy_environment(config.production_workspace(target), name)  # the cache's copy too
        return
    environment = _existing(config, target, name)
    with environment.lock(purpose="odfproj env destroy", timeout=lock_timeout):
        destroy_environment(config.production_workspace(target), name)


def publish(
    config: ProjectConfig,
    target: str | None,
    name: str,
    *,
    only: tuple[str, ...] | None = None,
    lock_timeout: float | None = None,
    on_outcome: Callable[[PublishOutcome], None] | None = None,
) -> list[PublishOutcome]:
    """Fast-forward production to environment ``name``'s heads (see ``storage.publish``).

    On a remote workspace: under production's remote lock and the environment's, both are checked
    out, published in the cache, and production's new objects and heads committed (heads by
    compare-and-swap), then the environment's record.
    """
    with _remote_environment(config, target, name, purpose="odfproj publish", production=True):
        production = Workspace(config.production_workspace(target), odf_version=config.odf_version)
        environment = _existing(config, target, name)
        return publish_environment(
            production, environment, only=only, lock_timeout=lock_timeout, on_outcome=on_outcome
        )


@contextmanager
def _remote_environment(
    config: ProjectConfig,
    target: str | None,
    name: str,
    *,
    purpose: str,
    production: bool = False,
) -> Iterator[None]:
    """For a remote workspace: environment ``name`` checked out (and production), locked, and committed after
    (``remote.environments.environment_synced``); refused in one line when the store has no such environment.

    ``production``: also lock production and commit it (publish, the one command that writes it).
    Nothing for a workspace on disk.
    """
    url = config.remote_workspace()
    if url is None:
        yield
        return
    from odfproj.remote.environments import environment_synced
    from odfproj.storage.object_store import open_store

    cache = Workspace(config.production_workspace(target), odf_version=config.odf_version)
    with environment_synced(
        open_store(url),
        cache,
        name,
        writer=purpose,
        production_writer=production,
        missing=lambda: PreviewEnvironmentError(_missing(name, config.production_workspace(target))),
    ):
        yield


def existing_environment(production: Path, name: str, *, odf_version: str | None = None) -> Workspace:
    """The workspace of environment ``name`` of the workspace at ``production``; refused in one line
    when it does not exist (readers never make one)."""
    root = environment_root(production, name)
    if read_record(root) is None:
        raise PreviewEnvironmentError(_missing(name, production))
    return Workspace(root) if odf_version is None else Workspace(root, odf_version=odf_version)


def _existing(config: ProjectConfig, target: str | None, name: str) -> Workspace:
    return existing_environment(config.production_workspace(target), name, odf_version=config.odf_version)


def _missing(name: str | None, production: Path) -> str:
    return (
        f"environment {name!r} does not exist in workspace {production} "
        f"(`odfproj env list` lists them; `odfproj apply --env {name}` makes it)"
    )


def _own_bytes(root: Path) -> int:
    total = 0
    for kind in ("blocks", "data", "checkpoints"):
        for path in root.glob(f"datasets/*/{kind}/*"):
            try:
                total += path.stat().st_size
            except OSError:
                continue
    return total
