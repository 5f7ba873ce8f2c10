"""Hypothesis strategies for every model type, derived from the same descriptors the codecs use."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from hypothesis import strategies as st

from odfproj.odf import model
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multicodec, Multihash
from odfproj.odf.schema_types import FieldSpec

_INT_RANGES = {
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

multihashes = st.binary(min_size=32, max_size=32).map(lambda d: Multihash(Multicodec.SHA3_256, d))
dataset_ids = st.binary(min_size=32, max_size=32).map(DatasetId.from_public_key_bytes)
timestamps = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)
)
texts = st.text(max_size=40)


def _value(f: FieldSpec) -> st.SearchStrategy[Any]:
    kind = f.kind
    if kind == "string":
        return texts
    if kind == "bool":
        return st.booleans()
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return st.integers(lo, hi)
    if kind == "timestamp":
        return timestamps
    if kind == "multihash":
        return multihashes
    if kind == "did":
        return dataset_ids
    if kind == "bytes":
        return st.binary(max_size=64)
    if kind == "enum":
        return st.sampled_from(list(model.ENUMS[f.ref]))
    if kind == "table":
        return st.deferred(lambda: table(f.ref))
    if kind == "union":
        return st.deferred(lambda: union(f.ref))
    raise AssertionError(kind)


@cache
def table(name: str) -> st.SearchStrategy[Any]:
    spec = model.TABLES[name]
    fields = {}
    for f in spec.fields:
        s = _value(f)
        if f.vector:
            s = st.lists(s, max_size=3).map(tuple)
        fields[f.name] = s if f.required else st.none() | s
    return st.builds(model.CLASSES[name], **fields)


@cache
def union(name: str) -> st.SearchStrategy[Any]:
    return st.one_of([table(t) for _tag, t in model.UNIONS[name].variants])


def blocks_with_event(event_table: str) -> st.SearchStrategy[model.MetadataBlock]:
    return st.builds(
        model.MetadataBlock,
        system_time=timestamps,
        prev_block_hash=st.none() | multihashes,
        sequence_number=st.integers(0, 2**64 - 1),
        event=table(event_table),
    )
