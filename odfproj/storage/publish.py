"""Publish: production's chains fast-forward to a preview environment's heads, byte for byte.

An environment's forked chain is production's chain plus new blocks on top of the fork point, so
when production's head is still the fork point, making the reviewed blocks production's is a
fast-forward: the environment's new objects are linked into production's folder (no byte copied,
no recompute) and production's head is swapped from the fork point to the environment's head.

Each dataset goes through the commit protocol of ``storage.commit``: objects first, the head last,
under the dataset's lock and with a compare-and-swap of the head. A SIGKILL at any moment leaves
each dataset at its old head (plus unreachable links the next commit's recovery removes) or at the
published one. A rerun finds the published datasets at the environment's heads and finishes the
rest. The whole publish holds production's workspace lock, so no apply or run moves a chain
meanwhile, and the environment's, so no command changes what is being published.

A dataset is refused, and production's chain left alone, when production moved since the fork
(its head is no longer the fork point), or when an input head the environment's blocks consumed is
no longer production's head of that input: publishing it would make production's chain claim it
computed over data production does not have at that point. Its downstream is refused with it.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from odfproj.odf import model
from odfproj.odf.identity import DatasetId, DatasetKeyPair
from odfproj.odf.multiformats import Multihash
from odfproj.storage.commit import Transaction
from odfproj.storage.dataset import Dataset
from odfproj.storage.env_record import Pin, PreviewEnvironmentError, write_record
from odfproj.storage.environment import inputs_among
from odfproj.storage.errors import DatasetNotFoundError
from odfproj.storage.projection import DATA_EVENTS
from odfproj.storage.workspace import Workspace

__all__ = ["PublishOutcome", "publish_environment"]

Status = Literal["published", "created", "unchanged", "refused"]


@dataclass(frozen=True)
class PublishOutcome:
    """What publish did with one dataset the environment changed."""

    dataset: str
    status: Status
    head: Multihash | None = None
    #: Blocks production gained, and objects (blocks, slices, checkpoints) linked into its folder.
    blocks: int = 0
    objects: int = 0
    reason: str | None = None

    def line(self) -> str:
        if self.status == "refused":
            return f"{self.dataset}: refused: {self.reason}"
        if self.status == "unchanged":
            return f"{self.dataset}: already at the environment's head"
        verb = "created in production" if self.status == "created" else "fast-forwarded"
        return f"{self.dataset}: {verb}, {self.blocks} block(s), {self.objects} object(s) linked"


def publish_environment(
    production: Workspace,
    environment: Workspace,
    *,
    only: Sequence[str] | None = None,
    lock_timeout: float | None = None,
    on_outcome: Callable[[PublishOutcome], None] | None = None,
) -> list[PublishOutcome]:
    """Fast-forward production to the environment's head of each dataset it changed, inputs first.

    ``only`` narrows to those datasets (names); the rest stay in the environment.
    """
    record = environment.environment
    if record is None:
        raise PreviewEnvironmentError(f"{environment.root} is not an environment")
    outcomes: list[PublishOutcome] = []
    with (
        production.lock(purpose="odfproj publish", timeout=lock_timeout),
        environment.lock(purpose="odfproj publish", timeout=lock_timeout),
    ):
        record = environment.environment
        assert record is not None
        wanted = {n.lower() for n in only} if only is not None else None
        changed = [n for n in record.changed() if wanted is None or n.lower() in wanted]
        refused: set[DatasetId] = set()
        for name in _inputs_first(environment, changed):
            outcome = _publish_one(production, environment, name, refused)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
    return outcomes


def _publish_one(
    production: Workspace, environment: Workspace, name: str, refused: set[DatasetId]
) -> PublishOutcome:
    record = environment.environment
    assert record is not None
    pin = record.pin(name)
    assert pin is not None
    source = environment.open(name, recover=False)
    head = source.head()
    assert head is not None
    dataset_id = source.dataset_id
    try:
        target: Dataset | None = production.open(name, recover=False)
    except DatasetNotFoundError:
        target = None

    def refuse(reason: str) -> PublishOutcome:
        refused.add(dataset_id)
        return PublishOutcome(name, "refused", reason=reason)

    if target is not None and target.head() == head:
        _mark_published(environment, name, head)
        return PublishOutcome(name, "unchanged", head)
    if pin.state == "created" and target is not None:
        return refuse(f"production created a dataset {target.name} since; rename one of them")
    if pin.state == "forked" and target is None:
        return refuse("production no longer has it (destroyed or renamed since the environment forked it)")
    fork_point = pin.base if pin.state == "forked" else None
    newer, met = source.blocks_since(head, fork_point)
    if fork_point is not None and not met:
        return refuse("its environment chain does not descend from the fork point (refresh the environment)")
    problem = _input_problem(production, environment, newer, refused)
    if problem is not None:
        return refuse(problem)
    if target is None:
        key = DatasetKeyPair.from_pem(environment.key_path(dataset_id).read_bytes())
        target = production.receive(name, dataset_id, key=key)
        status: Status = "created"
    else:
        status = "published"
    objects = _own_objects(source, newer, target)
    with target.lock(purpose="odfproj publish", timeout=30.0):
        target._recover_locked()
        current = target.head()
        if current != fork_point:
            moved = current.to_multibase() if current is not None else "(no head)"
            return refuse(f"production's head moved since the fork ({moved}): refresh the environment")
        with Transaction(target.layout) as tx:
            for index, (path, destination) in enumerate(objects):
                tx.publish_as(tx.stage_link(path, f"{index}-{destination.parent.name}"), destination)
            tx.commit(old_head=fork_point, new_head=head)
    _mark_published(environment, name, head)
    return PublishOutcome(name, status, head, blocks=len(newer), objects=len(objects))


def _mark_published(environment: Workspace, name: str, head: Multihash) -> None:
    """The dataset is production's again: pinned at the head both now share."""
    record = environment.environment
    assert record is not None
    spelled = next((n for n in record.datasets if n.lower() == name.lower()), name)
    write_record(environment.root, record.with_pins({spelled: Pin("pinned", head)}))


