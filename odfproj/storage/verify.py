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

A full check streams: a first walk from the head to the Seed keeps only each block's hash (checking
that it hashes to its name), and a second reads the blocks again oldest first, replaying the rules
with the projection as the only state carried from block to block. No more than one decoded block
is held at a time, whatever the chain's length.

:func:`check_in_workspace` without ``full`` continues from the dataset's record of its last
successful check (:mod:`odfproj.storage.verify_record`): it reads the blocks from the head back to
the head checked last time (that block included, so the head is always read and re-hashed), checks
only the newer ones and their files, and continues the rules from the state the record holds. A
record whose head is no longer in the chain, or that is unreadable, makes it a full check. What the
record covers is not re-read: a block or file changed after a successful check is found by a
``full`` check only. The record is a cache, not a trust anchor (it sits beside the blocks it vouches
for); the identity checks run every time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from odfproj.errors import InvalidValueError, SerializationError, StorageError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash as hash_block_bytes
from odfproj.odf.flatbuffers_codec import decode_block, decode_block_link
from odfproj.odf.identity import DatasetId, DatasetKeyPair
from odfproj.odf.multiformats import Multihash
from odfproj.storage.areas import ObjectAreas
from odfproj.storage.chain import append_block
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import ChainInvariantError, IntegrityError
from odfproj.storage.head import read_head
from odfproj.storage.objects import checkpoint_file_problem, data_file_problem
from odfproj.storage.projection import DATA_EVENTS, ChainProjection
from odfproj.storage.verify_record import InputMark, VerifyRecord, read_verify_record, write_verify_record
from odfproj.storage.workspace import Workspace

__all__ = ["IntegrityProblem", "Verification", "check_in_workspace", "verify_dataset", "verify_in_workspace"]


@dataclass(frozen=True)
class IntegrityProblem:
    """One thing wrong with a dataset: the file concerned (or expected) and what is wrong with it."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Verification:
    """What one check of a dataset found, and how much of its chain it checked."""

    problems: tuple[IntegrityProblem, ...]
    #: Blocks in the chain (the head's sequence number + 1); 0 when the head names no readable block.
    blocks: int = 0
    #: Blocks this check verified (hash, rules, files): all of them, or those after the last check.
    checked: int = 0
    #: Whether the chain was checked from the Seed (``False``: from the last check's record).
    full: bool = True
    #: Why a check that was not asked to be full was (no record, unreadable, history rewritten ...).
    why_full: str = ""


def verify_dataset(dataset: Dataset, *, integrity: bool = True) -> list[IntegrityProblem]:
    """Every problem found in ``dataset``'s whole chain; an empty list means it is intact.

    Checks the head ref, that every block hashes to its file name and decodes, every chain invariant
    from the Seed on, and that every data file and checkpoint is present with the size the chain
    records. With ``integrity`` (the default) data files and checkpoints are also re-hashed: physical
    hash, logical hash and record count. A broken chain (missing or corrupt block) stops the walk at
    the first bad block, since nothing before it can be reached. Reads no record and writes none.
    """
    return _check_chain(dataset, integrity, None, None).problems


# --- the chain ----------------------------------------------------------------------------------


@dataclass
class _Walk:
    """The first pass, head to Seed (or to the last checked head): the hashes of the blocks to check."""

    #: Newest first: every block after the last checked head (every block when ``continued`` is false).
    hashes: list[Multihash] = field(default_factory=list)
    blocks: int = 0
    #: Stopped at the record's head: only the blocks after it are to be checked.
    continued: bool = False
    #: The record's head was passed without being met: it is not an ancestor of the head.
    diverged: bool = False
    #: The watched head (an existing record's, used or not) is in the chain.
    met: bool = False
    problem: IntegrityProblem | None = None


@dataclass
class _Chain:
    """What a check of the chain found."""

    problems: list[IntegrityProblem]
    #: The replayed state at the head (``None`` unless every rule held).
    projection: ChainProjection | None = None
    walk: _Walk = field(default_factory=_Walk)
    checked: int = 0
    #: Each checked ExecuteTransform's sequence number and consumed inputs, oldest first.
    consumed: list[tuple[int, tuple[model.ExecuteTransformInput, ...]]] = field(default_factory=list)


def _check_chain(
    dataset: Dataset, integrity: bool, record: VerifyRecord | None, watch: Multihash | None
) -> _Chain:
    """Check the chain: all of it, or with ``record`` only the blocks after its head."""
    layout = dataset.layout
    try:
        head = read_head(layout.head_ref)
    except IntegrityError as e:
        return _Chain([IntegrityProblem(layout.head_ref, _without_path(str(e), layout.head_ref))])
    if head is None:
        return _Chain([IntegrityProblem(layout.head_ref, "missing head reference")])
    objects = dataset.objects
    if not objects.block_path(head).is_file():
        return _Chain(
            [
                IntegrityProblem(
                    layout.head_ref,
                    f"points to block {head}, which does not exist ({objects.block_path(head)})",
                )
            ]
        )
    walk = _walk_back(objects, head, record, watch)
    if walk.problem is not None:
        return _Chain([walk.problem], walk=walk)
    base = record.projection if record is not None and walk.continued else None
    chain = _replay(objects, walk, base, integrity)
    if chain.projection is not None and not chain.problems:
        chain.problems.extend(_cache_problems(dataset, chain.projection))
    return chain


def _without_path(message: str, path: Path) -> str:
    return message.removeprefix(f"{path}: ")


def _read_block(path: Path, expected: Multihash, referrer: str) -> tuple[bytes, IntegrityProblem | None]:
    """The block's bytes, or why they are not the block ``expected`` names."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return b"", IntegrityProblem(path, f"missing block (referenced by {referrer})")
    except OSError as e:
        return b"", IntegrityProblem(path, f"cannot read block: {e.strerror}")
    actual = hash_block_bytes(data)
    if actual != expected:
        return b"", IntegrityProblem(
            path, f"block content hashes to {actual}, not to its file name (the block is corrupted)"
        )
    return data, None


