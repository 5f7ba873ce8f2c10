"""The index of a stored dataset: persistence, stamps, damage, and reads of current and past state."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from odfproj.state.dataset_index import index_directory, open_state_index, rebuild_state_index
from odfproj.state.errors import CorruptIndexError, StateIndexError
from odfproj.state.persistence import MANIFEST, load_index, read_manifest
from odfproj.state.read import read_state
from odfproj.storage.dataset import Dataset
from odfproj.storage.workspace import Workspace
from tests.state.changelogs import (
    KEY_COLUMNS,
    commit_history,
    histories,
    reference_states,
    same_index,
)

HISTORY = [
    [(0, ("eu", 1), 10), (0, ("us", None), 20), (0, (None, None), 30)],
    None,
    [(2, ("eu", 1), 10), (3, ("eu", 1), 11), (1, ("us", None), 20)],
    [(0, ("us", None), 21), (1, (None, None), 30)],
    [(2, ("us", None), 21), (3, ("us", None), 22), (0, (None, 5), 40)],
]


def test_open_builds_persists_and_reloads(dataset: Dataset, scratch: Path) -> None:
    heads = commit_history(dataset, HISTORY, scratch)
    index = open_state_index(dataset, KEY_COLUMNS, base_interval=2)
    assert index.head == heads[-1]
    manifest = read_manifest(index_directory(dataset))
    assert manifest.head == heads[-1] and manifest.block_count == index.block_count
    same_index(load_index(index_directory(dataset), KEY_COLUMNS), index)
    # Opening again uses the stored index (its stamp is the head).
    same_index(open_state_index(dataset, KEY_COLUMNS, base_interval=2), index)


def test_lagging_index_catches_up_to_what_a_rebuild_gives(dataset: Dataset, scratch: Path) -> None:
    commit_history(dataset, HISTORY[:2], scratch)
    open_state_index(dataset, KEY_COLUMNS, base_interval=2)
    stale = read_manifest(index_directory(dataset)).head
    commit_history(dataset, HISTORY[2:], scratch / "..")
    index = open_state_index(dataset, KEY_COLUMNS, base_interval=2)
    assert index.head == dataset.head() != stale
    same_index(index, rebuild_state_index(dataset, KEY_COLUMNS, base_interval=2))
    assert read_manifest(index_directory(dataset)).head == dataset.head()


def test_leading_index_is_rebuilt(tmp_path: Path, dataset: Dataset, scratch: Path) -> None:
    """A copy of the dataset taken earlier gets the index of the newer original: its stamp is ahead."""
    commit_history(dataset, HISTORY[:3], scratch)
    behind = Dataset("cities", tmp_path / "behind")
    shutil.copytree(dataset.path, behind.path)
    commit_history(dataset, HISTORY[3:], scratch / "more")
    open_state_index(dataset, KEY_COLUMNS)
    shutil.rmtree(index_directory(behind), ignore_errors=True)
    shutil.copytree(index_directory(dataset), index_directory(behind))
    assert read_manifest(index_directory(behind)).head not in {h for h, _ in behind.iter_blocks()}
    index = open_state_index(behind, KEY_COLUMNS)
    assert index.head == behind.head() != dataset.head()
    same_index(index, rebuild_state_index(behind, KEY_COLUMNS))
    assert read_manifest(index_directory(behind)).head == behind.head()


def test_foreign_index_is_rebuilt(tmp_path: Path, dataset: Dataset, scratch: Path) -> None:
    """An index of another dataset's chain (same name, same keys) copied into this one."""
    other = Workspace(tmp_path / "other").create("cities", dataset.kind)
    other.append([model_set_schema()])
    commit_history(other, HISTORY, scratch)
    open_state_index(other, KEY_COLUMNS)
    commit_history(dataset, HISTORY[:3], scratch / "mine")
    shutil.copytree(index_directory(other), index_directory(dataset))
    index = open_state_index(dataset, KEY_COLUMNS)
    assert index.head == dataset.head()
    same_index(index, rebuild_state_index(dataset, KEY_COLUMNS))