def _input_problem(
    production: Workspace,
    environment: Workspace,
    newer: list[tuple[Multihash, model.MetadataBlock]],
    refused: set[DatasetId],
) -> str | None:
    """Why the inputs the newest transform of ``newer`` consumed are not production's heads, or None."""
    last = next((b.event for _, b in reversed(newer) if isinstance(b.event, model.ExecuteTransform)), None)
    if last is None:
        return None
    for query_input in last.query_inputs:
        consumed = query_input.new_block_hash or query_input.prev_block_hash
        if consumed is None:
            continue
        upstream = environment.find_by_id(query_input.dataset_id)
        input_name = upstream.name if upstream is not None else str(query_input.dataset_id)
        if query_input.dataset_id in refused:
            return f"its input {input_name} was refused"
        in_production = production.find_by_id(query_input.dataset_id)
        current = in_production.head() if in_production is not None else None
        if current != consumed:
            return (
                f"input {input_name} moved in production since the environment consumed it: refresh the "
                "environment and run again (or publish --recompute)"
            )
    return None


def _own_objects(
    source: Dataset, newer: list[tuple[Multihash, model.MetadataBlock]], target: Dataset
) -> list[tuple[Path, Path]]:
    """(where it is, where it goes in ``target``) of each object of the new blocks that lies in the
    environment's folder: data and checkpoints before the blocks, blocks oldest first."""
    found, own = source.objects, source.objects.is_own
    files: list[tuple[Path, Path]] = []
    blocks: list[tuple[Path, Path]] = []
    for block_hash, block in newer:
        event = block.event
        if isinstance(event, DATA_EVENTS):
            if event.new_data is not None and own(path := found.data_path(event.new_data.physical_hash)):
                files.append((path, target.layout.data_path(event.new_data.physical_hash)))
            checkpoint = event.new_checkpoint
            if checkpoint is not None and own(path := found.checkpoint_path(checkpoint.physical_hash)):
                files.append((path, target.layout.checkpoint_path(checkpoint.physical_hash)))
        if own(path := found.block_path(block_hash)):
            blocks.append((path, target.layout.block_path(block_hash)))
    return files + blocks


def _inputs_first(environment: Workspace, names: Sequence[str]) -> list[str]:
    """``names`` ordered so that each dataset comes after the inputs its chain names."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for name, inputs in sorted(inputs_among(environment, names).items()):
        sorter.add(name, *inputs)
    return list(sorter.static_order())
