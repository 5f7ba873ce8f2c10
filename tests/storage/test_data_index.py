"""The data index (storage.data_index): what storage.slices answers from, kept like the projection cache.

Every answer is compared with a walk of the chain itself (``_walked``), which is what the index
replaces: the slices as of each block, the watermark then. No Spark.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from odfproj.odf import model
from odfproj.odf.multiformats import Multihash
from odfproj.storage.data_index import DATA_INDEX_FILE, data_index
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import DATA_EVENTS
from odfproj.storage.slices import data_as_of
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import BASE_TIME, Writer


def _walked(dataset: Dataset, target: Multihash) -> tuple[list[tuple[int, int, str]], datetime | None]:
    """The slices (start, end, physical hash) at or before ``target`` and the watermark then, by walking."""
    slices: list[tuple[int, int, str]] = []
    watermark: datetime | None = None
    seen = started = False
    for block_hash, block in dataset.iter_blocks():
        started = started or block_hash == target
        if not started or not isinstance(block.event, DATA_EVENTS):
            continue
        if not seen:
            watermark, seen = block.event.new_watermark, True
        data = block.event.new_data
        if data is not None:
            slices.append((data.offset_interval.start, data.offset_interval.end, str(data.physical_hash)))
    return slices[::-1], watermark


def _indexed(dataset: Dataset, target: Multihash) -> tuple[list[tuple[int, int, str]], datetime | None]:
    data = data_as_of(dataset, target)
    assert data is not None
    assert all(s.path == dataset.layout.data_path(s.data.physical_hash) for s in data.slices)
    return [(s.start, s.end, str(s.data.physical_hash)) for s in data.slices], data.watermark


def _grow(writer: Writer, blocks: int, hour: int = 0) -> list[Multihash]:
    return [
        writer.add_data(1 + i % 3, watermark=BASE_TIME + timedelta(hours=hour + i)) for i in range(blocks)
    ]


def _reads(dataset: Dataset, monkeypatch: pytest.MonkeyPatch) -> list[Multihash]:
    """The blocks the handle reads from now on, in order."""
    read: list[Multihash] = []
    get_block = dataset.get_block

    def counted(block_hash: Multihash) -> model.MetadataBlock:
        read.append(block_hash)
        return get_block(block_hash)

    monkeypatch.setattr(dataset, "get_block", counted)
    return read


def test_the_index_answers_as_the_chain_walk_does_at_every_block(root: Dataset, writer: Writer) -> None:
    heads = [root.head(), *_grow(writer, 7)]
    root.append([model.SetInfo(description="a definition between data events")])
    heads += [root.head(), *_grow(writer, 2, hour=7)]
    for head in heads:
        assert head is not None
        assert _indexed(root, head) == _walked(root, head)
    between = data_as_of(root)
    assert between is not None
    assert [(s.start, s.end) for s in between.between(2, 6)] == [
        (s.start, s.end) for s in between.slices if s.end > 2 and s.start <= 6
    ]


def test_a_reader_after_an_append_reads_only_the_new_blocks(
    root: Dataset, writer: Writer, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _grow(writer, 5)
    data_index(root)  # written to info/
    new = _grow(writer, 2, hour=5)
    reader = workspace.open("root")  # another handle (another process): nothing in memory
    read = _reads(reader, monkeypatch)
    assert data_index(reader).head == new[-1]
    assert read == new[::-1]
    read.clear()
    assert data_as_of(reader) is not None and read == []  # the head did not move: nothing read


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip a byte", "another format"])
def test_a_missing_or_damaged_index_is_rebuilt_from_the_chain(
    root: Dataset, writer: Writer, workspace: Workspace, damage: str
) -> None:
    heads = _grow(writer, 4)
    data_index(root)
    path = root.layout.info_dir / DATA_INDEX_FILE
    data = path.read_bytes()
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip a byte":
        path.write_bytes(data[:40] + bytes([data[40] ^ 0xFF]) + data[41:])
    else:
        path.write_bytes(b"not arrow" + b"\0\0\0\0")
    reader = workspace.open("root")
    for head in heads:
        assert _indexed(reader, head) == _walked(reader, head)
    assert path.read_bytes() == data  # rewritten whole


def test_an_index_whose_head_left_the_chain_is_never_used(
    root: Dataset, writer: Writer, workspace: Workspace
) -> None:
    """History rolled back and grown again: the stored head is no ancestor of the new head."""
    kept = _grow(writer, 3)[-1]
    dropped = _grow(writer, 3, hour=3)
    data_index(root)  # stored at the dropped head
    root.layout.head_ref.write_text(kept.to_multibase())
    regrown = _grow(Writer(workspace.open("root"), writer.scratch / "other"), 4, hour=10)
    reader = workspace.open("root")
    assert _indexed(reader, regrown[-1]) == _walked(reader, regrown[-1])
    assert data_as_of(reader, dropped[-1]) is None  # on disk, but not in the chain any more
    assert data_index(reader).block_count == reader.projection().block_count


def test_an_abbreviated_hash_is_found_among_every_block_as_a_walk_finds_it(
    root: Dataset, writer: Writer
) -> None:
    _grow(writer, 6)
    walked = [block_hash for block_hash, _ in root.iter_blocks()]
    index = data_index(root)
    for block_hash in walked:
        tail = block_hash.short()
        assert index.blocks_like(tail) == [h for h in walked[::-1] if h.to_multibase().endswith(tail)]
    assert index.blocks_like(walked[0].to_multibase()) == [walked[0]]
    assert len(index.blocks_like("f1620")) == len(walked)  # every hash starts so: a prefix matches all