def model_set_schema():
    from tests.state.changelogs import SCHEMA
    from tests.storage.helpers.chains import set_schema

    return set_schema(SCHEMA)


def _damage_manifest(directory: Path) -> None:
    data = json.loads((directory / MANIFEST).read_text())
    data["block_count"] += 1
    (directory / MANIFEST).write_text(json.dumps(data))


def _damage_keys(directory: Path) -> None:
    name = read_manifest(directory).keys[0][0].name
    raw = bytearray((directory / name).read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (directory / name).write_bytes(bytes(raw))


def _truncate_log(directory: Path) -> None:
    name = read_manifest(directory).segments[0].name
    path = directory / name
    path.write_bytes(path.read_bytes()[:10])


def _delete_base(directory: Path) -> None:
    (directory / read_manifest(directory).bases[0][1].name).unlink()


def _garbage_manifest(directory: Path) -> None:
    (directory / MANIFEST).write_bytes(b"\x00\xffnot json")


def _other_format(directory: Path) -> None:
    data = json.loads((directory / MANIFEST).read_text())
    data["format"] = 999
    (directory / MANIFEST).write_text(json.dumps(data))


@pytest.mark.parametrize(
    "damage",
    [_damage_manifest, _damage_keys, _truncate_log, _delete_base, _garbage_manifest, _other_format],
)
def test_damaged_index_is_detected_and_rebuilt(dataset: Dataset, scratch: Path, damage) -> None:
    commit_history(dataset, HISTORY, scratch)
    expected = open_state_index(dataset, KEY_COLUMNS, base_interval=2)
    directory = index_directory(dataset)
    damage(directory)
    with pytest.raises(CorruptIndexError):
        load_index(directory, KEY_COLUMNS)
    index = open_state_index(dataset, KEY_COLUMNS, base_interval=2)
    same_index(index, expected)
    same_index(load_index(directory, KEY_COLUMNS), expected)  # and the rebuild was stored


def test_an_unwritable_index_folder_only_costs_time(dataset: Dataset, scratch: Path) -> None:
    commit_history(dataset, HISTORY, scratch)
    index_directory(dataset).parent.mkdir(exist_ok=True)
    index_directory(dataset).write_bytes(b"a file where the folder should be")
    index = open_state_index(dataset, KEY_COLUMNS)
    same_index(index, rebuild_state_index(dataset, KEY_COLUMNS))


def test_index_keyed_by_other_columns_is_not_used(dataset: Dataset, scratch: Path) -> None:
    commit_history(dataset, HISTORY, scratch)
    open_state_index(dataset, ("region",))
    with pytest.raises(CorruptIndexError):
        load_index(index_directory(dataset), KEY_COLUMNS)
    index = open_state_index(dataset, KEY_COLUMNS)
    same_index(index, rebuild_state_index(dataset, KEY_COLUMNS))


def test_updates_rewrite_only_the_open_segment(dataset: Dataset, scratch: Path) -> None:
    history = [[(0, ("eu", n), n)] for n in range(9)]
    commit_history(dataset, history[:5], scratch)  # blocks 0..6 (seed, schema, 5 data)
    open_state_index(dataset, KEY_COLUMNS, base_interval=3)
    directory = index_directory(dataset)
    before = read_manifest(directory)
    sealed = {f.name: (directory / f.name).stat().st_mtime_ns for f in before.segments[:-1]}
    commit_history(dataset, history[5:], scratch / "more")
    open_state_index(dataset, KEY_COLUMNS, base_interval=3)
    after = read_manifest(directory)
    assert [f.name for f in after.segments[: len(sealed)]] == list(sealed)
    assert all((directory / name).stat().st_mtime_ns == t for name, t in sealed.items())
    assert len(after.segments) == 4 and after.block_count == 11
    on_disk = {p.name for p in directory.iterdir()} - {MANIFEST, ".lock"}
    named = (
        {f.name for f in after.segments}
        | {f.name for _, f in after.bases}
        | {f.name for f, _ in after.keys}
        | {after.current.name}
    )
    assert on_disk == named  # superseded files were removed


# --- reads --------------------------------------------------------------------------------------


def expected_rows(blocks, upto: int | None) -> list[tuple]:
    """(offset, region, code, value) of the rows valid after data block ``upto`` (None: the last)."""
    states = reference_states(blocks)
    state = states[upto if upto is not None else -1] if states else {}
    records = [r for b in blocks for r in (b or [])]
    return sorted((o, *records[o][1], records[o][2]) for o in state.values())


def rows(table: pa.Table) -> list[tuple]:
    d = table.to_pydict()
    return list(zip(d["offset"], d["region"], d["code"], d["value"], strict=True))


def test_read_state_returns_documented_columns(dataset: Dataset, scratch: Path) -> None:
    commit_history(dataset, HISTORY, scratch)
    table = read_state(dataset, key_columns=KEY_COLUMNS)
    assert table.column_names == ["offset", "event_time", "region", "code", "value"]
    assert rows(table) == expected_rows(HISTORY, None)
    assert read_state(dataset, ["value"], key_columns=KEY_COLUMNS).column_names == [
        "offset",
        "event_time",
        "value",
    ]
    with pytest.raises(StateIndexError, match="no data column 'nope'"):
        read_state(dataset, ["nope"], key_columns=KEY_COLUMNS)
    with pytest.raises(StateIndexError, match="no primary key"):
        read_state(dataset)
    with pytest.raises(StateIndexError, match="not in the dataset's chain"):
        from tests.state.changelogs import block_hash

        read_state(dataset, as_at=block_hash(12345), key_columns=KEY_COLUMNS)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocks=histories(max_blocks=6))
