"""Tampering: every damaged object is caught by ``verify_dataset`` and named by its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash, encode_block
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import IntegrityError
from odfproj.storage.verify import IntegrityProblem, verify_dataset
from tests.storage.helpers.chains import Writer


@pytest.fixture
def filled(root: Dataset, writer: Writer) -> Dataset:
    writer.add_data(3, checkpoint=b"first checkpoint")
    writer.add_data(4, checkpoint=b"second checkpoint")
    root.append([model.SetInfo(description="after the data")])
    assert verify_dataset(root) == []
    return root


def _flip_byte(path: Path, at: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    index = len(data) // 2 if at is None else at
    data[index] ^= 0x01
    path.write_bytes(bytes(data))


def _event_files(dataset: Dataset) -> tuple[list[Path], list[Path]]:
    data, checkpoints = [], []
    for _, block in dataset.iter_blocks():
        if isinstance(block.event, model.AddData):
            if block.event.new_data:
                data.append(dataset.layout.data_path(block.event.new_data.physical_hash))
            if block.event.new_checkpoint:
                checkpoints.append(dataset.layout.checkpoint_path(block.event.new_checkpoint.physical_hash))
    return data, checkpoints


def _only_problem(dataset: Dataset, **kwargs: bool) -> IntegrityProblem:
    problems = verify_dataset(dataset, **kwargs)
    assert len(problems) == 1, problems
    return problems[0]


def test_flipped_byte_in_a_block(filled: Dataset) -> None:
    middle = list(filled.iter_blocks())[2][0]
    path = filled.layout.block_path(middle)
    _flip_byte(path)
    problem = _only_problem(filled)
    assert problem.path == path
    assert "not to its file name" in problem.message
    with pytest.raises(IntegrityError, match="block content does not match its hash"):
        list(filled.iter_blocks())


def test_flipped_byte_in_a_data_file(filled: Dataset) -> None:
    newest, oldest = _event_files(filled)[0]
    _flip_byte(oldest)
    problem = _only_problem(filled)
    assert problem.path == oldest
    assert problem.message.startswith("physical hash is ")
    assert problem.message.endswith("(newData of block 2)")
    assert verify_dataset(filled, integrity=False) == []  # size-only checks cannot see a flipped bit
    assert newest.exists()


def test_flipped_byte_in_a_checkpoint(filled: Dataset) -> None:
    newest, _ = _event_files(filled)[1]
    _flip_byte(newest, at=0)
    problem = _only_problem(filled)
    assert problem.path == newest
    assert "physical hash is" in problem.message and "newCheckpoint of block 3" in problem.message


def test_deleted_data_file_names_the_expected_path(filled: Dataset) -> None:
    newest, _ = _event_files(filled)[0]
    newest.unlink()
    problem = _only_problem(filled, integrity=False)
    assert problem.path == newest
    assert problem.message == "missing data file (newData of block 3)"


def test_truncated_data_file(filled: Dataset) -> None:
    newest, _ = _event_files(filled)[0]
    newest.write_bytes(newest.read_bytes()[:-10])
    problem = _only_problem(filled, integrity=False)
    assert problem.path == newest and problem.message.startswith("size is ")


def test_head_pointing_at_a_missing_block(filled: Dataset) -> None:
    ghost = block_hash(b"no such block")
    filled.layout.head_ref.write_text(ghost.to_multibase())
    problem = _only_problem(filled)
    assert problem.path == filled.layout.head_ref
    assert (
        problem.message
        == f"points to block {ghost}, which does not exist ({filled.layout.block_path(ghost)})"
    )


def test_garbage_head_ref(filled: Dataset) -> None:
    filled.layout.head_ref.write_text("not a hash")
    problem = _only_problem(filled)
    assert problem.path == filled.layout.head_ref
    assert "not a block hash" in problem.message


def test_missing_block_inside_the_chain(filled: Dataset) -> None:
    chain = list(filled.iter_blocks())
    missing = filled.layout.block_path(chain[3][0])
    missing.unlink()
    problem = _only_problem(filled)
    assert problem.path == missing
    assert (
        problem.message
        == f"missing block (referenced by the prevBlockHash of block {chain[2][1].sequence_number})"
    )


def test_a_well_formed_block_that_breaks_an_invariant(filled: Dataset) -> None:
    """A block written behind our back, with a valid hash, that skips a sequence number."""
    head = filled.head()
    bad = model.MetadataBlock(
        system_time=filled.get_block(head).system_time,
        prev_block_hash=head,
        sequence_number=99,
        event=model.SetInfo(description="forged"),
    )
    data = encode_block(bad)
    path = filled.layout.block_path(block_hash(data))
    path.write_bytes(data)
    filled.layout.head_ref.write_text(block_hash(data).to_multibase())
    problem = _only_problem(filled)
    assert problem.path == path
    assert "sequence number is 99, expected" in problem.message
