"""Type descriptors that drive the YAML and FlatBuffers codecs.

The generated ``model`` module declares one ``TableSpec`` per ODF table and one ``UnionSpec`` per
union. The codecs walk these descriptors instead of having sixty hand-written (de)serializers, so
a schema change is a regeneration, never an edit in three places.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Scalar wire kinds and their FlatBuffers widths (bytes).
SCALAR_WIDTH: dict[str, int] = {
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "uint16": 2,
    "int16": 2,
    "uint32": 4,
    "int32": 4,
    "uint64": 8,
    "int64": 8,
    "float32": 4,
    "float64": 8,
}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a table, as seen by both codecs.

    ``kind`` is one of the scalar kinds in ``SCALAR_WIDTH`` or: ``string``, ``timestamp`` (the
    ``Timestamp`` struct), ``bytes`` (opaque ``[ubyte]``, base64 in YAML), ``multihash`` and ``did``
    (``[ubyte]`` holding a multihash / a dataset id, multibase strings in YAML), ``table``, ``union``
    or ``enum`` (then ``ref`` names the referenced type).
    """

    name: str
    yaml: str
    kind: str
    ref: str | None = None
    vector: bool = False
    required: bool = False
    #: ``= null`` scalars in the .fbs: written whenever present, even when equal to zero.
    optional_scalar: bool = False
    #: Schema default of a non-optional scalar: omitted from the binary form when equal.
    default: int | bool | None = None
    #: For ``[PrepStepWrapper]``-style vectors of unions: the wrapper table holding ``value``.
    wrapper: str | None = None
    #: FlatBuffers field id (a union occupies two ids: ``<f>_type`` then ``<f>``).
    slot: int = 0


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    fields: tuple[FieldSpec, ...]
    #: Number of FlatBuffers vtable slots (unions count twice).
    num_slots: int
    #: False for types that exist only in the JSON schemas (``DatasetSnapshot``).
    has_binary_form: bool = True


@dataclass(frozen=True, slots=True)
class UnionSpec:
    """A union: ``variants[i]`` is ``(yaml_tag, table_name)`` with FlatBuffers type id ``i + 1``."""

    name: str
    variants: tuple[tuple[str, str], ...]