_Decoded = TypeVar("_Decoded")


def _decoded(
    path: Path, expected: Multihash, referrer: str, decode: Callable[[bytes], _Decoded]
) -> tuple[_Decoded | None, IntegrityProblem | None]:
    """The block ``expected`` names, read, checked by hash and decoded by ``decode``; or why it cannot be."""
    data, problem = _read_block(path, expected, referrer)
    if problem is not None:
        return None, problem
    try:
        return decode(data), None
    except SerializationError as e:
        return None, IntegrityProblem(path, f"cannot decode block: {e}")


def _walk_back(
    objects: ObjectAreas, head: Multihash, record: VerifyRecord | None, watch: Multihash | None
) -> _Walk:
    """Follow ``prevBlockHash`` from the head, keeping hashes only, to the Seed or ``record``'s head.

    Each block read is checked against its name, and only its sequence number and link are decoded.
    The record's head itself is read too, so the block the record names (the head, when nothing is
    new) is proven intact. Passing below the record's sequence number without meeting its head means
    the record is of another history: the walk goes on to the Seed.
    """
    walk = _Walk()
    current: Multihash | None = head
    referrer = "refs/head"
    while current is not None:
        path = objects.block_path(current)
        link, problem = _decoded(path, current, referrer, decode_block_link)
        if link is None:
            walk.problem = problem
            return walk
        sequence_number, prev = link
        if current == head:
            walk.blocks = sequence_number + 1
        walk.met = walk.met or current == watch
        if record is not None:
            if current == record.head:
                walk.continued = True
                return walk
            if sequence_number <= record.projection.sequence_number:
                record, walk.diverged = None, True
        walk.hashes.append(current)
        referrer = f"the prevBlockHash of block {sequence_number}"
        current = prev
    return walk


def _replay(objects: ObjectAreas, walk: _Walk, base: ChainProjection | None, integrity: bool) -> _Chain:
    """The second pass, oldest first: each block read again, its rules replayed, its files checked.

    The first rule broken ends the replay (the state after it is unknown) but not the file checks,
    which are reported for every slice, after the rule. A block that changed since the first pass
    ends everything, as a broken chain does.
    """
    chain = _Chain([], walk=walk)
    rule_problems: list[IntegrityProblem] = []
    file_problems: list[IntegrityProblem] = []
    seen: dict[str, set[Multihash]] = {"newData": set(), "newCheckpoint": set()}
    projection = base
    hashes = walk.hashes
    while hashes:
        block_hash = hashes.pop()
        path = objects.block_path(block_hash)
        decoded, problem = _decoded(
            path, block_hash, "a block read a moment before: removed while verify ran", decode_block
        )
        if decoded is None:
            assert problem is not None
            return _Chain([problem], walk=walk)
        block, _version = decoded
        chain.checked += 1
        if not rule_problems:
            try:
                projection = append_block(projection, block_hash, block)
            except ChainInvariantError as e:
                rule_problems.append(IntegrityProblem(path, str(e)))
        event = block.event
        if isinstance(event, DATA_EVENTS):
            file_problems.extend(_object_problems(objects, block.sequence_number, event, integrity, seen))
            if isinstance(event, model.ExecuteTransform):
                chain.consumed.append((block.sequence_number, event.query_inputs))
    chain.problems = rule_problems + file_problems
    chain.projection = None if rule_problems else projection
    return chain


