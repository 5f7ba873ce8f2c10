"""The common data schema every ODF data file carries, and the operation types of changelog records.

Types: the spec's table recommends ``uint64`` offsets and ``uint8`` ops, but Spark has no unsigned
integers and the reference implementation writes ``int64``/``int32``; we follow the reference so files
interoperate and logical hashes agree. Timestamps are ``timestamp(ms, UTC)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pyarrow as pa

from odfproj.odf import model

OFFSET = "offset"
OP = "op"
SYSTEM_TIME = "system_time"
EVENT_TIME = "event_time"

#: System columns in the order they lead every data file.
SYSTEM_COLUMNS = (OFFSET, OP, SYSTEM_TIME, EVENT_TIME)

OFFSET_TYPE = pa.int64()
OP_TYPE = pa.int32()
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")


class Op(enum.IntEnum):
    """Operation type of a record (spec: Representation of Retractions and Corrections)."""

    APPEND = 0  # +A
    RETRACT = 1  # -R
    CORRECT_FROM = 2  # -C, carries the old values
    CORRECT_TO = 3  # +C, carries the new values; immediately follows its -C

    @property
    def code(self) -> str:
        return ("+A", "-R", "-C", "+C")[self.value]


def system_fields() -> list[pa.Field]:
    """Arrow fields of the system columns (event_time nullable only in name: ingest always sets it)."""
    return [
        pa.field(OFFSET, OFFSET_TYPE, nullable=False),
        pa.field(OP, OP_TYPE, nullable=False),
        pa.field(SYSTEM_TIME, TIMESTAMP_TYPE, nullable=False),
        pa.field(EVENT_TIME, TIMESTAMP_TYPE),
    ]


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
