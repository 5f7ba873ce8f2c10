"""Event time rules: FromMetadata, FromSystemTime, and FromPath with the formats found in the wild."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from odfproj.ingest.errors import EventTimeError
from odfproj.ingest.event_time import (
    event_time_from_path,
    parse_timestamp,
    resolve_event_time,
    strptime_format,
)
from odfproj.odf import model

SYSTEM_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def from_path(pattern: str, fmt: str | None = None) -> model.EventTimeSourceFromPath:
    return model.EventTimeSourceFromPath(pattern=pattern, timestamp_format=fmt)


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        # no format: ISO 8601 / RFC 3339
        ("2024-01-31", None, datetime(2024, 1, 31, tzinfo=UTC)),
        ("20240131", None, datetime(2024, 1, 31, tzinfo=UTC)),
        ("2024-01-31T10:20:30Z", None, datetime(2024, 1, 31, 10, 20, 30, tzinfo=UTC)),
        ("2024-01-31T10:20:30+02:00", None, datetime(2024, 1, 31, 8, 20, 30, tzinfo=UTC)),
        ("2024-01-31 10:20", None, datetime(2024, 1, 31, 10, 20, tzinfo=UTC)),
        # java.text.SimpleDateFormat, as the spec says
        ("2024-01-31", "yyyy-MM-dd", datetime(2024, 1, 31, tzinfo=UTC)),
        ("31.01.2024", "dd.MM.yyyy", datetime(2024, 1, 31, tzinfo=UTC)),
        ("20240131_102030", "yyyyMMdd_HHmmss", datetime(2024, 1, 31, 10, 20, 30, tzinfo=UTC)),
        (
            "2024-01-31T10:20:30.250",
            "yyyy-MM-dd'T'HH:mm:ss.SSS",
            datetime(2024, 1, 31, 10, 20, 30, 250000, tzinfo=UTC),
        ),
        ("2024-01-31T10:20:30+0100", "yyyy-MM-dd'T'HH:mm:ssZ", datetime(2024, 1, 31, 9, 20, 30, tzinfo=UTC)),
        (
            "2024-01-31T10:20:30-05:00",
            "yyyy-MM-dd'T'HH:mm:ssXXX",
            datetime(2024, 1, 31, 15, 20, 30, tzinfo=UTC),
        ),
        ("Jan 5, 2024", "MMM d, yyyy", datetime(2024, 1, 5, tzinfo=UTC)),
        ("January 2024", "MMMM yyyy", datetime(2024, 1, 1, tzinfo=UTC)),
        ("24-03-07 01 PM", "yy-MM-dd hh a", datetime(2024, 3, 7, 13, tzinfo=UTC)),
        ("2024 at 07", "yyyy 'at' HH", datetime(2024, 1, 1, 7, tzinfo=UTC)),
        ("2024-060", "yyyy-DDD", datetime(2024, 2, 29, tzinfo=UTC)),
        # strftime / chrono, as the reference implementation reads it
        ("2024-01-31", "%Y-%m-%d", datetime(2024, 1, 31, tzinfo=UTC)),
        ("202401311020", "%Y%m%d%H%M", datetime(2024, 1, 31, 10, 20, tzinfo=UTC)),
        ("2024-01-31T10:20:30", "%FT%T", datetime(2024, 1, 31, 10, 20, 30, tzinfo=UTC)),
        (
            "2024-01-31 10:20:30.5+01:00",
            "%Y-%m-%d %H:%M:%S%.f%:z",
            datetime(2024, 1, 31, 9, 20, 30, 500000, tzinfo=UTC),
        ),
        ("100%", "%Y%%", None),
        ("1706696430", "%s", datetime(2024, 1, 31, 10, 20, 30, tzinfo=UTC)),
    ],
)
def test_parse_timestamp(text: str, fmt: str | None, expected: datetime | None) -> None:
    if expected is None:
        with pytest.raises(EventTimeError):
            parse_timestamp(text, fmt)
    else:
        assert parse_timestamp(text, fmt) == expected


def test_format_translation() -> None:
    assert strptime_format("yyyy-MM-dd'T'HH:mm:ss") == "%Y-%m-%dT%H:%M:%S"
    assert strptime_format("'100%' yyyy") == "100%% %Y"
    assert strptime_format("''yy''") == "'%y'"
    assert strptime_format("%F %T%.3f") == "%Y-%m-%d %H:%M:%S.%f"


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ("2024-01-31", "yyyy-MM-dd QQ", r"unsupported letter 'Q'"),
        ("2024", "yyyy 'open", r"unterminated quote"),
        ("31/01/2024", "yyyy-MM-dd", r"cannot parse '31/01/2024' with timestampFormat 'yyyy-MM-dd'"),
        ("31/01/2024", None, r"cannot parse '31/01/2024' as an ISO 8601 timestamp; set timestampFormat"),
    ],
)
def test_parse_errors(text: str, fmt: str | None, message: str) -> None:
    with pytest.raises(EventTimeError, match=message):
        parse_timestamp(text, fmt)


def test_from_path_matches_file_name_first_then_whole_path() -> None:
    assert event_time_from_path(from_path(r"^(\d{8})\.csv$", "yyyyMMdd"), "in/2023/20240131.csv") == datetime(
        2024, 1, 31, tzinfo=UTC
    )
    assert event_time_from_path(from_path(r"(\d{4}/\d{2})/", "yyyy/MM"), "in/2023/11/x.csv") == datetime(
        2023, 11, 1, tzinfo=UTC
    )


def test_from_path_with_a_url() -> None:
    url = "https://example.org/export?date=2024-02-29&format=csv"
    assert event_time_from_path(from_path(r"date=([0-9-]+)"), url) == datetime(2024, 2, 29, tzinfo=UTC)


def test_from_path_errors() -> None:
    with pytest.raises(EventTimeError, match=r"does not match 'a.csv'"):
        event_time_from_path(from_path(r"(\d+)"), "a.csv")
    with pytest.raises(EventTimeError, match=r"has no capture group"):
        event_time_from_path(from_path(r"\d+"), "1.csv")
    with pytest.raises(EventTimeError, match=r"invalid eventTime pattern"):
        event_time_from_path(from_path(r"(\d+"), "1.csv")
    with pytest.raises(EventTimeError, match=r"first group is empty"):
        event_time_from_path(from_path(r"x(\d+)?"), "x.csv")


def test_resolve_each_rule() -> None:
    cet = timezone(timedelta(hours=1))
    modified = datetime(2024, 1, 1, 1, 0, tzinfo=cet)
    kw = {"path": "data-2024-03-01.csv", "last_modified": modified, "system_time": SYSTEM_TIME}
    assert resolve_event_time(None, **kw) is None
    assert resolve_event_time(model.EventTimeSourceFromMetadata(), **kw) == datetime(2024, 1, 1, tzinfo=UTC)
    assert resolve_event_time(model.EventTimeSourceFromMetadata(), **{**kw, "last_modified": None}) is None
    assert resolve_event_time(model.EventTimeSourceFromSystemTime(), **kw) == SYSTEM_TIME
    assert resolve_event_time(from_path(r"data-(.*)\.csv"), **kw) == datetime(2024, 3, 1, tzinfo=UTC)
    with pytest.raises(EventTimeError, match=r"needs a path"):
        resolve_event_time(from_path(r"(.*)"), **{**kw, "path": None})
    assert resolve_event_time(model.EventTimeSourceFromSystemTime(), **kw).tzinfo == UTC
