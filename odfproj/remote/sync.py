"""Move one dataset's missing blocks and objects from a source store to a destination store.

Both sides are in the ODF repository layout (``refs/head``, ``blocks/``, ``data/``, ``checkpoints/``),
so a local dataset folder, a repository on disk, an S3 prefix and an HTTP server are all just stores.
Content addressing makes the sync incremental: the source's chain is walked from its head down to the
destination's head, and only the objects of those new blocks that the destination lacks are copied.

The order makes every interruption harmless: data and checkpoints first, then blocks, and the
destination's ``refs/head`` last, by compare-and-swap against the head read at the start. Until the
head moves, everything written is unreachable; once it moved, everything it reaches is there. A
rerun finds the objects already present and copies only the rest.

Every block is checked against the hash that names it and every object against its physical hash
and size before it is written, so a damaged or malicious source cannot slip anything in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from odfproj.errors import InvalidValueError, SerializationError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash as hash_block_bytes
from odfproj.odf.flatbuffers_codec import decode_block
from odfproj.odf.multiformats import Multihash
from odfproj.remote.errors import DivergedError, RemoteHeadMovedError
from odfproj.storage.errors import RemoteError
from odfproj.storage.object_copy import copy_object
from odfproj.storage.object_store import ObjectStore
from odfproj.storage.projection import DATA_EVENTS

HEAD_KEY = "refs/head"


class SyncState(Enum):
    UP_TO_DATE = "up to date"
    CREATED = "created"
    UPDATED = "updated"
    DESTINATION_AHEAD = "destination ahead"


@dataclass(frozen=True)
class ChainBlock:
    """A block read from a store: its hash, its stored bytes (checked) and its decoded form."""

    hash: Multihash
    data: bytes
    block: model.MetadataBlock


@dataclass(frozen=True)
class SyncPlan:
    """What syncing one dataset will do, computed from reads only."""

    name: str
    source_head: Multihash
    destination_head: Multihash | None
    destination_version: str | None
    new_blocks: tuple[ChainBlock, ...]  # oldest first
    state: SyncState


@dataclass(frozen=True)
class SyncOutcome:
    name: str
    state: SyncState
    old_head: Multihash | None
    new_head: Multihash | None
    blocks: int
    objects: int

    def describe(self) -> str:
        if self.state is SyncState.UP_TO_DATE:
            return f"{self.name}: up to date"
        if self.state is SyncState.DESTINATION_AHEAD:
            return f"{self.name}: the destination is ahead (has every block of the source), nothing to copy"
        return f"{self.name}: {self.state.value}, {self.blocks} block(s) and {self.objects} object(s) copied"


def read_head(store: ObjectStore, what: str) -> tuple[Multihash, str] | None:
    """A store's head hash and version token, or ``None`` when it holds no dataset."""
    found = store.get_versioned(HEAD_KEY)
    if found is None:
        return None
    data, version = found
    try:
        return Multihash.from_multibase(data.decode("ascii", "replace").strip()), version
    except InvalidValueError as e:
        raise RemoteError(f"{store}: {what}'s refs/head is not a block hash: {e}") from None


def read_block(store: ObjectStore, block_hash: Multihash) -> ChainBlock:
    """One block, checked against its hash and decoded."""
    key = f"blocks/{block_hash.to_multibase()}"
    data = store.get(key)
    if data is None:
        raise RemoteError(f"{store}: block {block_hash} is missing ({key})")
    if hash_block_bytes(data) != block_hash:
        raise RemoteError(f"{store}: {key} does not match its hash (corrupted or tampered)")
    try:
        block, _version = decode_block(data)
    except SerializationError as e:
        raise RemoteError(f"{store}: {key} cannot be decoded: {e}") from None
    return ChainBlock(block_hash, data, block)


def walk(store: ObjectStore, head: Multihash) -> Iterator[ChainBlock]:
    """Blocks newest to oldest, following ``prevBlockHash``, each checked."""
    current: Multihash | None = head
    while current is not None:
        chain_block = read_block(store, current)
        yield chain_block
        current = chain_block.block.prev_block_hash


def plan_sync(name: str, source: ObjectStore, destination: ObjectStore) -> SyncPlan:
    """Read both heads and the source's blocks the destination lacks; refuse a divergent history."""
    source_found = read_head(source, "the source")
    if source_found is None:
        raise RemoteError(f"{source}: no dataset {name!r} there (no refs/head)")
    source_head = source_found[0]
    destination_found = read_head(destination, "the destination")
    destination_head, version = destination_found if destination_found is not None else (None, None)

    def plan(blocks: list[ChainBlock], state: SyncState) -> SyncPlan:
        return SyncPlan(name, source_head, destination_head, version, tuple(reversed(blocks)), state)

    if source_head == destination_head:
        return plan([], SyncState.UP_TO_DATE)
    new: list[ChainBlock] = []
    for chain_block in walk(source, source_head):
        if chain_block.hash == destination_head:
            return plan(new, SyncState.UPDATED)
        new.append(chain_block)
    if destination_head is None:
        return plan(new, SyncState.CREATED)
    if any(b.hash == source_head for b in walk(destination, destination_head)):
        return plan([], SyncState.DESTINATION_AHEAD)
    raise DivergedError(
        f"dataset {name!r}: histories diverged: {destination} is at {destination_head.to_multibase()[:16]}..., "
        f"which is not in the chain of {source} (head {source_head.to_multibase()[:16]}...); refusing to "
        "overwrite either side"
    )


def objects_of(block: model.MetadataBlock) -> Iterator[tuple[str, Multihash, int]]:
    """The content-addressed files a block references: (folder, physical hash, size)."""
    event = block.event
    if isinstance(event, DATA_EVENTS):
        if event.new_data is not None:
            yield "data", event.new_data.physical_hash, event.new_data.size
        if event.new_checkpoint is not None:
            yield "checkpoints", event.new_checkpoint.physical_hash, event.new_checkpoint.size


def execute_sync(
    plan: SyncPlan,
    source: ObjectStore,
    destination: ObjectStore,
    *,
    check: Callable[[SyncPlan], None] | None = None,
    objects: bool = True,
) -> SyncOutcome:
    """Copy objects, then blocks, then move the destination's head by compare-and-swap.

    ``objects=False`` copies metadata only (a cache for ``plan``, which never reads data).
    """
    if not plan.new_blocks:
        return SyncOutcome(plan.name, plan.state, plan.destination_head, plan.destination_head, 0, 0)
    if check is not None:
        check(plan)
    copied = 0
    for chain_block in plan.new_blocks if objects else ():
        for folder, physical, size in objects_of(chain_block.block):
            copied += copy_object(source, destination, folder, physical, size)
    blocks = 0
    for chain_block in plan.new_blocks:
        key = f"blocks/{chain_block.hash.to_multibase()}"
        if not destination.exists(key):
            destination.put(key, chain_block.data)
            blocks += 1
    new_head = plan.source_head.to_multibase().encode("ascii")
    if not destination.put_if(HEAD_KEY, new_head, version=plan.destination_version):
        raise RemoteHeadMovedError(
            f"dataset {plan.name!r}: the head of {destination} moved while syncing (another writer); "
            "nothing was lost, run the command again"
        )
    return SyncOutcome(plan.name, plan.state, plan.destination_head, plan.source_head, blocks, copied)


def sync_dataset(name: str, source: ObjectStore, destination: ObjectStore) -> SyncOutcome:
    return execute_sync(plan_sync(name, source, destination), source, destination)
