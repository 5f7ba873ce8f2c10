"""The names of ODF's system columns and the operation types of changelog records.

Apart from ``odf.data_schema`` (their Arrow types) because naming a column needs no pyarrow: the
planner, the loader and the CLI use these names on every command, and importing pyarrow costs 0.1 s.
See ``odf.data_schema`` for how the vocabulary maps file names to standard names.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from odfproj.odf import model
from odfproj.odf.timestamps import to_utc

OFFSET = "offset"
OP = "op"
SYSTEM_TIME = "system_time"
EVENT_TIME = "event_time"

#: System columns in the order they lead every data file.
SYSTEM_COLUMNS = (OFFSET, OP, SYSTEM_TIME, EVENT_TIME)


class Op(enum.IntEnum):
    """Operation type of a record (spec: Representation of Retractions and Corrections)."""

    APPEND = 0  # +A
    RETRACT = 1  # -R
    CORRECT_FROM = 2  # -C, carries the old values
    CORRECT_TO = 3  # +C, carries the new values; immediately follows its -C

    @property
    def code(self) -> str:
        return ("+A", "-R", "-C", "+C")[self.value]


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