def test_read_state_as_at_every_block_and_time_equals_reference(tmp_path_factory, blocks) -> None:
    root = tmp_path_factory.mktemp("read")
    dataset = Workspace(root / "ws").create("cities", model_kind_root())
    dataset.append([model_set_schema()])
    heads = commit_history(dataset, blocks, root)
    index = open_state_index(dataset, KEY_COLUMNS)
    assert rows(read_state(dataset, index=index)) == expected_rows(blocks, None)
    times = [dataset.get_block(h).system_time for h in heads]
    for k, head in enumerate(heads):
        assert rows(read_state(dataset, as_at=head, index=index)) == expected_rows(blocks, k)
        last = max(i for i, t in enumerate(times) if t <= times[k])
        assert rows(read_state(dataset, as_at=times[k], index=index)) == expected_rows(blocks, last)
    before_data = times[0] - timedelta(microseconds=1) if times else None
    if before_data is not None:
        assert rows(read_state(dataset, as_at=before_data, index=index)) == []


def model_kind_root():
    from odfproj.odf import model

    return model.DatasetKind.Root


def test_a_loaded_index_decodes_only_the_log_segments_a_read_needs(dataset: Dataset, scratch: Path) -> None:
    """A long log is proven on load but decoded a segment at a time: a read as at one point needs one."""
    heads = commit_history(dataset, HISTORY * 4, scratch)  # 20 blocks after the Seed and schema: 6 segments
    built = open_state_index(dataset, KEY_COLUMNS, base_interval=4)
    loaded = load_index(index_directory(dataset), KEY_COLUMNS)
    segments = loaded.log.entries._segments
    assert len(segments) == 6 and all(callable(s) for s in segments)
    assert loaded.current_offsets() == built.current_offsets()
    assert loaded.head == heads[-1] and sum(not callable(s) for s in segments) == 1  # the head's
    middle = built.log.entries[11]
    assert loaded.offsets_as_at(middle.block_hash) == built.offsets_as_at(middle.block_hash)
    assert sum(not callable(s) for s in segments) <= 2
    for k in range(len(built.log)):  # and every point reads as the whole log gives it
        entry = built.log.entries[k]
        assert loaded.log.entries[k] == entry
        assert loaded.offsets_as_at(entry.block_hash) == built.offsets_as_at(entry.block_hash)
