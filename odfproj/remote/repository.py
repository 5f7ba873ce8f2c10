"""``push`` and ``pull`` between a workspace and an ODF repository.

A repository holds one folder per dataset, named by the dataset's name, each in the reference layout
(``<repo>/<name>/refs/head``, ``blocks/``, ``data/``, ``checkpoints/``): the layout the reference
implementation writes to its local-folder and S3 repositories and reads over the Simple Transfer
Protocol. Private keys and the workspace's own records never leave the workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from odfproj.odf import model
from odfproj.odf.refs import DatasetName
from odfproj.remote.sync import HEAD_KEY, SyncOutcome, SyncPlan, SyncState, execute_sync, plan_sync
from odfproj.storage.chain import append_block
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import ChainInvariantError, RemoteError
from odfproj.storage.object_store import FolderStore, ObjectStore, read_only_error
from odfproj.storage.projection import ChainProjection
from odfproj.storage.workspace import Workspace


def repository_datasets(repository: ObjectStore) -> list[str]:
    """Names of the datasets a repository holds (those with a ``refs/head``)."""
    suffix = f"/{HEAD_KEY}"
    return sorted(
        {key[: -len(suffix)] for key in repository.list() if key.endswith(suffix) and key.count("/") == 2}
    )


def push(workspace: Workspace, names: Sequence[str], repository: ObjectStore) -> list[SyncOutcome]:
    """Copy each dataset's missing blocks and objects to the repository; default: every dataset."""
    if repository.read_only:
        raise read_only_error(repository)
    outcomes = []
    for name in names or workspace.list_datasets():
        dataset = workspace.open(name)
        source = FolderStore(dataset.path)
        destination = repository.child(dataset.name)
        plan = plan_sync(dataset.name, source, destination)
        if plan.state is SyncState.DESTINATION_AHEAD:
            raise RemoteError(
                f"dataset {dataset.name!r}: {destination} has blocks this workspace lacks; pull first"
            )
        outcomes.append(execute_sync(plan, source, destination))
    return outcomes


def pull(
    workspace: Workspace, names: Sequence[str], repository: ObjectStore, *, objects: bool = True
) -> list[SyncOutcome]:
    """Copy each dataset's missing blocks and objects into the workspace; default: all in the repository.

    Every block is checked against its hash, every object against its hash and size, and the new
    blocks against the chain's invariants before the local head moves.
    """
    outcomes = []
    for name in names or repository_datasets(repository):
        DatasetName(name)  # a repository's folder names become local paths: only valid dataset names
        source = repository.child(name)
        if workspace.exists(name):
            dataset = workspace.open(name)
            with dataset.lock(purpose="odfproj pull"):
                destination = FolderStore(dataset.path)
                plan = plan_sync(dataset.name, source, destination)
                outcomes.append(
                    execute_sync(plan, source, destination, check=_chain_checker(dataset), objects=objects)
                )
            continue
        plan = plan_sync(name, source, FolderStore(workspace.datasets_dir / name))
        _check_chain(None, plan)
        seed = plan.new_blocks[0].block.event
        assert isinstance(seed, model.Seed)  # _check_chain made sure
        dataset = workspace.receive(name, seed.dataset_id)
        with dataset.lock(purpose="odfproj pull"):
            outcomes.append(execute_sync(plan, source, FolderStore(dataset.path), objects=objects))
    return outcomes


def _chain_checker(dataset: Dataset) -> Callable[[SyncPlan], None]:
    def check(plan: SyncPlan) -> None:
        _check_chain(dataset.projection(), plan)

    return check


def _check_chain(base: ChainProjection | None, plan: SyncPlan) -> None:
    """Replay the new blocks on the destination's projection: a pull never brings in an invalid chain."""
    projection = base
    try:
        for chain_block in plan.new_blocks:
            projection = append_block(projection, chain_block.hash, chain_block.block)
    except ChainInvariantError as e:
        raise RemoteError(f"dataset {plan.name!r}: the pulled chain is invalid: {e}") from None
