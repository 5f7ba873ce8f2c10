"""Interop: what we write is the ODF reference layout, and a dataset written by another tool reads back."""

from __future__ import annotations

import hashlib

from odfproj.odf import model
from odfproj.odf.blocks import yaml_to_binary
from odfproj.odf.flatbuffers_codec import block_hash, decode_manifest
from odfproj.odf.identity import DatasetKeyPair
from odfproj.odf.multiformats import Multicodec, Multihash
from odfproj.storage.dataset import Dataset
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import Writer, set_schema


def test_written_dataset_has_exactly_the_reference_layout(
    root: Dataset, writer: Writer, workspace: Workspace
) -> None:
    writer.add_data(3, checkpoint=b"ck")
    visible = sorted(p.name for p in root.path.iterdir() if not p.name.startswith("."))
    assert visible == ["blocks", "checkpoints", "data", "info", "refs"]
    assert sorted(p.name for p in workspace.root.iterdir() if not p.name.startswith(".")) == [
        "datasets",
        "keys",
    ]
    assert [p.name for p in root.layout.refs_dir.iterdir()] == ["head"]

    blocks = sorted(root.layout.blocks_dir.iterdir())
    assert len(blocks) == 3
    for path in blocks:
        data = path.read_bytes()
        assert path.name == "f1620" + hashlib.sha3_256(data).hexdigest()
        assert block_hash(data).to_multibase() == path.name
        kind, version, _ = decode_manifest(data)
        assert (kind, version) == (Multicodec.ODF_METADATA_BLOCK, 2)
    assert root.layout.head_ref.read_text() == root.head().to_multibase()
    assert root.head().to_multibase() in {p.name for p in blocks}

    for folder in (root.layout.data_dir, root.layout.checkpoints_dir):
        [path] = list(folder.iterdir())
        assert path.name == "f1620" + hashlib.sha3_256(path.read_bytes()).hexdigest()


def _yaml_block(seq: int, prev: Multihash | None, event: str) -> bytes:
    prev_line = f"  prevBlockHash: {prev}\n" if prev else ""
    text = (
        "kind: MetadataBlock\nversion: 2\ncontent:\n"
        f"  systemTime: 2020-01-01T12:00:0{seq}Z\n{prev_line}  sequenceNumber: {seq}\n  event:\n{event}"
    )
    return yaml_to_binary(text)


def test_a_dataset_written_by_another_tool_opens_verifies_and_extends(workspace: Workspace) -> None:
    dataset_id = DatasetKeyPair.generate().dataset_id
    events = [
        f"    kind: Seed\n    datasetId: {dataset_id}\n    datasetKind: Root\n",
        "    kind: SetInfo\n    description: written elsewhere\n",
    ]
    folder = workspace.datasets_dir / "foreign"
    for sub in ("blocks", "refs", "data", "checkpoints"):  # no info/, no private entries
        (folder / sub).mkdir(parents=True)
    prev = None
    for seq, event in enumerate(events):
        data = _yaml_block(seq, prev, event)
        prev = block_hash(data)
        (folder / "blocks" / prev.to_multibase()).write_bytes(data)
    # Tolerant reading: upper-case hex, trailing newline.
    (folder / "refs" / "head").write_text("F" + prev.to_multibase()[1:].upper() + "\n")

    assert workspace.list_datasets() == ["foreign"]
    dataset = workspace.open("FOREIGN")
    assert dataset.head() == prev
    assert verify_dataset(dataset) == []
    assert dataset.projection().set_info == model.SetInfo(description="written elsewhere")
    assert dataset.dataset_id == dataset_id

    new_head = dataset.append([set_schema()])
    assert Dataset("foreign", folder).get_block(new_head).prev_block_hash == prev
    assert verify_dataset(dataset) == []
