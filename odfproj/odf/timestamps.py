"""RFC 3339 timestamps as ODF writes them: always UTC, ``Z`` suffix, fractional seconds only when non-zero.

ODF's binary ``Timestamp`` struct has nanosecond precision; Python's ``datetime`` has microseconds.
Digits past the sixth are truncated on parse. Blocks are always hashed from their stored bytes, never
from a re-serialization, so this never changes a block hash; it only limits what a user can type.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from odfproj.errors import InvalidValueError

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:\d{2})$"
)


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with a mandatory offset into an aware UTC ``datetime``."""
    m = _RFC3339.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise InvalidValueError(
            f"invalid timestamp {text!r}: expected RFC 3339 with a time zone, e.g. 2024-01-31T12:00:00Z"
        )
    year, month, day, hour, minute, second, frac, tz = m.groups()
    micros = int((frac or "0")[:6].ljust(6, "0"))
    try:
        value = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=UTC
        )
    except ValueError as e:
        raise InvalidValueError(f"invalid timestamp {text!r}: {e}") from None
    if tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        value -= sign * timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
    return value


def format_rfc3339(value: datetime) -> str:
    """Format like the reference implementation: UTC, ``Z``, and 3 or 6 fractional digits only when needed."""
    value = to_utc(value)
    base = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        f"T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )  # strftime does not zero-pad years before 1000
    if value.microsecond == 0:
        return base + "Z"
    if value.microsecond % 1000 == 0:
        return f"{base}.{value.microsecond // 1000:03d}Z"
    return f"{base}.{value.microsecond:06d}Z"


def to_utc(value: datetime) -> datetime:
    """Naive datetimes are rejected rather than guessed: a wrong zone silently shifts history."""
    if value.tzinfo is None:
        raise InvalidValueError(f"timestamp {value.isoformat()} has no time zone")
    return value.astimezone(UTC)
