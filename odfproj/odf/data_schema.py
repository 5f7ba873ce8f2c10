"""The common data schema every ODF data file carries, and the operation types of changelog records.

Types: the spec's table recommends ``uint64`` offsets and ``uint8`` ops, but Spark has no unsigned
integers and the reference implementation writes ``int64``/``int32``; we follow the reference so files
interoperate and logical hashes agree. Timestamps are ``timestamp(ms, UTC)``; the event time may also
be a ``DATE`` (``date32``), which the reference implementation keeps as declared.

The vocabulary (``SetVocab``) *names* the system columns: the files, the schema, merge keys, queries
and the state all use the vocabulary's names. Internally the ingest and transform machinery works on
the standard names; :class:`Vocab` is the one place that maps between the two.
"""

from __future__ import annotations

import pyarrow as pa

from odfproj.odf.vocab import (
    EVENT_TIME,
    OFFSET,
    OP,
    SYSTEM_COLUMNS,
    SYSTEM_TIME,
    Op,
    Vocab,
    watermark_of,
)

__all__ = [
    "EVENT_TIME",
    "GEOMETRY_ATTRIBUTE",
    "GEOMETRY_ENCODING",
    "OFFSET",
    "OFFSET_TYPE",
    "OP",
    "OP_TYPE",
    "SYSTEM_COLUMNS",
    "SYSTEM_TIME",
    "TIMESTAMP_TYPE",
    "Op",
    "Vocab",
    "event_time_column",
    "geometry_field",
    "is_geometry_field",
    "system_fields",
    "watermark_of",
]

OFFSET_TYPE = pa.int64()
OP_TYPE = pa.int32()
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")

#: The mark of a ``binary`` column that holds geometry as kamu's Spark engine writes it (Apache Sedona's
#: serialised geometry, ``engine.gis``): the key and value of the column's Arrow field metadata, of its
#: ``extra`` attributes in an ODF schema (``odf.odf_schema``) and of its Spark field metadata. Without it
#: a ``binary`` column is bytes: which columns are geometry is never guessed from their values.
GEOMETRY_ATTRIBUTE = "odfproj.dev/geometry"
GEOMETRY_ENCODING = "sedona"


def is_geometry_field(field: pa.Field) -> bool:
    """Whether ``field`` is a geometry column (:data:`GEOMETRY_ATTRIBUTE`)."""
    metadata = field.metadata or {}
    return (
        pa.types.is_binary(field.type)
        and metadata.get(GEOMETRY_ATTRIBUTE.encode()) == GEOMETRY_ENCODING.encode()
    )


def geometry_field(field: pa.Field) -> pa.Field:
    """``field`` marked as a geometry column (:data:`GEOMETRY_ATTRIBUTE`)."""
    metadata = dict(field.metadata or {})
    metadata[GEOMETRY_ATTRIBUTE.encode()] = GEOMETRY_ENCODING.encode()
    return field.with_metadata(metadata)


def system_fields(vocab: Vocab | None = None) -> list[pa.Field]:
    """Arrow fields of the system columns (event_time nullable only in name: ingest always sets it).

    Named by ``vocab`` (default: the standard names). A data file's event time may also be a ``date32``.
    """
    vocab = vocab or Vocab()
    return [
        pa.field(vocab.offset, OFFSET_TYPE, nullable=False),
        pa.field(vocab.op, OP_TYPE, nullable=False),
        pa.field(vocab.system_time, TIMESTAMP_TYPE, nullable=False),
        pa.field(vocab.event_time, TIMESTAMP_TYPE),
    ]


def event_time_column(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Event times with the type the files store: a date stays ``date32``, any timestamp becomes ms UTC."""
    if pa.types.is_date(values.type):
        return values.cast(pa.date32())
    return values.cast(TIMESTAMP_TYPE, safe=False)
