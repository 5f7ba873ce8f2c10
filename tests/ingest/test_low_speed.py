"""The low-speed rule of Url fetches: a transfer averaging under a limit over a sliding window stops (issue 35).

The window logic is tested with the times passed in (no clock); the rule end to end against real servers
on 127.0.0.1 (tests/security/fetch_helpers.py) with a small configured rule (100 B/s over a second or
less), so each test takes a second or two. A deadline stays set so that a fetch the rule fails to stop
ends with a different error rather than hanging.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from odfproj.ingest.errors import IngestError, SourceUnreachableError
from odfproj.ingest.http import (
    ENV_DEADLINE,
    ENV_LOW_SPEED_LIMIT,
    ENV_LOW_SPEED_TIME,
    ENV_RETRIES,
    HttpSettings,
    LowSpeedWindow,
)
from tests.security.fetch_helpers import fetch_url, no_leftovers, raw_server, trickling

RULE = r"under the low-speed limit of 100 B/s \(ODFPROJ_HTTP_LOW_SPEED_LIMIT / ODFPROJ_HTTP_LOW_SPEED_TIME\)"


# -- the window, with the times given ----------------------------------------------------------


def _feed(window: LowSpeedWindow, pieces: list[tuple[float, int]]) -> tuple[float, int] | None:
    """Feed (time, size) pieces; the time and the window's count of the first one found too slow."""
    total = 0
    for now, size in pieces:
        total += size
        got = window.too_slow(total, now)
        if got is not None:
            return now, got
    return None


def _steady(rate: int, every: float, start: float, end: float) -> list[tuple[float, int]]:
    """``rate`` bytes a second in pieces ``every`` seconds apart, from ``start`` until ``end``."""
    count = round((end - start) / every)
    return [(start + every * (i + 1), round(rate * every)) for i in range(count)]


def test_nothing_is_judged_before_a_whole_window() -> None:
    window = LowSpeedWindow(100, 1.0, started=10.0)
    assert window.too_slow(0, 10.5) is None
    assert window.too_slow(1, 10.99) is None
    assert window.too_slow(2, 11.0) == 2  # a whole window, 2 bytes: under 100 B/s


def test_a_steady_transfer_above_the_limit_never_stops() -> None:
    window = LowSpeedWindow(100, 1.0, started=0.0)
    assert _feed(window, _steady(rate=120, every=0.05, start=0.0, end=300.0)) is None


def test_a_steady_transfer_under_the_limit_stops_after_one_window() -> None:
    window = LowSpeedWindow(100, 1.0, started=0.0)
    assert _feed(window, _steady(rate=80, every=0.05, start=0.0, end=300.0)) == pytest.approx((1.0, 80))


def test_the_window_slides_a_fast_start_does_not_cover_a_stall() -> None:
    """10 kB at once, then a byte every 0.2 s: the average since the start stays above 100 B/s for
    about 100 s, but the last second holds 5 bytes, so it stops as soon as the burst leaves the window."""
    window = LowSpeedWindow(100, 1.0, started=0.0)
    pieces = [(0.01, 10_000)] + [(0.01 + 0.2 * (i + 1), 1) for i in range(500)]
    stopped = _feed(window, pieces)
    assert stopped is not None
    at, got = stopped
    assert 1.0 < at <= 1.0 + 0.01 + 0.2 + 1.0 / LowSpeedWindow.RESOLUTION
    assert got < 100


def test_a_stall_after_a_steady_start_stops_one_window_later() -> None:
    window = LowSpeedWindow(100, 1.0, started=0.0)
    pieces = _steady(rate=500, every=0.01, start=0.0, end=10.0) + [
        (10.0 + 0.2 * (i + 1), 1) for i in range(50)
    ]
    stopped = _feed(window, pieces)
    assert stopped is not None
    assert 10.8 <= stopped[0] <= 11.2 + 1.0 / LowSpeedWindow.RESOLUTION


def test_the_count_errs_towards_more_bytes_never_fewer() -> None:
    """Every piece within the last window is counted, whatever samples were kept."""
    window = LowSpeedWindow(10**9, 1.0, started=0.0)  # always too slow, so every call reports its count
    total = 0
    arrivals: list[tuple[float, int]] = []
    for i in range(2000):
        now, size = 0.003 * (i + 1), 1 + i % 7
        total += size
        arrivals.append((now, size))
        got = window.too_slow(total, now)
        if now >= 1.0:
            assert got is not None
            assert got >= sum(s for t, s in arrivals if t > now - 1.0)
            assert got <= sum(s for t, s in arrivals if t > now - 1.0 - 2.0 / LowSpeedWindow.RESOLUTION)


def test_memory_is_bounded_however_many_pieces_arrive() -> None:
    window = LowSpeedWindow(100, 60.0, started=0.0)
    for i in range(100_000):
        window.too_slow(i * 1000, i * 0.001)
    assert len(window._samples) <= LowSpeedWindow.RESOLUTION + 2


def test_the_reason_names_the_bytes_the_window_and_the_variables() -> None:
    assert LowSpeedWindow(1024, 60.0, started=0.0).reason(12) == (
        "transferred 12 bytes in the last 60 s, under the low-speed limit of 1024 B/s "
        "(ODFPROJ_HTTP_LOW_SPEED_LIMIT / ODFPROJ_HTTP_LOW_SPEED_TIME)"
    )


