"""The projection cache: keyed by head, updated incrementally, rebuilt when missing or invalid."""

from __future__ import annotations

import json

from odfproj.odf import model
from odfproj.odf.yaml_codec import from_data, to_data
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import ChainProjection
from odfproj.storage.verify import verify_dataset
from tests.storage.helpers.chains import BASE_TIME, Writer, polling_source, push_source


def _cache(dataset: Dataset) -> dict:
    return json.loads(dataset.layout.projection_cache.read_text())


def test_cache_follows_the_head(root: Dataset, writer: Writer) -> None:
    assert _cache(root)["head"] == str(root.head())
    writer.add_data(3)
    assert _cache(root)["head"] == str(root.head())
    assert _cache(root)["lastOffset"] == 2


def test_projection_does_not_read_old_blocks(root: Dataset, writer: Writer) -> None:
    for _ in range(3):
        writer.add_data(2)
    seed_hash = list(root.iter_blocks())[-1][0]
    seed_file = root.layout.block_path(seed_hash)
    seed_bytes = seed_file.read_bytes()
    seed_file.unlink()  # any full walk would now fail
    try:
        fresh = Dataset(root.name, root.path)
        assert fresh.projection().last_offset == 5
        # Another handle appends; this one catches up by reading only the new block.
        other = Dataset(root.name, root.path)
        Writer(other, writer.scratch).add_data(1)
        assert fresh.projection().last_offset == 6
        assert fresh.projection().head == other.head()
    finally:
        seed_file.write_bytes(seed_bytes)


def test_catching_up_from_an_old_cache(root: Dataset, writer: Writer) -> None:
    stale = root.layout.projection_cache.read_bytes()
    writer.add_data(2, watermark=BASE_TIME)
    expected = root.projection()
    root.layout.projection_cache.write_bytes(stale)
    assert Dataset(root.name, root.path).projection() == expected


def test_invalid_or_foreign_caches_are_rebuilt(root: Dataset, writer: Writer) -> None:
    writer.add_data(2)
    expected = root.projection()
    for garbage in (b"", b"{not json", b'{"format": 999}', json.dumps({"format": 1}).encode()):
        root.layout.projection_cache.write_bytes(garbage)
        assert Dataset(root.name, root.path).projection() == expected
        assert ChainProjection.from_json(root.layout.projection_cache.read_bytes()) == expected
    # A cache of another dataset names a head this chain never reaches: full rebuild.
    foreign = json.loads(expected.to_json())
    foreign["head"] = "f1620" + "ab" * 32
    root.layout.projection_cache.write_text(json.dumps(foreign))
    assert Dataset(root.name, root.path).projection() == expected


def test_a_lying_cache_at_the_head_is_reported_by_verify(root: Dataset, writer: Writer) -> None:
    writer.add_data(2)
    data = _cache(root)
    data["lastOffset"] = 99
    root.layout.projection_cache.write_text(json.dumps(data))
    [problem] = verify_dataset(root)
    assert problem.path == root.layout.projection_cache
    assert "disagrees with the chain" in problem.message


def test_projection_tracks_the_latest_definitions(root: Dataset, writer: Writer) -> None:
    info = model.SetInfo(description="first")
    root.append([info, polling_source("https://a"), push_source("p1"), push_source("p2")])
    root.append([model.SetInfo(description="second"), polling_source("https://b")])
    root.append([model.DisablePushSource(source_name="p1")])
    state = model.SourceState(source_name="p2", kind="odf/etag", value="v1")
    writer.add_data(1, watermark=BASE_TIME, checkpoint=b"c1", source_state=state)
    p = root.projection()
    assert p.set_info == model.SetInfo(description="second")
    assert p.set_polling_source == polling_source("https://b")
    assert list(p.push_sources) == ["p2"]
    assert p.source_states == {"p2": state}
    assert p.watermark == BASE_TIME
    assert p.last_checkpoint is not None and p.last_checkpoint.size == 2
    assert p.has_data and p.last_offset == 0
    assert [type(d.event).__name__ for d in p.definition_events] == [
        "SetDataSchema",
        "SetInfo",
        "SetPollingSource",
        "AddPushSource",
        "AddPushSource",
        "SetInfo",
        "SetPollingSource",
        "DisablePushSource",
    ]
    assert [d.sequence_number for d in p.definition_events] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_json_events_use_the_yaml_codec_form(root: Dataset) -> None:
    root.append([polling_source()])
    stored = _cache(root)["definitionEvents"][-1]["event"]
    assert stored == to_data(polling_source())
    assert from_data("MetadataEvent", stored) == polling_source()
