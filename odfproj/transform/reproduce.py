"""Re-execute a recorded ExecuteTransform and compare its output with what the block records.

For ``verify --reproduce``. The block's inputs are read exactly as they were when the block was made:
every input up to the ``newBlockHash``/``newOffset`` it had consumed after that block (the last
non-empty ones up to and including it), the derivative's own changelog up to the block's
``prevOffset``, the SetTransform and data schema in effect before the block, and the block's system
time. The same code as a live update (:mod:`odfproj.transform.execute`) recomputes the changes; their
logical hash must equal ``newData.logicalHash`` (and no data must come out where none was recorded).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from odfproj.engine.spark import SparkEngine, translating_errors
from odfproj.odf import model
from odfproj.odf.arrow_schema import decode_arrow_schema
from odfproj.odf.data_schema import Vocab
from odfproj.odf.multiformats import Multihash
from odfproj.state.frames import changelog_as_of, read_changelog_frame
from odfproj.storage.objects import logical_hash
from odfproj.storage.projection import ChainProjection, advance
from odfproj.storage.workspace import Workspace
from odfproj.transform.errors import ReproduceMismatchError, TransformError
from odfproj.transform.execute import compute_changes, write_changes
from odfproj.transform.inputs import resolve_inputs

__all__ = ["ReproduceResult", "check_reproducible", "reproduce_all", "reproduce_transform"]


@dataclass(frozen=True)
class ReproduceResult:
    """The outcome of re-executing one ExecuteTransform block; truthy when it reproduced."""

    dataset: str
    block_hash: Multihash
    sequence_number: int
    ok: bool
    #: The recorded ``newData.logicalHash`` (``None``: the block recorded no data).
    expected: Multihash | None
    #: The logical hash of the re-execution (``None``: it produced no data).
    actual: Multihash | None
    message: str

    def __bool__(self) -> bool:
        return self.ok


def reproduce_transform(
    workspace: Workspace, name: str, block_hash: Multihash, engine: SparkEngine
) -> ReproduceResult:
    """Re-execute the ExecuteTransform ``block_hash`` of the derivative ``name`` and compare results."""
    dataset = workspace.open(name, recover=False)
    chain = list(dataset.iter_blocks())
    chain.reverse()  # oldest first
    index = next((i for i, (h, _) in enumerate(chain) if h == block_hash), None)
    if index is None:
        raise TransformError(f"dataset {name}: block {block_hash} is not in its metadata chain")
    block = chain[index][1]
    event = block.event
    if not isinstance(event, model.ExecuteTransform):
        raise TransformError(f"dataset {name}: block {block_hash} is not an ExecuteTransform")
    label = f"dataset {name}, block {block.sequence_number} ({block_hash})"

    # The chain as it stood at the block: its definitions and how far each input had been consumed.
    at: ChainProjection | None = None
    for earlier_hash, earlier in chain[: index + 1]:
        at = advance(at, earlier_hash, earlier)
    assert at is not None
    set_transform = at.set_transform
    vocab = Vocab.of(at.set_vocab)
    schema_bytes = at.schema
    positions = {i: (p.new_block_hash, p.new_offset) for i, p in at.inputs.items()}
    if set_transform is None or not isinstance(set_transform.transform, model.TransformSql):
        raise TransformError(f"{label}: no Sql SetTransform precedes the block")
    next_offset = 0 if event.prev_offset is None else event.prev_offset + 1

    with tempfile.TemporaryDirectory(prefix="odfproj-reproduce-") as scratch:
        path = Path(scratch) / "data.parquet"
        with translating_errors(f"reproducing {label}"):
            session = engine.session
            histories = {}
            input_vocabs = {}
            for alias, dataset_id, input_dataset in resolve_inputs(workspace, name, set_transform.inputs):
                input_vocabs[alias] = Vocab.of(input_dataset.projection().set_vocab)
                upto_block, upto_offset = positions.get(dataset_id, (None, None))
                view = changelog_as_of(input_dataset, upto_block, upto_offset)
                schema = view.schema if view.schema is not None else input_dataset.projection().arrow_schema
                if schema is None:
                    raise TransformError(f"{label}: input {alias} has no data schema")
                histories[alias] = read_changelog_frame(session, view, schema)
            own = None
            if event.prev_offset is not None:  # the derivative's own records before the block
                own = read_changelog_frame(
                    session, changelog_as_of(dataset, block.prev_block_hash, event.prev_offset)
                )
            changes = compute_changes(
                engine,
                set_transform.transform,
                histories,
                own,
                where=label,
                vocab=vocab,
                input_vocabs=input_vocabs,
            )
            declared = decode_arrow_schema(schema_bytes) if schema_bytes is not None else None
            written = write_changes(changes, next_offset, block.system_time, path, declared, vocab)
        actual = logical_hash(path) if written.count else None
    recorded = event.new_data
    expected = recorded.logical_hash if recorded is not None else None
    if recorded is None:
        ok = written.count == 0
        message = (
            "reproduced (no data)"
            if ok
            else f"{label}: re-execution produced {written.count} records, the block recorded none"
        )
    else:
        interval = recorded.offset_interval
        recorded_count = interval.end - interval.start + 1
        ok = actual == expected and written.count == recorded_count
        message = (
            "reproduced"
            if ok
            else f"{label}: re-execution gave {written.count} records with logical hash {actual}, the block "
            f"records {recorded_count} with {expected}"
        )
    return ReproduceResult(name, block_hash, block.sequence_number, ok, expected, actual, message)


def reproduce_all(workspace: Workspace, name: str, engine: SparkEngine) -> list[ReproduceResult]:
    """Re-execute every ExecuteTransform of ``name``, oldest first."""
    dataset = workspace.open(name, recover=False)
    blocks = [h for h, b in dataset.iter_blocks() if isinstance(b.event, model.ExecuteTransform)]
    return [reproduce_transform(workspace, name, h, engine) for h in reversed(blocks)]


def check_reproducible(workspace: Workspace, name: str, engine: SparkEngine) -> int:
    """Reproduce every ExecuteTransform of ``name``; raise :class:`ReproduceMismatchError` at the first
    mismatch (its message names the block). Returns how many blocks were checked."""
    results = reproduce_all(workspace, name, engine)
    for result in results:
        if not result.ok:
            raise ReproduceMismatchError(result.message)
    return len(results)
