"""Integrity verification: re-derive everything a dataset claims and report each mismatch by path.

``verify`` trusts nothing it can recompute: not the file names (a block must hash to its name), not
the projection cache, not the validation done at append time (the whole chain is re-validated from
the Seed). Problems name the file to look at, so a user can tell a flipped bit in one data file from
a broken chain.

A chain can be whole and still be the wrong one. :func:`verify_in_workspace` adds the checks only
the workspace can make: the dataset's Seed id is the one the workspace recorded when it created
that name, with its private key under ``keys/`` (a folder replaced by another dataset's chain is
caught), and every input block a derivative recorded as consumed is still in that input's chain
(a ``refs/head`` rolled back below it is caught, naming both datasets and the block).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odfproj.errors import InvalidValueError, SerializationError, StorageError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash as hash_block_bytes
from odfproj.odf.flatbuffers_codec import decode_block
from odfproj.odf.identity import DatasetId, DatasetKeyPair
from odfproj.odf.multiformats import Multihash
from odfproj.storage.chain import append_block
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import ChainInvariantError, IntegrityError
from odfproj.storage.head import read_head
from odfproj.storage.objects import checkpoint_file_problem, data_file_problem
from odfproj.storage.projection import DATA_EVENTS, ChainProjection
from odfproj.storage.workspace import Workspace


@dataclass(frozen=True)
class IntegrityProblem:
    """One thing wrong with a dataset: the file concerned (or expected) and what is wrong with it."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


_Chain = list[tuple[Multihash, model.MetadataBlock, Path]]


def verify_dataset(dataset: Dataset, *, integrity: bool = True) -> list[IntegrityProblem]:
    """Every problem found in ``dataset``; an empty list means it is intact.

    Checks the head ref, that every block hashes to its file name and decodes, every chain invariant
    from the Seed on, and that every data file and checkpoint is present with the size the chain
    records. With ``integrity`` (the default) data files and checkpoints are also re-hashed: physical
    hash, logical hash and record count. A broken chain (missing or corrupt block) stops the walk at
    the first bad block, since nothing before it can be reached.
    """
    layout = dataset.layout
    try:
        head = read_head(layout.head_ref)
    except IntegrityError as e:
        return [IntegrityProblem(layout.head_ref, _without_path(str(e), layout.head_ref))]
    if head is None:
        return [IntegrityProblem(layout.head_ref, "missing head reference")]
    if not layout.block_path(head).is_file():
        return [
            IntegrityProblem(
                layout.head_ref, f"points to block {head}, which does not exist ({layout.block_path(head)})"
            )
        ]
    chain, problem = _walk(dataset, head)
    if problem is not None:
        return [problem]
    problems: list[IntegrityProblem] = []
    projection = _revalidate(chain, problems)
    problems.extend(_file_problems(dataset, chain, integrity))
    if projection is not None and not problems:
        problems.extend(_cache_problems(dataset, projection))
    return problems


def _without_path(message: str, path: Path) -> str:
    return message.removeprefix(f"{path}: ")


def _walk(dataset: Dataset, head: Multihash) -> tuple[_Chain, IntegrityProblem | None]:
    """The chain newest first, or the first block that cannot be read as what its name promises."""
    chain: _Chain = []
    current: Multihash | None = head
    referrer = "refs/head"
    while current is not None:
        path = dataset.layout.block_path(current)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return chain, IntegrityProblem(path, f"missing block (referenced by {referrer})")
        except OSError as e:
            return chain, IntegrityProblem(path, f"cannot read block: {e.strerror}")
        actual = hash_block_bytes(data)
        if actual != current:
            return chain, IntegrityProblem(
                path, f"block content hashes to {actual}, not to its file name (the block is corrupted)"
            )
        try:
            block, _version = decode_block(data)
        except SerializationError as e:
            return chain, IntegrityProblem(path, f"cannot decode block: {e}")
        chain.append((current, block, path))
        referrer = f"the prevBlockHash of block {block.sequence_number}"
        current = block.prev_block_hash
    return chain, None


