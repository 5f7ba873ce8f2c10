"""FlatBuffers binary form of the ODF model, byte-exact with the reference implementation.

Block hashes are SHA3-256 over these bytes, so the layout is part of the protocol. What it depends on
(see test-vectors/README.md and the spec's "Metadata Block Hashing"):

- two passes per table: first every string, byte vector, vector, nested table and union value is
  created depth-first in schema field order; then the table is started and its fields added in
  schema field order (a union is ``<f>_type`` then ``<f>``);
- scalars equal to their schema default are omitted, ``= null`` scalars are written when present;
- vtables are de-duplicated, trailing empty vtable entries trimmed, no file identifier;
- the 16-byte ``Timestamp`` struct is placed with alignment 1 in manifest version 2 (as every block
  of the ODF 0.34/0.35 era was written) and with its natural alignment 4 in version 3.

Readers accept both versions; the struct is inline, so decoding does not depend on its alignment.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from typing import Any

from odfproj.errors import SerializationError
from odfproj.odf import model
from odfproj.odf.flatbuffers_reader import Table
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multicodec, Multihash
from odfproj.odf.schema_types import SCALAR_WIDTH, FieldSpec, TableSpec

SUPPORTED_BLOCK_VERSIONS = (2, 3)
DEFAULT_BLOCK_VERSION = 2

_TIMESTAMP_SIZE = 16
_UNION_TYPE_IDS = {
    table: (i + 1) for spec in model.UNIONS.values() for i, (_tag, table) in enumerate(spec.variants)
}


# ------------------------------------------------------------------------------------------------
# encoding


class _Encoder:
    """Writes with the flatbuffers library's ``Builder``, imported here: it imports numpy (0.08 s),
    which a command that only reads blocks never needs (reading: ``odf.flatbuffers_reader``)."""

    def __init__(self, timestamp_alignment: int) -> None:
        import flatbuffers
        from flatbuffers import number_types

        self.b = flatbuffers.Builder(1024)
        self.timestamp_alignment = timestamp_alignment
        self.flags = {
            "bool": number_types.BoolFlags,
            "uint8": number_types.Uint8Flags,
            "int8": number_types.Int8Flags,
            "uint16": number_types.Uint16Flags,
            "int16": number_types.Int16Flags,
            "uint32": number_types.Uint32Flags,
            "int32": number_types.Int32Flags,
            "uint64": number_types.Uint64Flags,
            "int64": number_types.Int64Flags,
            "float32": number_types.Float32Flags,
            "float64": number_types.Float64Flags,
        }

    def table(self, obj: Any) -> int:
        spec = model.TABLES[type(obj).__name__]
        return self._table(spec, obj)

    def _table(self, spec: TableSpec, obj: Any) -> int:
        b = self.b
        created: dict[str, int] = {}
        for f in spec.fields:  # pass 1: everything that lives outside the table
            value = getattr(obj, f.name)
            if value is not None and f.kind not in SCALAR_WIDTH and f.kind not in ("enum", "timestamp"):
                created[f.name] = self._create(f, value)
        b.StartObject(spec.num_slots)
        for f in spec.fields:  # pass 2: the table's own fields
            value = getattr(obj, f.name)
            if value is None:
                continue
            if f.kind in SCALAR_WIDTH or f.kind == "enum":
                self._scalar_slot(f, value)
            elif f.kind == "timestamp":
                self._place_timestamp(value)
                b.Slot(f.slot)
            elif f.kind == "union" and not f.vector:
                b.PrependUint8Slot(f.slot - 1, _UNION_TYPE_IDS[type(value).__name__], 0)
                b.PrependUOffsetTRelativeSlot(f.slot, created[f.name], 0)
            else:
                b.PrependUOffsetTRelativeSlot(f.slot, created[f.name], 0)
        return b.EndObject()

    def _scalar_slot(self, f: FieldSpec, value: Any) -> None:
        kind = model.ENUM_KINDS[f.ref] if f.kind == "enum" else f.kind
        flags = self.flags[kind]
        value = bool(value) if kind == "bool" else int(value)
        if f.optional_scalar:
            self.b.Prepend(flags, value)
            self.b.Slot(f.slot)
        else:
            default = f.default if f.default is not None else 0
            self.b.PrependSlot(flags, f.slot, value, default)

    def _create(self, f: FieldSpec, value: Any) -> int:
        if f.vector:
            items = [self._create_one(f, v) for v in value]
            self.b.StartVector(4, len(items), 4)
            for off in reversed(items):
                self.b.PrependUOffsetTRelative(off)
            return self.b.EndVector()
        return self._create_one(f, value)

    def _create_one(self, f: FieldSpec, value: Any) -> int:
        b = self.b
        kind = f.kind
        if kind == "string":
            return b.CreateString(value)
        if kind == "multihash":
            return b.CreateByteVector(value.to_bytes())
        if kind == "did":
            return b.CreateByteVector(value.as_bytes())
        if kind == "bytes":
            return b.CreateByteVector(bytes(value))
        if kind == "table":
            return self.table(value)
        if kind == "union":
            off = self.table(value)
            if f.wrapper is None:
                return off
            b.StartObject(2)
            b.PrependUint8Slot(0, _UNION_TYPE_IDS[type(value).__name__], 0)
            b.PrependUOffsetTRelativeSlot(1, off, 0)
            return b.EndObject()
        raise AssertionError(f"cannot create {kind}")

    def _place_timestamp(self, value: datetime) -> None:
        value = value.astimezone(UTC)
        b = self.b
        b.Prep(self.timestamp_alignment, _TIMESTAMP_SIZE)
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        flags = self.flags
        b.Place(value.microsecond * 1000, flags["uint32"])
        b.Place(seconds, flags["uint32"])
        b.Place(0, flags["uint16"])  # padding inside the struct
        b.Place(value.timetuple().tm_yday, flags["uint16"])
        b.Place(value.year, flags["int32"])

    def finish(self, root: int) -> bytes:
        self.b.Finish(root)
        return bytes(self.b.Output())


def encode_table(obj: Any, *, version: int = DEFAULT_BLOCK_VERSION) -> bytes:
    """Serialize a model object as a FlatBuffers root table (no manifest wrapper)."""
    if version not in SUPPORTED_BLOCK_VERSIONS:
        raise SerializationError(f"unsupported manifest version {version} (supported: 2, 3)")
    spec = model.TABLES.get(type(obj).__name__)
    if spec is None or not spec.has_binary_form:
        raise SerializationError(f"{type(obj).__name__} has no binary form")
    enc = _Encoder(timestamp_alignment=1 if version == 2 else 4)
    return enc.finish(enc.table(obj))


def encode_manifest(content: bytes, *, kind: int, version: int) -> bytes:
    """Wrap serialized content into the ``Manifest{kind, version, content}`` table."""
    import flatbuffers  # see _Encoder

    b = flatbuffers.Builder(len(content) + 64)
    off = b.CreateByteVector(content)
    b.StartObject(3)
    b.PrependInt64Slot(0, kind, 0)
    b.PrependInt32Slot(1, version, 0)
    b.PrependUOffsetTRelativeSlot(2, off, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def encode_block(block: model.MetadataBlock, *, version: int = DEFAULT_BLOCK_VERSION) -> bytes:
    """A metadata block as it is stored and hashed: the manifest bytes."""
    content = encode_table(block, version=version)
    return encode_manifest(content, kind=Multicodec.ODF_METADATA_BLOCK, version=version)


def block_hash(manifest_bytes: bytes) -> Multihash:
    """Blocks are named by the SHA3-256 multihash of their stored bytes, never of a re-encoding."""
    return Multihash.sha3_256(manifest_bytes)


# ------------------------------------------------------------------------------------------------
# decoding


def decode_table(type_name: str, data: bytes) -> Any:
    """Deserialize a FlatBuffers root table of the given model type."""
    buf = data if isinstance(data, bytes | bytearray) else bytes(data)
    try:
        return _decode(model.TABLES[type_name], buf, Table.root(buf).pos)
    except SerializationError:
        raise
    except Exception as e:  # any malformed offset surfaces as a struct/index error
        raise SerializationError(f"malformed {type_name} flatbuffer: {type(e).__name__}: {e}") from None


def decode_manifest(data: bytes) -> tuple[int, int, bytes]:
    """Return ``(kind, version, content)`` of a Manifest flatbuffer."""
    try:
        tab = Table.root(data)
        kind = tab.scalar(0, "int64", 0)
        version = tab.scalar(1, "int32", 0)
        o = tab.offset(2)
        content = bytes(tab.byte_vector(o)) if o else b""
    except Exception as e:
        raise SerializationError(f"malformed manifest: {type(e).__name__}: {e}") from None
    return kind, version, content


def decode_block(data: bytes) -> tuple[model.MetadataBlock, int]:
    """Stored block bytes -> (block, manifest version)."""
    kind, version, content = decode_manifest(data)
    if kind != Multicodec.ODF_METADATA_BLOCK:
        raise SerializationError(f"not a metadata block: manifest kind is {kind:#x}, expected 0x400000")
    if version not in SUPPORTED_BLOCK_VERSIONS:
        raise SerializationError(f"unsupported metadata block version {version} (supported: 2, 3)")
    return decode_table("MetadataBlock", content), version


_BLOCK_FIELDS = {f.name: f for f in model.TABLES["MetadataBlock"].fields}
_PREV_BLOCK_HASH = _BLOCK_FIELDS["prev_block_hash"]
_SEQUENCE_NUMBER = _BLOCK_FIELDS["sequence_number"]


def decode_block_link(data: bytes) -> tuple[int, Multihash | None]:
    """Stored block bytes -> ``(sequenceNumber, prevBlockHash)``, without decoding the event.

    What a walk from the head to the Seed needs of each block, at a fraction of :func:`decode_block`'s
    cost; a block whose event is malformed is found when it is decoded in full.
    """
    kind, version, content = decode_manifest(data)
    if kind != Multicodec.ODF_METADATA_BLOCK:
        raise SerializationError(f"not a metadata block: manifest kind is {kind:#x}, expected 0x400000")
    if version not in SUPPORTED_BLOCK_VERSIONS:
        raise SerializationError(f"unsupported metadata block version {version} (supported: 2, 3)")
    try:
        tab = Table.root(content)
        sequence_number = tab.scalar(_SEQUENCE_NUMBER.slot, "uint64", 0)
        o = tab.offset(_PREV_BLOCK_HASH.slot)
        prev = Multihash.from_bytes(bytes(tab.byte_vector(o))) if o else None
    except SerializationError:
        raise
    except Exception as e:  # any malformed offset surfaces as a struct/index error
        raise SerializationError(f"malformed MetadataBlock flatbuffer: {type(e).__name__}: {e}") from None
    return sequence_number, prev


def _decode(spec: TableSpec, buf: bytes | bytearray, pos: int) -> Any:
    tab = Table(buf, pos)
    kwargs: dict[str, Any] = {}
    for f in spec.fields:
        o = tab.offset(f.slot)
        if f.kind in SCALAR_WIDTH or f.kind == "enum":
            if o:
                value = tab.get(model.ENUM_KINDS[f.ref] if f.kind == "enum" else f.kind, o + tab.pos)
            elif f.optional_scalar:
                continue
            else:
                value = f.default if f.default is not None else 0
            kwargs[f.name] = model.ENUMS[f.ref](value) if f.kind == "enum" else value
            continue
        if not o:
            continue
        if f.kind == "timestamp":
            kwargs[f.name] = _read_timestamp(buf, o + tab.pos)
        elif f.vector:
            start, n = tab.vector(o)
            kwargs[f.name] = tuple(_decode_one(f, buf, tab, start + 4 * i) for i in range(n))
        elif f.kind == "union":
            type_id = tab.scalar(f.slot - 1, "uint8", 0)
            kwargs[f.name] = _decode_union(f.ref, type_id, buf, tab.indirect(o + tab.pos))
        elif f.kind in ("multihash", "did", "bytes"):
            raw = bytes(tab.byte_vector(o))
            kwargs[f.name] = (
                Multihash.from_bytes(raw)
                if f.kind == "multihash"
                else DatasetId.from_bytes(raw)
                if f.kind == "did"
                else raw
            )
        else:
            kwargs[f.name] = _decode_one(f, buf, tab, o + tab.pos)
    return model.CLASSES[spec.name](**kwargs)


def _decode_one(f: FieldSpec, buf: bytes | bytearray, tab: Table, at: int) -> Any:
    """Decode the item whose uoffset is stored at ``at`` (a vector element or a table field)."""
    if f.kind == "string":
        return tab.string(at).decode("utf-8")
    target = tab.indirect(at)
    if f.kind == "table":
        return _decode(model.TABLES[f.ref], buf, target)
    if f.kind == "union":
        if f.wrapper is None:
            raise AssertionError("vectors of unions always go through a wrapper table")
        wrapper = Table(buf, target)
        type_id = wrapper.scalar(0, "uint8", 0)
        o = wrapper.offset(1)
        if not o:
            raise SerializationError(f"{f.wrapper} without a value")
        return _decode_union(f.ref, type_id, buf, wrapper.indirect(o + wrapper.pos))
    raise AssertionError(f"cannot decode {f.kind}")


def _decode_union(union: str, type_id: int, buf: bytes | bytearray, pos: int) -> Any:
    variants = model.UNIONS[union].variants
    if not 1 <= type_id <= len(variants):
        raise SerializationError(f"unknown {union} type id {type_id}")
    return _decode(model.TABLES[variants[type_id - 1][1]], buf, pos)


def _read_timestamp(buf: bytes | bytearray, at: int) -> datetime:
    year, ordinal, _pad, seconds, nanos = struct.unpack_from("<iHHII", buf, at)
    if not 1 <= ordinal <= 366 or seconds >= 86_400 or nanos >= 1_000_000_000:
        raise SerializationError(f"invalid Timestamp struct (year={year}, day={ordinal}, seconds={seconds})")
    return datetime(year, 1, 1, tzinfo=UTC) + timedelta(
        days=ordinal - 1, seconds=seconds, microseconds=nanos // 1000
    )
