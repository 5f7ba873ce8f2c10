"""ODF 0.39 blocks byte for byte with the reference implementation (kamu-cli v0.265.0's golden hashes).

Each event is rebuilt as kamu's serde test builds it; encoding it as a manifest-version-3 block must
give the bytes whose SHA3-256 kamu pins, and those bytes must decode back to the same event.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from odfproj.odf import model
from odfproj.odf.arrow_schema import decode_arrow_schema
from odfproj.odf.blocks import block_from_yaml
from odfproj.odf.flatbuffers_codec import decode_block, encode_block
from odfproj.odf.multiformats import Multihash
from odfproj.odf.odf_schema import (
    arrow_schema_of,
    data_schema_from_arrow,
    data_schema_to_arrow,
    set_data_schema,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOLDEN = {
    row.split("\t")[0]: row.split("\t")[3]
    for row in (FIXTURES / "odf-0.39" / "kamu-golden-hashes.tsv").read_text().splitlines()
    if row and not row.startswith("#")
}


def _extra(attributes: dict) -> model.ExtraAttributes:
    """Extra attributes as kamu writes them into a block: compact JSON with sorted keys."""
    return model.ExtraAttributes(entries=json.dumps(attributes, separators=(",", ":"), sort_keys=True))


def _block(event: object) -> model.MetadataBlock:
    return model.MetadataBlock(
        system_time=datetime(2020, 1, 1, 12, tzinfo=UTC),
        prev_block_hash=Multihash.sha3_256(b"prev"),
        sequence_number=117,
        event=event,
    )


def _legacy_schema_event() -> model.SetDataSchema:
    block, _ = block_from_yaml(
        (FIXTURES / "odf-spec/test-vectors/blocks/10-set-data-schema.yaml").read_bytes()
    )
    assert isinstance(block.event, model.SetDataSchema)
    return block.event


def _events() -> dict[str, object]:
    string = model.DataTypeString
    return {
        "read-step-odf-schema": model.SetPollingSource(
            fetch=model.FetchStepFilesGlob(
                path="./*.csv",
                event_time=model.EventTimeSourceFromMetadata(),
                cache=model.SourceCachingForever(),
                order=model.SourceOrdering.ByName,
            ),
            prepare=(model.PrepStepDecompress(format=model.CompressionFormat.Gzip),),
            read=model.ReadStepGeoJson(
                data_schema=model.DataSchema(
                    fields=(
                        model.DataField(name="a", type=model.DataTypeInt32()),
                        model.DataField(name="b", type=model.DataTypeInt32()),
                    )
                )
            ),
            preprocess=model.TransformSql(engine="spark", version="1.0.0", query="SELECT * FROM input"),
            merge=model.MergeStrategyLedger(primary_key=("a",)),
        ),
        "add-data-extra": model.AddData(
            prev_checkpoint=Multihash.sha3_256(b"checkpoint"),
            prev_offset=9,
            new_data=model.DataSlice(
                logical_hash=Multihash.sha3_256(b"logical"),
                physical_hash=Multihash.sha3_256(b"physical"),
                offset_interval=model.OffsetInterval(start=10, end=99),
                size=100,
            ),
            new_source_state=model.SourceState(
                source_name="push-source-1", kind="kamu/kafka-offset", value="SOME_OFFSET"
            ),
            extra=_extra({"opendatafabric.org/linkedObjects": {"numObjectsNaive": 10, "sizeNaive": 100}}),
        ),
        "set-data-schema-odf": model.SetDataSchema(
            data_schema=model.DataSchema(
                fields=(
                    model.DataField(
                        name="city",
                        type=string(),
                        extra=_extra(
                            {"arrow.apache.org/bufferEncoding": {"kind": "View", "offsetBitWidth": 32}}
                        ),
                    ),
                    model.DataField(name="population", type=model.DataTypeUInt64()),
                    model.DataField(
                        name="census",
                        type=model.DataTypeOption(inner=string()),
                        extra=_extra(
                            {
                                "opendatafabric.org/type": {
                                    "kind": "ObjectLink",
                                    "linkType": {"kind": "Multihash"},
                                }
                            }
                        ),
                    ),
                    model.DataField(name="links", type=model.DataTypeList(item_type=string())),
                ),
                extra=_extra({"kamu.dev/archetype": "Collection"}),
            )
        ),
        "set-data-schema-legacy": _legacy_schema_event(),
    }


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_encoding_a_golden_event_gives_kamus_bytes_and_they_decode_back(case: str) -> None:
    block = _block(_events()[case])
    data = encode_block(block, version=3)
    assert hashlib.sha3_256(data).hexdigest() == GOLDEN[case]
    decoded, version = decode_block(data)
    assert (decoded, version) == (block, 3)


def test_the_odf_schema_means_the_arrow_schema_kamu_reads() -> None:
    event = _events()["set-data-schema-odf"]
    assert arrow_schema_of(event) == pa.schema(
        [
            pa.field("city", pa.string_view(), nullable=False),
            pa.field("population", pa.uint64(), nullable=False),
            pa.field("census", pa.string()),
            pa.field("links", pa.list_(pa.field("item", pa.string(), nullable=False)), nullable=False),
        ]
    )


def test_the_legacy_and_the_odf_form_of_one_schema_give_one_arrow_schema() -> None:
    legacy = _legacy_schema_event()
    arrow = decode_arrow_schema(legacy.schema)
    assert arrow == pa.schema(
        [pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.bool_(), nullable=False)]
    )
    odf_form = set_data_schema(arrow, odf_schema=True)
    assert odf_form.schema is None
    assert arrow_schema_of(odf_form) == arrow_schema_of(legacy) == arrow
    # kamu's transform writes this form for that schema: required Int64 and Bool, no extra attributes.
    assert odf_form.data_schema == model.DataSchema(
        fields=(
            model.DataField(name="a", type=model.DataTypeInt64()),
            model.DataField(name="b", type=model.DataTypeBool()),
        )
    )


SYSTEM_AND_DATA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("op", pa.int32(), nullable=False),
        pa.field("system_time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("event_time", pa.timestamp("ms", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("name", pa.string()),
        pa.field("price", pa.decimal128(12, 2)),
        pa.field("ratio", pa.float64()),
        pa.field("ok", pa.bool_()),
        pa.field("tags", pa.list_(pa.field("item", pa.string()))),
        pa.field("where", pa.struct([pa.field("lat", pa.float64()), pa.field("lon", pa.float64())])),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("at", pa.timestamp("us", tz="Europe/Paris")),
        pa.field("blob", pa.binary()),
    ]
)


def test_every_column_type_odfproj_writes_round_trips_through_the_odf_schema() -> None:
    assert data_schema_to_arrow(data_schema_from_arrow(SYSTEM_AND_DATA)) == SYSTEM_AND_DATA
    timestamp = data_schema_from_arrow(SYSTEM_AND_DATA).fields[2].type
    assert timestamp == model.DataTypeTimestamp(unit=model.TimeUnit.Millisecond, timezone="UTC")
