"""Records with no event-time column take the fallback instant, whatever the process's local time zone.

PySpark reads a naive ``datetime`` literal as local time (``time.mktime``), so a UTC time given without its
zone moved by the local offset: on a machine set to Europe/Berlin an ingest stamped 12:00 UTC recorded
11:00 UTC. The suite runs with the zone unset (UTC), where the two agree; here the zone is set for real.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from odfproj.ingest.pipeline import fallback_event_time, with_event_time
from odfproj.odf.data_schema import EVENT_TIME, Vocab

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "UTC"])
def test_the_fallback_event_time_is_the_instant_in_any_local_time_zone(spark, monkeypatch, zone) -> None:
    from pyspark.sql import functions as F

    fallback = datetime(2026, 1, 1, 12, 0, 0, 250999, tzinfo=UTC)
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        batch, from_data = with_event_time(spark.range(1), Vocab.of(None), fallback)
        millis = batch.select(F.unix_millis(F.col(EVENT_TIME))).first()[0]
    finally:
        monkeypatch.undo()
        time.tzset()
    assert not from_data
    assert millis == 1767268800250  # 2026-01-01T12:00:00.250Z, truncated to milliseconds
    # What the records hold is the driver's fallback_event_time (UTC, whole milliseconds).
    assert (fallback_event_time(fallback) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        milliseconds=1
    ) == millis
