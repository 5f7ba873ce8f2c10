"""``verify`` after a successful check reads only what is new (issue 36), and a full check streams.

The record of the last check (``info/odfproj-verified.json``) lets a check start at the head it
verified: the blocks after it are read and checked against the rules as they stood there, their files
hashed, and nothing older is read. What that does not see (a change to what was already checked) is
what ``full`` is for. Reads are counted at the file system: every ``Path.read_bytes`` of a block file.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash, encode_block
from odfproj.odf.multiformats import Multihash
from odfproj.storage import verify as verify_module
from odfproj.storage.dataset import Dataset
from odfproj.storage.verify import Verification, check_in_workspace, verify_dataset
from odfproj.storage.verify_record import VERIFY_RECORD
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import BASE_TIME, Writer, schema_with, set_schema

N_DATA = 6


@pytest.fixture
def hourly(root: Dataset, writer: Writer) -> Dataset:
    """A root with a schema and ``N_DATA`` data blocks, each with a checkpoint (8 blocks)."""
    for i in range(N_DATA):
        writer.add_data(2, watermark=writer_hour(i), checkpoint=f"checkpoint {i}".encode())
    return root


def writer_hour(i: int) -> datetime:
    return BASE_TIME + timedelta(hours=i)


def _check(workspace: Workspace, dataset: Dataset, **kwargs: bool) -> Verification:
    return check_in_workspace(workspace, dataset, **{"integrity": True, "full": False, **kwargs})


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Every block file read (``Path.read_bytes`` of a file under a ``blocks/`` folder), in order."""
    seen: list[Path] = []
    original = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.parent.name == "blocks":
            seen.append(self)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    yield seen


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every data file and checkpoint verify checks."""
    seen: list[Path] = []
    for name in ("data_file_problem", "checkpoint_file_problem"):
        original = getattr(verify_module, name)

        def check(path: Path, described: object, *, integrity: bool = True, _original=original) -> str | None:
            seen.append(path)
            return _original(path, described, integrity=integrity)

        monkeypatch.setattr(verify_module, name, check)
    return seen


def _hashes(dataset: Dataset) -> list[Multihash]:
    """The chain's block hashes, newest first."""
    return [h for h, _ in dataset.iter_blocks()]


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _data_file(dataset: Dataset, block: Multihash) -> Path:
    event = dataset.get_block(block).event
    assert isinstance(event, model.AddData) and event.new_data is not None
    return dataset.layout.data_path(event.new_data.physical_hash)


def _force_append(dataset: Dataset, event: model.MetadataEvent) -> Multihash:
    """Append a block without any validation (what a tool that breaks the rules could leave)."""
    head = dataset.head()
    assert head is not None
    previous = dataset.get_block(head)
    block = model.MetadataBlock(
        system_time=previous.system_time,
        prev_block_hash=head,
        sequence_number=previous.sequence_number + 1,
        event=event,
    )
    data = encode_block(block, version=2)
    new = block_hash(data)
    dataset.layout.block_path(new).write_bytes(data)
    dataset.layout.head_ref.write_text(new.to_multibase())
    return new


# --- only what is new is read --------------------------------------------------------------------


def test_the_first_check_is_full_and_leaves_a_record(workspace: Workspace, hourly: Dataset) -> None:
    result = _check(workspace, hourly)
    assert result == Verification((), blocks=8, checked=8, full=True, why_full="no earlier check is recorded")
    record = json.loads((hourly.layout.info_dir / VERIFY_RECORD).read_bytes())
    assert record["head"] == hourly.head().to_multibase()  # type: ignore[union-attr]
    assert record["integrity"] is True and record["inputs"] == []
    assert record["projection"]["lastOffset"] == 2 * N_DATA - 1


def test_a_check_after_new_blocks_reads_only_those(
    workspace: Workspace, hourly: Dataset, writer: Writer, reads: list[Path], hashed: list[Path]
) -> None:
    assert _check(workspace, hourly).full
    old = _hashes(hourly)
    for i in range(N_DATA, N_DATA + 3):
        writer.add_data(2, watermark=writer_hour(i), checkpoint=f"checkpoint {i}".encode())
    new = _hashes(hourly)[:3]
    reads.clear()
    hashed.clear()

    result = _check(workspace, hourly)

    assert result == Verification((), blocks=11, checked=3, full=False)
    # The three new blocks (twice each: the walk back, then the replay) and the head they continue from.
    assert set(reads) == {hourly.layout.block_path(h) for h in [*new, old[0]]}
    assert len(reads) == 2 * 3 + 1
    assert sorted(p.parent.name for p in hashed) == ["checkpoints"] * 3 + ["data"] * 3
    assert {p for p in hashed if p.parent.name == "data"} == {_data_file(hourly, h) for h in new}
    # ... and the record moved on: nothing new now means reading the head only.
    reads.clear()
    assert _check(workspace, hourly) == Verification((), blocks=11, checked=0, full=False)
    assert reads == [hourly.layout.block_path(new[0])]


