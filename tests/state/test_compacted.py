"""The compacted copy (state.compacted): the chain's records in a few files, never trusted blindly.

Every check compares the copy with the chain's own data files, read one by one as before the copy.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.state.compacted import (
    COMPACT_ABOVE,
    FANOUT,
    CompactedCopy,
    _load,
    compacted_copy,
    compacted_directory,
)
from odfproj.state.frames import ChangelogView, changelog_as_of, changelog_between, read_changelog_frame
from odfproj.storage.dataset import Dataset
from odfproj.storage.objects import read_data_file
from odfproj.storage.slices import data_slices
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import BASE_TIME, Writer, schema_with, set_schema

REPO = Path(__file__).resolve().parents[2]


def _chain_rows(dataset: Dataset) -> pa.Table:
    """Every record, read from the chain's own files under the current schema."""
    schema = dataset.projection().arrow_schema
    assert schema is not None
    return pa.concat_tables([read_data_file(s.path, schema) for s in data_slices(dataset)])


def _copy_rows(copy: CompactedCopy) -> pa.Table:
    return pa.concat_tables([pq.read_table(copy.directory / p.file.name) for p in copy.parts])


def _grow(writer: Writer, blocks: int) -> None:
    for i in range(blocks):
        writer.add_data(1 + i % 2, watermark=BASE_TIME)


@pytest.fixture
def grown(tmp_path: Path) -> tuple[Dataset, Writer]:
    dataset = Workspace(tmp_path / "ws").create("hourly", model_kind())
    dataset.append([set_schema()])
    writer = Writer(dataset, tmp_path / "scratch")
    _grow(writer, 12)
    return dataset, writer


def model_kind():
    from odfproj.odf import model

    return model.DatasetKind.Root


def test_the_copy_holds_the_chain_records_and_stays_few_files_as_it_grows(
    grown: tuple[Dataset, Writer],
) -> None:
    dataset, writer = grown
    copy = compacted_copy(dataset)
    assert copy is not None and copy.head == dataset.head()
    assert _copy_rows(copy).equals(_chain_rows(dataset))
    for _ in range(3 * FANOUT):  # one block and one update at a time, as readers meet them
        writer.add_data(1, watermark=BASE_TIME)
        copy = compacted_copy(dataset)
        assert copy is not None and copy.head == dataset.head()
        assert len(copy.parts) <= 2 * (FANOUT - 1)
    assert _copy_rows(copy).equals(_chain_rows(dataset))
    assert {"offset", "op", "system_time"} <= set(_copy_rows(copy).column_names)
    on_disk = {p.name for p in copy.directory.iterdir()} - {"manifest.json", ".lock"}
    assert on_disk == {p.file.name for p in copy.parts} | {name for name, _ in copy.retired}


def test_a_schema_that_gains_a_column_rewrites_the_copy_under_it(grown: tuple[Dataset, Writer]) -> None:
    dataset, writer = grown
    assert compacted_copy(dataset) is not None
    dataset.append([set_schema(schema_with(("value", pa.string()), ("extra", pa.int64())))])
    _grow(writer, 2)
    copy = compacted_copy(dataset)
    assert copy is not None and copy.schema == dataset.projection().schema
    rows = _copy_rows(copy)
    assert rows.equals(_chain_rows(dataset)) and rows.column("extra").null_count < rows.num_rows


@pytest.mark.parametrize("damage", ["manifest deleted", "part deleted", "part corrupted", "folder deleted"])
def test_a_missing_or_damaged_copy_is_rebuilt(grown: tuple[Dataset, Writer], damage: str) -> None:
    dataset, _ = grown
    first = compacted_copy(dataset)
    assert first is not None
    part = first.directory / first.parts[0].file.name
    if damage == "manifest deleted":
        (first.directory / "manifest.json").unlink()
    elif damage == "part deleted":
        part.unlink()
    elif damage == "part corrupted":
        data = bytearray(part.read_bytes())
        data[len(data) // 2] ^= 0xFF
        part.write_bytes(bytes(data))
    else:
        for path in first.directory.iterdir():
            path.unlink()
        first.directory.rmdir()
    assert _load(compacted_directory(dataset)) is None  # the damage is seen
    again = compacted_copy(dataset)
    assert again is not None and _copy_rows(again).equals(_chain_rows(dataset))


def test_a_copy_whose_head_left_the_chain_is_never_used(grown: tuple[Dataset, Writer]) -> None:
    dataset, writer = grown
    kept = dataset.head()
    _grow(writer, 3)
    stale = compacted_copy(dataset)
    assert stale is not None
    dataset.layout.head_ref.write_text(kept.to_multibase())  # history rolled back: the copy is ahead
    reader = Workspace(dataset.path.parent.parent).open("hourly")
    copy = compacted_copy(reader)
    assert copy is not None and copy.head == kept
    assert _copy_rows(copy).equals(_chain_rows(reader))
    writer2 = Writer(reader, dataset.path.parent.parent.parent / "other")
    _grow(writer2, 2)  # grown again differently: the stale head is no ancestor of the new one
    copy = compacted_copy(reader)
    assert copy is not None and _copy_rows(copy).equals(_chain_rows(reader))


@pytest.mark.spark
def test_spark_reads_the_same_records_through_the_copy(spark, grown: tuple[Dataset, Writer]) -> None:
    dataset, writer = grown
    _grow(writer, COMPACT_ABOVE)  # more files than readers take one by one
    p = dataset.projection()
    assert p.last_offset is not None
    assert all(
        path.parent == compacted_directory(dataset)
        for path in changelog_as_of(dataset, p.head, p.last_offset).data_paths
    )
    view = changelog_between(dataset, p.head, 2, p.last_offset - 1)  # parts also hold records outside
    assert all(path.parent == compacted_directory(dataset) for path in view.data_paths)
    direct = ChangelogView(
        dataset,
        view.block_hash,
        view.offset,
        view.schema,
        tuple(s.path for s in data_slices(dataset)),
        view.watermark,
        view.after,
    )
    through_copy = read_changelog_frame(spark, view).orderBy("offset").collect()
    from_files = read_changelog_frame(spark, direct).orderBy("offset").collect()
    assert through_copy == from_files and len(from_files) == p.last_offset - 3  # offsets 3..last-1


def test_a_kill_during_an_update_leaves_the_copy_valid_or_absent(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    dataset = workspace.create("hourly", model_kind())
    dataset.append([set_schema()])
    rng = random.Random("compacted-kills")
    outcomes = {"valid": 0, "absent": 0}
    for _ in range(4):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.state.helpers.compacted_crash_writer",
                str(workspace.root),
                "hourly",
                str(tmp_path / "scratch"),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for _ in range(rng.randint(1, 12)):  # some updates, then a random moment of the next one
            assert proc.stdout.readline().strip() == "copied"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader = workspace.open("hourly")
        stored = _load(compacted_directory(reader))
        if stored is None:
            outcomes["absent"] += 1
        else:
            outcomes["valid"] += 1
            assert reader.in_chain(stored.head)
            chain = _chain_rows(reader)
            assert _copy_rows(stored).equals(chain.slice(0, stored.last_offset + 1))
        copy = compacted_copy(reader)  # the next reader brings it to the head
        assert copy is not None and _copy_rows(copy).equals(_chain_rows(reader))
    assert outcomes["valid"] > 0