def _object_problems(
    objects: ObjectAreas,
    sequence_number: int,
    event: model.AddData | model.ExecuteTransform,
    integrity: bool,
    seen: dict[str, set[Multihash]],
) -> list[IntegrityProblem]:
    """The data file and checkpoint of one data event, each checked once per check."""
    problems: list[IntegrityProblem] = []
    objects = (
        ("newData", event.new_data, objects.data_path, data_file_problem),
        ("newCheckpoint", event.new_checkpoint, objects.checkpoint_path, checkpoint_file_problem),
    )
    for name, described, locate, check in objects:
        if described is None or described.physical_hash in seen[name]:
            continue
        seen[name].add(described.physical_hash)
        path = locate(described.physical_hash)
        problem = check(path, described, integrity=integrity)  # type: ignore[operator]
        if problem:
            problems.append(IntegrityProblem(path, f"{problem} ({name} of block {sequence_number})"))
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
    workspace: Workspace, dataset: Dataset, *, integrity: bool = True, full: bool = True
) -> list[IntegrityProblem]:
    """The problems :func:`check_in_workspace` finds."""
    return list(check_in_workspace(workspace, dataset, integrity=integrity, full=full).problems)


def check_in_workspace(
    workspace: Workspace, dataset: Dataset, *, integrity: bool = True, full: bool = True
) -> Verification:
    """The dataset's chain and files, then its identity and, for a derivative, its consumed inputs.

    ``full`` checks the whole chain. Without it the check continues from the dataset's record of its
    last successful check when there is a usable one (see the module's docstring): one written by a
    check that re-hashed the files when ``integrity`` asks for that, whose head is still in the chain.
    A check that finds nothing wrong leaves its own record, except that one without ``integrity``
    keeps a record of a check with it that it continued from (or passed): that one says more.
    """
    record, why_full = read_verify_record(dataset)
    usable = None if full else record
    if full:
        why_full = ""
    elif usable is not None and integrity and not usable.integrity:
        usable, why_full = None, "the last check did not re-hash the data files (it ran without --integrity)"
    chain = _check_chain(dataset, integrity, usable, record.head if record is not None else None)
    walk = chain.walk
    incremental = usable is not None and not walk.diverged  # (a broken chain may stop the walk before)
    if walk.diverged:
        why_full = "its head is not a descendant of the one checked last time (its history was rewritten)"
    elif incremental:
        why_full = ""
    elif not full and not why_full:
        why_full = "no earlier check is recorded"

    def result(problems: list[IntegrityProblem]) -> Verification:
        return Verification(tuple(problems), walk.blocks, chain.checked, not incremental, why_full)

    if chain.problems or chain.projection is None:
        return result(chain.problems)  # the chain itself is broken: its Seed and inputs cannot be trusted
    projection = chain.projection
    problems = _identity_problems(workspace, dataset, projection.dataset_id)
    marks: Mapping[DatasetId, InputMark] | None = {}
    if projection.kind is model.DatasetKind.Derivative:
        inputs = _consumed_inputs(workspace, dataset, chain, record if walk.continued else None)
        problems += inputs.problems
        marks = inputs.marks
    if not problems and not (not integrity and record is not None and record.integrity and walk.met):
        write_verify_record(dataset, VerifyRecord(projection, integrity, marks))
    return result(problems)


def _identity_problems(workspace: Workspace, dataset: Dataset, seed_id: DatasetId) -> list[IntegrityProblem]:
    """The Seed's id must be the one recorded for this name, and its key must be in ``keys/``."""
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


# --- a derivative's consumed inputs ---------------------------------------------------------------

_Consumed = list[tuple[int, tuple[model.ExecuteTransformInput, ...]]]


@dataclass
class _Inputs:
    problems: list[IntegrityProblem]
    #: Each input's head the consumed blocks were found under; ``None`` if some input was not checked.
    marks: Mapping[DatasetId, InputMark] | None
    #: An input's chain no longer holds the head recorded last time (only when continuing a record).
    rewritten: bool = False