def test_full_checks_everything_and_refreshes_the_record(
    workspace: Workspace, hourly: Dataset, writer: Writer, reads: list[Path]
) -> None:
    _check(workspace, hourly)
    writer.add_data(1, watermark=writer_hour(N_DATA))
    reads.clear()
    assert _check(workspace, hourly, full=True) == Verification((), blocks=9, checked=9, full=True)
    assert {p.name for p in reads} == {h.to_multibase() for h in _hashes(hourly)}
    reads.clear()
    assert _check(workspace, hourly).checked == 0  # the full check recorded the new head


def test_the_new_blocks_are_checked_against_the_rules_as_they_stood(
    workspace: Workspace, hourly: Dataset
) -> None:
    """Offsets, watermark, checkpoint links: the state the record carries, not a re-read of the old blocks."""
    _check(workspace, hourly)
    p = hourly.projection()
    assert p.watermark is not None and p.last_checkpoint is not None
    new = _force_append(
        hourly,
        model.AddData(
            prev_offset=p.last_offset,
            prev_checkpoint=p.last_checkpoint.physical_hash,
            new_watermark=p.watermark - timedelta(hours=1),
        ),
    )
    [problem] = _check(workspace, hourly).problems
    assert problem.path == hourly.layout.block_path(new)
    assert "watermarks may not go backwards" in problem.message

    hourly.layout.head_ref.write_text(p.head.to_multibase())
    _force_append(hourly, model.AddData(prev_offset=p.last_offset, new_watermark=p.watermark))
    [problem] = _check(workspace, hourly).problems
    assert "prevCheckpoint is none, expected" in problem.message

    hourly.layout.head_ref.write_text(p.head.to_multibase())
    _force_append(hourly, model.AddData(prev_offset=3, prev_checkpoint=p.last_checkpoint.physical_hash))
    [problem] = _check(workspace, hourly).problems
    assert f"prevOffset is 3, expected {p.last_offset}" in problem.message

    hourly.layout.head_ref.write_text(p.head.to_multibase())
    _force_append(hourly, set_schema(schema_with(("other", pa.int64()))))
    [problem] = _check(workspace, hourly).problems
    assert "a schema may only gain new columns at the end" in problem.message
    hourly.layout.head_ref.write_text(p.head.to_multibase())
    assert _check(workspace, hourly).problems == ()  # the record was left at the last good head


# --- what the incremental check sees and what it does not -------------------------------------------


def test_an_old_block_changed_after_a_check_is_found_only_by_a_full_check(
    workspace: Workspace, hourly: Dataset
) -> None:
    """The record is a cache, not a trust anchor: what it covers is not read again (docs/design/storage.md)."""
    _check(workspace, hourly)
    old_block = hourly.layout.block_path(_hashes(hourly)[3])
    old_data = _data_file(hourly, _hashes(hourly)[2])
    _flip_byte(old_block)
    _flip_byte(old_data)

    assert _check(workspace, hourly).problems == ()
    problems = _check(workspace, hourly, full=True).problems
    assert [p.path for p in problems] == [old_block]  # a broken chain: reported at the first bad block
    assert "not to its file name" in problems[0].message
    assert verify_dataset(hourly) == list(problems)  # the chain-only check never uses the record


def test_an_old_data_file_changed_after_a_check_is_found_only_by_a_full_check(
    workspace: Workspace, hourly: Dataset
) -> None:
    _check(workspace, hourly)
    old_data = _data_file(hourly, _hashes(hourly)[2])
    _flip_byte(old_data)
    assert _check(workspace, hourly).problems == ()
    [problem] = _check(workspace, hourly, full=True).problems
    assert problem.path == old_data and problem.message.startswith("physical hash is ")
    assert _check(workspace, hourly, full=True).problems == (problem,)  # a failed check keeps no record


def test_the_head_checked_last_time_is_read_again(workspace: Workspace, hourly: Dataset) -> None:
    _check(workspace, hourly)
    head = hourly.layout.block_path(hourly.head())  # type: ignore[arg-type]
    _flip_byte(head)
    [problem] = _check(workspace, hourly).problems
    assert problem.path == head and "not to its file name" in problem.message


def test_a_new_block_or_its_data_changed_is_found(
    workspace: Workspace, hourly: Dataset, writer: Writer
) -> None:
    _check(workspace, hourly)
    writer.add_data(2, watermark=writer_hour(N_DATA))
    writer.add_data(2, watermark=writer_hour(N_DATA + 1))
    first_new = _hashes(hourly)[1]
    new_data = _data_file(hourly, _hashes(hourly)[0])
    _flip_byte(new_data)
    [problem] = _check(workspace, hourly).problems
    assert problem.path == new_data and "newData of block 9" in problem.message

    _flip_byte(hourly.layout.block_path(first_new))
    [problem] = _check(workspace, hourly).problems
    assert problem.path == hourly.layout.block_path(first_new)
    assert "not to its file name" in problem.message