# -- the settings ------------------------------------------------------------------------------


def test_the_rule_is_1_kib_per_second_over_60_seconds_by_default() -> None:
    settings = HttpSettings.from_environ({})
    assert (settings.low_speed_limit, settings.low_speed_time) == (1024, 60.0)


def test_the_rule_comes_from_the_environment() -> None:
    environ = {ENV_LOW_SPEED_LIMIT: " 100 ", ENV_LOW_SPEED_TIME: "2.5"}
    assert HttpSettings.from_environ(environ) == HttpSettings(low_speed_limit=100, low_speed_time=2.5)
    assert HttpSettings.from_environ({ENV_LOW_SPEED_LIMIT: "0"}).low_speed_limit == 0


@pytest.mark.parametrize(
    ("name", "value", "what"),
    [
        (ENV_LOW_SPEED_LIMIT, "-1", "a whole number, 0 or more"),
        (ENV_LOW_SPEED_LIMIT, "1.5", "a whole number, 0 or more"),
        (ENV_LOW_SPEED_LIMIT, "fast", "a whole number, 0 or more"),
        (ENV_LOW_SPEED_TIME, "0", "a number of seconds above 0"),
        (ENV_LOW_SPEED_TIME, "-3", "a number of seconds above 0"),
        (ENV_LOW_SPEED_TIME, "nan", "a number of seconds above 0"),
        (ENV_LOW_SPEED_TIME, "a minute", "a number of seconds above 0"),
    ],
)
def test_a_bad_value_is_a_one_line_error_naming_the_variable(name: str, value: str, what: str) -> None:
    with pytest.raises(IngestError, match=rf"^{name}='{value}' is not {what}$"):
        HttpSettings.from_environ({name: value})


# -- real servers ------------------------------------------------------------------------------


def paced(pieces: list[tuple[float, bytes]]) -> Callable[[socket.socket, threading.Event], None]:
    """Answer 200 at once, then send each piece after waiting its seconds."""
    total = sum(len(data) for _, data in pieces)

    def serve(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n".encode())
        for wait, data in pieces:
            if stop.wait(wait):
                return
            conn.sendall(data)

    return serve


def test_a_trickling_server_is_stopped_by_the_rule_from_the_environment(tmp_path: Path) -> None:
    """A byte every 0.2 s never trips the 30 s read timeout; 5 bytes a second is under 100 B/s."""
    environ = {ENV_LOW_SPEED_LIMIT: "100", ENV_LOW_SPEED_TIME: "1", ENV_RETRIES: "0", ENV_DEADLINE: "8"}
    with raw_server(trickling(0.2)) as server:
        with pytest.raises(SourceUnreachableError) as e:
            fetch_url(server.url(), tmp_path, None, environ, dataset="slow.ds")
        assert server.connections == 1
    message = str(e.value)
    assert message.startswith(f"dataset 'slow.ds', source 'default': cannot fetch {server.url()}: ")
    assert "\n" not in message and "deadline" not in message
    assert re.search(rf"transferred \d+ bytes in the last 1 s, {RULE} \(gave up after 1 attempt\)$", message)
    assert no_leftovers(tmp_path)


def test_a_stall_after_a_fast_start_is_stopped(tmp_path: Path) -> None:
    """5 kB at once then a byte every 0.2 s: the average since the start stays over 100 B/s for ~50 s."""
    pieces = [(0.0, b"x" * 5000)] + [(0.2, b"x")] * 2000
    settings = HttpSettings(low_speed_limit=100, low_speed_time=1, retries=0, deadline=8)
    with raw_server(paced(pieces)) as server, pytest.raises(SourceUnreachableError, match=RULE):
        fetch_url(server.url(), tmp_path, settings, dataset="slow.ds")
    assert no_leftovers(tmp_path)


def test_a_low_speed_stop_is_retried_like_a_timeout(tmp_path: Path) -> None:
    settings = HttpSettings(low_speed_limit=100, low_speed_time=0.5, retries=1, backoff=0.01, deadline=8)
    with raw_server(trickling(0.2)) as server:
        with pytest.raises(SourceUnreachableError, match=rf"{RULE} \(gave up after 2 attempts\)$"):
            fetch_url(server.url(), tmp_path, settings, dataset="slow.ds")
        assert server.connections == 2


def test_a_slow_but_steady_download_completes_with_every_byte(tmp_path: Path) -> None:
    """500 B/s for two seconds, over a 0.5 s window of a 100 B/s rule: never stopped."""
    body = bytes(range(256)) * 4
    pieces = [(0.1, body[i : i + 50]) for i in range(0, len(body), 50)]
    settings = HttpSettings(low_speed_limit=100, low_speed_time=0.5, retries=0, deadline=30)
    with raw_server(paced(pieces)) as server:
        result = fetch_url(server.url(), tmp_path, settings, dataset="slow.ds")
    [item] = result.items
    assert item.path.read_bytes() == body


def test_a_limit_of_0_turns_the_rule_off(tmp_path: Path) -> None:
    settings = HttpSettings(low_speed_limit=0, low_speed_time=0.2, retries=0, deadline=1)
    with (
        raw_server(trickling(0.1)) as server,
        pytest.raises(SourceUnreachableError, match=r"gave up after the 1 s deadline"),
    ):
        fetch_url(server.url(), tmp_path, settings, dataset="slow.ds")