def _revalidate(chain: _Chain, problems: list[IntegrityProblem]) -> ChainProjection | None:
    """Replay every invariant from the Seed; the first violation is reported and ends the replay."""
    projection: ChainProjection | None = None
    for block_hash, block, path in reversed(chain):
        try:
            projection = append_block(projection, block_hash, block)
        except ChainInvariantError as e:
            problems.append(IntegrityProblem(path, str(e)))
            return None
    return projection


def _file_problems(dataset: Dataset, chain: _Chain, integrity: bool) -> list[IntegrityProblem]:
    problems: list[IntegrityProblem] = []
    seen: set[Path] = set()
    for _hash, block, _path in reversed(chain):
        event = block.event
        if not isinstance(event, DATA_EVENTS):
            continue
        objects = (
            ("newData", event.new_data, dataset.layout.data_path, data_file_problem),
            ("newCheckpoint", event.new_checkpoint, dataset.layout.checkpoint_path, checkpoint_file_problem),
        )
        for field, described, locate, check in objects:
            if described is None or (path := locate(described.physical_hash)) in seen:
                continue
            seen.add(path)
            problem = check(path, described, integrity=integrity)  # type: ignore[arg-type]
            if problem:
                problems.append(
                    IntegrityProblem(path, f"{problem} ({field} of block {block.sequence_number})")
                )
    return problems


def _cache_problems(dataset: Dataset, projection: ChainProjection) -> list[IntegrityProblem]:
    """A cache keyed by the current head must equal the replayed projection (planning trusts it)."""
    path = dataset.layout.projection_cache
    try:
        cached = ChainProjection.from_json(path.read_bytes())
    except OSError:
        return []
    except InvalidValueError:
        return []  # unreadable caches are ignored and rebuilt, so they mislead nobody
    if cached.head == projection.head and cached != projection:
        return [
            IntegrityProblem(path, "the projection cache disagrees with the chain (delete it to rebuild)")
        ]
    return []


# --- checks against the workspace ---------------------------------------------------------------


def verify_in_workspace(
    workspace: Workspace, dataset: Dataset, *, integrity: bool = True
) -> list[IntegrityProblem]:
    """:func:`verify_dataset`, then the dataset's identity and, for a derivative, its consumed inputs."""
    problems = verify_dataset(dataset, integrity=integrity)
    if problems:
        return problems  # the chain itself is broken: its Seed and inputs cannot be trusted
    problems += _identity_problems(workspace, dataset)
    if dataset.kind is model.DatasetKind.Derivative:
        problems += _consumed_input_problems(workspace, dataset)
    return problems


def _identity_problems(workspace: Workspace, dataset: Dataset) -> list[IntegrityProblem]:
    """The Seed's id must be the one recorded for this name, and its key must be in ``keys/``."""
    seed_id = dataset.dataset_id
    record = workspace.name_record(dataset.name)
    try:
        recorded = workspace.recorded_id(dataset.name)
    except InvalidValueError as e:
        return [IntegrityProblem(record, f"unreadable record of dataset {dataset.name!r}'s id: {e}")]
    problems: list[IntegrityProblem] = []
    if recorded is None:
        problems.append(
            IntegrityProblem(
                record,
                f"the workspace has no record of dataset {dataset.name!r} (Seed id {seed_id}): "
                "its folder was not created by this workspace",
            )
        )
    elif recorded != seed_id:
        owner = _recorded_name_of(workspace, seed_id)
        whose = f"the id of dataset {owner!r}" if owner else "an id this workspace never created"
        problems.append(
            IntegrityProblem(
                dataset.path,
                f"dataset {dataset.name!r} has Seed id {seed_id}, {whose}; the workspace created it as "
                f"{recorded} ({record}): the folder holds another dataset's chain",
            )
        )
    if not (workspace.is_received(dataset.name) and not workspace.key_path(seed_id).exists()):
        problems += _key_problems(
            workspace, dataset.name, seed_id
        )  # a pulled dataset's key stays with its creator
    return problems


