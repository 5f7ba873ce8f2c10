"""Integrity verification: re-derive everything a dataset claims and report each mismatch by path.

``verify`` trusts nothing it can recompute: not the file names (a block must hash to its name), not
the projection cache, not the validation done at append time (the whole chain is re-validated from
the Seed). Problems name the file to look at, so a user can tell a flipped bit in one data file from
a broken chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odfproj.errors import InvalidValueError, SerializationError
from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash as hash_block_bytes
from odfproj.odf.flatbuffers_codec import decode_block
from odfproj.odf.multiformats import Multihash
from odfproj.storage.chain import append_block
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import ChainInvariantError, IntegrityError
from odfproj.storage.head import read_head
from odfproj.storage.objects import checkpoint_file_problem, data_file_problem
from odfproj.storage.projection import DATA_EVENTS, ChainProjection


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
        where = f"newData of block {block.sequence_number}"
        if event.new_data is not None:
            path = dataset.layout.data_path(event.new_data.physical_hash)
            if path not in seen:
                seen.add(path)
                problem = data_file_problem(path, event.new_data, integrity=integrity)
                if problem:
                    problems.append(IntegrityProblem(path, f"{problem} ({where})"))
        if event.new_checkpoint is not None:
            path = dataset.layout.checkpoint_path(event.new_checkpoint.physical_hash)
            if path not in seen:
                seen.add(path)
                problem = checkpoint_file_problem(path, event.new_checkpoint, integrity=integrity)
                if problem:
                    problems.append(
                        IntegrityProblem(path, f"{problem} (newCheckpoint of block {block.sequence_number})")
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
