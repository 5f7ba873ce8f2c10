"""Commands on a remote workspace: bring its local cache up to date first, commit back after writing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from odfproj.cli.context import adopt_old_workspace

if TYPE_CHECKING:
    from odfproj.project.config import ProjectConfig


@contextmanager
def synced(
    config: ProjectConfig,
    target: str | None,
    *,
    writer: str | None,
    report: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """For a remote workspace: checkout before the command, and for a ``writer`` lock and commit.

    ``writer`` is the lock's purpose (``None``: a reader such as ``plan``, which takes no lock and
    needs only read access). Data files and checkpoints are not fetched here: the cache fetches each
    as the command reads it (``storage.origin``). ``report`` (``--verbose``) gets one line at the end:
    what the command moved over the network (``storage.object_store.TRANSFERS``).
    For a ``writer``, a workspace an older odfproj made is adopted first (see
    :func:`adopt_old_workspace`); nothing else happens for a workspace on disk.

    In an environment (``--env``), production is only checked out, never committed, and a writer
    takes the environment's own lock and commits the environment's prefix alone
    (``remote.environments``).
    """
    from odfproj.storage.workspace import Workspace

    url = config.remote_workspace()
    if report is not None and url is not None:
        with _transfers_reported(url, report), synced(config, target, writer=writer):
            yield
        return
    if writer is not None:
        adopt_old_workspace(Workspace(config.production_workspace(target)))
    if url is None:
        yield
        return
    # Imported here: a workspace on disk, the common case, needs none of the sync engine (every
    # plan, apply and run would otherwise import it at start).
    from odfproj.remote.workspace import checkout, commit, remote_lock
    from odfproj.storage.object_store import open_store

    store = open_store(url)
    cache = Workspace(config.production_workspace(target))
    if config.environment is not None:
        from odfproj.remote.environments import environment_synced

        with environment_synced(store, cache, config.environment, writer=writer):
            yield
        return
    if writer is None:
        checkout(store, cache)
        yield
        return
    with remote_lock(store, purpose=writer):
        checkout(store, cache)
        try:
            yield
        finally:
            commit(store, cache)  # whatever committed locally (each dataset atomically) goes up


@contextmanager
def _transfers_reported(url: str, report: Callable[[str], None]) -> Iterator[None]:
    from odfproj.storage.object_store import TRANSFERS

    before = TRANSFERS.now()
    try:
        yield
    finally:
        report(f"remote workspace {url}: {(TRANSFERS.now() - before).describe()}")