def _recorded_name_of(workspace: Workspace, dataset_id: DatasetId) -> str | None:
    if not workspace.names_dir.is_dir():
        return None
    for record in sorted(workspace.names_dir.iterdir()):
        try:
            if workspace.recorded_id(record.name) == dataset_id:
                return record.name
        except InvalidValueError:
            continue
    return None


def _key_problems(workspace: Workspace, name: str, seed_id: DatasetId) -> list[IntegrityProblem]:
    path = workspace.key_path(seed_id)
    try:
        key = DatasetKeyPair.from_pem(path.read_bytes())
    except FileNotFoundError:
        return [IntegrityProblem(path, f"missing: no private key for dataset {name!r} (Seed id {seed_id})")]
    except OSError as e:
        return [IntegrityProblem(path, f"cannot read the private key of dataset {name!r}: {e.strerror}")]
    except InvalidValueError as e:
        return [IntegrityProblem(path, f"the private key of dataset {name!r} is unreadable: {e}")]
    if key.dataset_id != seed_id:
        return [
            IntegrityProblem(path, f"holds the key of {key.dataset_id}, not of dataset {name!r} ({seed_id})")
        ]
    return []


def _consumed_input_problems(workspace: Workspace, dataset: Dataset) -> list[IntegrityProblem]:
    """Every input block and offset an ExecuteTransform recorded must be in the input's current chain.

    An input missing from the workspace is not reported here (nothing to compare with; plan reports
    the missing manifest); an input whose own chain is broken is reported by its own verification.
    """
    problems: list[IntegrityProblem] = []
    offsets_of: dict[DatasetId, tuple[Dataset, dict[Multihash, int | None]] | None] = {}
    for _hash, block in dataset.iter_blocks():
        if not isinstance(block.event, model.ExecuteTransform):
            continue
        where = f"block {block.sequence_number} of {dataset.name!r}"
        for qi in block.event.query_inputs:
            if qi.dataset_id not in offsets_of:
                offsets_of[qi.dataset_id] = _chain_offsets(workspace, qi.dataset_id)
            known = offsets_of[qi.dataset_id]
            if known is None:
                continue
            source, offsets = known
            for consumed in (qi.prev_block_hash, qi.new_block_hash):
                if consumed is not None and consumed not in offsets:
                    problems.append(
                        IntegrityProblem(
                            source.layout.head_ref,
                            f"input {source.name!r} no longer contains block {consumed}, which {where} "
                            "recorded as consumed: its refs/head was rolled back or its chain replaced",
                        )
                    )
            if qi.new_block_hash in offsets and qi.new_offset is not None:
                at_block = offsets[qi.new_block_hash]
                if at_block != qi.new_offset:
                    problems.append(
                        IntegrityProblem(
                            source.layout.head_ref,
                            f"{where} recorded input {source.name!r} up to offset {qi.new_offset} at block "
                            f"{qi.new_block_hash}, but the input's chain ends at offset {at_block} there",
                        )
                    )
    return _unique(problems)


def _chain_offsets(
    workspace: Workspace, dataset_id: DatasetId
) -> tuple[Dataset, dict[Multihash, int | None]] | None:
    """Each block of the input's chain -> the last data offset as of that block (``None`` before data)."""
    try:
        source = workspace.find_by_id(dataset_id)
        if source is None:
            return None
        blocks = list(source.iter_blocks())
    except StorageError:
        return None
    offsets: dict[Multihash, int | None] = {}
    last: int | None = None
    for block_hash, block in reversed(blocks):
        event = block.event
        if isinstance(event, DATA_EVENTS) and event.new_data is not None:
            last = event.new_data.offset_interval.end
        offsets[block_hash] = last
    return source, offsets


def _unique(problems: list[IntegrityProblem]) -> list[IntegrityProblem]:
    return list(dict.fromkeys(problems))