def _consumed_inputs(
    workspace: Workspace, dataset: Dataset, chain: _Chain, record: VerifyRecord | None
) -> _Inputs:
    """Every input block and offset an ExecuteTransform recorded must be in the input's current chain.

    Continuing ``record`` (when it could check every input), only the new blocks' consumed inputs are
    looked for, and each input recorded must still hold the head it had then: a chain that holds a
    block holds everything before it unchanged, so the blocks consumed before are still there, at the
    same offsets. An input that no longer does (rolled back, replaced) means checking every block's.
    """
    if record is not None and record.inputs is not None:
        found = _check_consumed(workspace, dataset.name, chain.consumed, record.inputs)
        if not found.rewritten:
            return found
    consumed = chain.consumed if not chain.walk.continued else _all_consumed(dataset)
    return _check_consumed(workspace, dataset.name, consumed, {})


def _all_consumed(dataset: Dataset) -> _Consumed:
    """Every ExecuteTransform's consumed inputs, oldest first, read block by block (not held)."""
    consumed = [
        (block.sequence_number, block.event.query_inputs)
        for _hash, block in dataset.iter_blocks()
        if isinstance(block.event, model.ExecuteTransform)
    ]
    consumed.reverse()
    return consumed


def _check_consumed(
    workspace: Workspace, name: str, consumed: _Consumed, anchors: Mapping[DatasetId, InputMark]
) -> _Inputs:
    """``consumed`` looked for in each input's chain; every input of ``anchors`` must still hold its mark.

    An input missing from the workspace is not reported here (nothing to compare with; plan reports
    the missing manifest); an input whose own chain is broken is reported by its own verification.
    """
    targets: dict[DatasetId, set[Multihash]] = {dataset_id: set() for dataset_id in anchors}
    for _sequence_number, query_inputs in consumed:
        for qi in query_inputs:
            wanted = targets.setdefault(qi.dataset_id, set())
            wanted.update(h for h in (qi.prev_block_hash, qi.new_block_hash) if h is not None)
    marks: dict[DatasetId, InputMark] = {}
    complete = True
    found: dict[DatasetId, tuple[Dataset, dict[Multihash, int | None]]] = {}
    for dataset_id, wanted in targets.items():
        try:
            source = workspace.find_by_id(dataset_id)
            positions = _positions(source, wanted, anchors.get(dataset_id)) if source is not None else None
        except StorageError:
            positions = None
        if source is None or positions is None:
            complete = False
            continue
        offsets, mark, met = positions
        if not met:
            return _Inputs([], None, rewritten=True)
        if mark is not None:
            marks[dataset_id] = mark
        found[dataset_id] = (source, offsets)
    problems: list[IntegrityProblem] = []
    for sequence_number, query_inputs in reversed(consumed):
        where = f"block {sequence_number} of {name!r}"
        for qi in query_inputs:
            if qi.dataset_id in found:
                problems += _input_problems(where, qi, *found[qi.dataset_id])
    return _Inputs(_unique(problems), marks if complete else None)


def _input_problems(
    where: str, qi: model.ExecuteTransformInput, source: Dataset, offsets: dict[Multihash, int | None]
) -> list[IntegrityProblem]:
    problems: list[IntegrityProblem] = []
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
    return problems


def _positions(
    source: Dataset, wanted: Iterable[Multihash], anchor: InputMark | None
) -> tuple[dict[Multihash, int | None], InputMark | None, bool]:
    """Walk the input's chain from its head: each wanted block found -> the input's last data offset as of
    it (``None`` before any data); the head walked from; whether ``anchor`` (if any) is in the chain.

    The walk stops once every wanted block is placed and the anchor is met or passed, so continuing a
    record reads about the input's blocks since then. Raises :class:`StorageError` for a broken chain.
    """
    remaining = set(wanted)
    head = source.head()
    if anchor is not None and head == anchor.head and not remaining:
        return {}, anchor, True  # nothing to look for, nothing moved
    offsets: dict[Multihash, int | None] = {}
    pending: list[Multihash] = []  # found, their offset not yet known (no data block met below them yet)
    mark: InputMark | None = None
    met = anchor is None
    for block_hash, block in source.iter_blocks():
        if mark is None:
            mark = InputMark(block_hash, block.sequence_number)
        if block_hash in remaining:
            remaining.discard(block_hash)
            pending.append(block_hash)
        met = met or (anchor is not None and block_hash == anchor.head)
        event = block.event
        if isinstance(event, DATA_EVENTS) and event.new_data is not None:
            offsets.update(dict.fromkeys(pending, event.new_data.offset_interval.end))
            pending.clear()
        passed = met or (anchor is not None and block.sequence_number <= anchor.sequence_number)
        if passed and not remaining and not pending:
            break
    offsets.update(dict.fromkeys(pending, None))
    return offsets, mark, met


def _unique(problems: list[IntegrityProblem]) -> list[IntegrityProblem]:
    return list(dict.fromkeys(problems))