# --- when the record cannot be used ----------------------------------------------------------------


def test_a_record_of_another_history_means_a_full_check(
    workspace: Workspace, hourly: Dataset, writer: Writer, reads: list[Path]
) -> None:
    _check(workspace, hourly)
    fork_point = _hashes(hourly)[2]
    hourly.layout.head_ref.write_text(fork_point.to_multibase())  # history rewritten from block 5 on
    writer.add_data(5, watermark=writer_hour(N_DATA + 3))
    writer.add_data(5, watermark=writer_hour(N_DATA + 4))
    reads.clear()

    result = _check(workspace, hourly)

    assert result.problems == () and result.full and result.checked == result.blocks == 8
    assert "not a descendant of the one checked last time" in result.why_full
    assert {p.name for p in reads} == {h.to_multibase() for h in _hashes(hourly)}
    assert not _check(workspace, hourly).full  # and the record now names the new history


def test_a_rolled_back_head_means_a_full_check(workspace: Workspace, hourly: Dataset) -> None:
    _check(workspace, hourly)
    hourly.layout.head_ref.write_text(_hashes(hourly)[1].to_multibase())
    result = _check(workspace, hourly)
    assert result.problems == () and result.full and result.checked == 7
    assert "history was rewritten" in result.why_full


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "unreadable (malformed verify record"),
        (b'{"format": 99}', "not a verify record of the current format"),
        (b'{"format": 1, "head": "x"}', "unreadable (malformed verify record: KeyError"),
    ],
)
def test_a_corrupt_record_means_a_full_check(
    workspace: Workspace, hourly: Dataset, content: bytes, why: str
) -> None:
    _check(workspace, hourly)
    (hourly.layout.info_dir / VERIFY_RECORD).write_bytes(content)
    result = _check(workspace, hourly)
    assert result.problems == () and result.full and result.checked == 8
    assert why in result.why_full
    assert not _check(workspace, hourly).full  # rewritten


def test_a_record_whose_state_is_not_its_head_is_refused(workspace: Workspace, hourly: Dataset) -> None:
    _check(workspace, hourly)
    path = hourly.layout.info_dir / VERIFY_RECORD
    record = json.loads(path.read_bytes())
    record["head"] = _hashes(hourly)[1].to_multibase()
    path.write_text(json.dumps(record))
    result = _check(workspace, hourly)
    assert result.full and "its head is not the head of the state it holds" in result.why_full


def test_integrity_needs_a_record_of_a_check_that_rehashed(
    workspace: Workspace, hourly: Dataset, writer: Writer
) -> None:
    plain = _check(workspace, hourly, integrity=False)
    assert plain.full
    result = _check(workspace, hourly)
    assert result.full and "ran without --integrity" in result.why_full
    # A check without --integrity continues from an --integrity one and keeps its record.
    writer.add_data(1, watermark=writer_hour(N_DATA))
    assert _check(workspace, hourly, integrity=False) == Verification((), blocks=9, checked=1, full=False)
    assert _check(workspace, hourly, integrity=False, full=True).full
    assert _check(workspace, hourly) == Verification((), blocks=9, checked=1, full=False)


def test_a_check_that_finds_a_problem_leaves_no_record(workspace: Workspace, hourly: Dataset) -> None:
    data = _data_file(hourly, _hashes(hourly)[0])
    _flip_byte(data)
    assert _check(workspace, hourly).problems
    assert not (hourly.layout.info_dir / VERIFY_RECORD).exists()


def test_the_identity_is_checked_every_time(workspace: Workspace, hourly: Dataset) -> None:
    _check(workspace, hourly)
    workspace.key_path(hourly.dataset_id).unlink()
    result = _check(workspace, hourly)
    assert not result.full and [p.message for p in result.problems] == [
        f"missing: no private key for dataset 'root' (Seed id {hourly.dataset_id})"
    ]


# --- a full check streams ------------------------------------------------------------------------------


def test_a_full_check_holds_one_decoded_block_at_a_time(
    hourly: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks are decoded once each, oldest first, and each is released before the next is decoded."""
    gc.collect()
    before = _decoded_blocks()
    alive: list[int] = []
    original = verify_module.decode_block

    def decode(data: bytes) -> tuple[model.MetadataBlock, int]:
        decoded = original(data)
        alive.append(_decoded_blocks() - before)
        return decoded

    monkeypatch.setattr(verify_module, "decode_block", decode)
    assert verify_dataset(hourly) == []
    assert len(alive) == 8  # each block decoded once
    assert max(alive) <= 2  # the one just decoded, and the previous one until its name is reused


def _decoded_blocks() -> int:
    return sum(isinstance(o, model.MetadataBlock) for o in gc.get_objects())
