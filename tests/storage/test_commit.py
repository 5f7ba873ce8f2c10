"""The commit protocol stopped after each of its steps, deterministically (the SIGKILL test samples them).

Each case performs the protocol by hand up to a point, as a killed writer would leave it, then opens
the dataset again: it must be valid at the old head (before the head swap) or the new one (after),
with the interrupted transaction's traces gone and everything reachable kept.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash, encode_block
from odfproj.odf.multiformats import Multihash
from odfproj.storage.commit import Transaction, find_leftovers
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import IntegrityError
from odfproj.storage.fsutil import write_durable
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import Writer, build_add_data

STEPS = ["staged", "objects-published", "tmp-ref-written", "head-swapped"]


def _interrupted_commit(dataset: Dataset, scratch: Path, stop_after: str) -> tuple[Multihash, Multihash]:
    """Run the protocol by hand until ``stop_after``; returns (old head, the new head it was writing)."""
    p = dataset.projection()
    event, data_file, checkpoint_file = build_add_data(p, scratch, 3, checkpoint=b"interrupted")
    assert data_file is not None and checkpoint_file is not None
    block = model.MetadataBlock(
        system_time=p.system_time, prev_block_hash=p.head, sequence_number=p.sequence_number + 1, event=event
    )
    data = encode_block(block)
    new_head = block_hash(data)
    layout = dataset.layout
    tx = Transaction(layout).__enter__()  # never exited: the process "dies"
    objects = [
        (tx.stage_copy(data_file, "data"), layout.data_path(event.new_data.physical_hash)),
        (
            tx.stage_copy(checkpoint_file, "checkpoint"),
            layout.checkpoint_path(event.new_checkpoint.physical_hash),
        ),
        (tx.stage_bytes(data, str(new_head)), layout.block_path(new_head)),
    ]
    if stop_after == "staged":
        return p.head, new_head
    for staged, target in objects:
        os.replace(staged, target)
    if stop_after == "objects-published":
        return p.head, new_head
    tmp = layout.head_ref.with_name(f"head.tmp-{tx.txid}")
    write_durable(tmp, str(new_head).encode())
    if stop_after == "tmp-ref-written":
        return p.head, new_head
    os.replace(tmp, layout.head_ref)
    return p.head, new_head


@pytest.mark.parametrize("stop_after", STEPS)
def test_interrupted_commit_recovers_at_the_old_or_new_head(
    workspace: Workspace, root: Dataset, writer: Writer, scratch: Path, stop_after: str
) -> None:
    writer.add_data(2, checkpoint=b"before")
    # An unreferenced file older than the head: put there on purpose by someone, never deleted.
    foreign = root.layout.data_dir / str(Multihash.sha3_256(b"someone else's"))
    foreign.write_bytes(b"someone else's")
    os.utime(foreign, (1_000_000, 1_000_000))

    old_head, new_head = _interrupted_commit(root, scratch, stop_after)
    assert find_leftovers(root.layout)

    reopened = workspace.open("root")
    expected = new_head if stop_after == "head-swapped" else old_head
    assert reopened.head() == expected
    assert find_leftovers(reopened.layout) == []
    assert verify_dataset(reopened) == []
    assert foreign.exists()
    published = reopened.layout.block_path(new_head).exists()
    assert published == (stop_after == "head-swapped")  # orphans of an uncommitted tx are removed
    # The dataset keeps working from where it is.
    Writer(reopened, scratch).add_data(1)
    assert verify_dataset(reopened) == []


def test_a_failed_append_leaves_no_staging(root: Dataset, scratch: Path) -> None:
    p = root.projection()
    event, data_file, _ = build_add_data(p, scratch, 2)
    assert data_file is not None
    other = scratch / "other.parquet"
    other.write_bytes(data_file.read_bytes() + b"x")
    with pytest.raises(IntegrityError, match="does not match newData"):
        root.append([event], data_file=other)
    assert find_leftovers(root.layout) == []
    assert list(root.layout.staging_dir.iterdir()) == []
    assert root.head() == p.head
