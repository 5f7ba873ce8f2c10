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

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

import pyarrow as pa

from odfproj.odf import model
from odfproj.odf.timestamps import to_utc

OFFSET = "offset"
OP = "op"
SYSTEM_TIME = "system_time"
EVENT_TIME = "event_time"

#: System columns in the order they lead every data file.
SYSTEM_COLUMNS = (OFFSET, OP, SYSTEM_TIME, EVENT_TIME)

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


class Op(enum.IntEnum):
    """Operation type of a record (spec: Representation of Retractions and Corrections)."""

    APPEND = 0  # +A
    RETRACT = 1  # -R
    CORRECT_FROM = 2  # -C, carries the old values
    CORRECT_TO = 3  # +C, carries the new values; immediately follows its -C

    @property
    def code(self) -> str:
        return ("+A", "-R", "-C", "+C")[self.value]


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


def watermark_of(latest: datetime | date | None) -> datetime | None:
    """The watermark a maximum event time means: a date counts from its midnight UTC."""
    if latest is None:
        return None
    if not isinstance(latest, datetime):
        return datetime(latest.year, latest.month, latest.day, tzinfo=UTC)
    return to_utc(latest)


@dataclass(frozen=True, slots=True)
class Vocab:
    """The system column names in the dataset's files (``SetVocab``, defaults from the spec)."""

    offset: str = OFFSET
    op: str = OP
    system_time: str = SYSTEM_TIME
    event_time: str = EVENT_TIME

    @classmethod
    def of(cls, vocab: model.SetVocab | None) -> Vocab:
        if vocab is None:
            return cls()
        return cls(
            vocab.offset_column or OFFSET,
            vocab.operation_type_column or OP,
            vocab.system_time_column or SYSTEM_TIME,
            vocab.event_time_column or EVENT_TIME,
        )

    def to_file(self) -> dict[str, str]:
        """Standard name -> name in the files."""
        return {OFFSET: self.offset, OP: self.op, SYSTEM_TIME: self.system_time, EVENT_TIME: self.event_time}

    def to_standard(self) -> dict[str, str]:
        """Name in the files -> standard name, for the system columns the vocabulary renames."""
        return {actual: standard for standard, actual in self.to_file().items() if actual != standard}

    def standard_names(self, names: Sequence[str]) -> tuple[str, ...]:
        """``names`` as the file calls them (a merge key, compared columns) under the standard names.

        ``primaryKey: [PID, REPORT_YEAR]`` with ``eventTimeColumn: REPORT_YEAR`` is a key on the event
        time: internally that column is ``event_time``.
        """
        renames = self.to_standard()
        return tuple(renames.get(n, n) for n in names)

    def clash(self, columns: Sequence[str]) -> str | None:
        """A user column that would collide with a system column once renamed, or ``None``.

        With ``eventTimeColumn: date`` a user column called ``event_time`` cannot be told apart
        from the event time under the standard names.
        """
        renamed = set(self.to_standard())
        for name in columns:
            if name in renamed:
                continue
            if name in self.to_standard().values():
                return name
        return None
