"""HTTP downloads for ``Url`` sources, bounded in time, retried when the failure is transient.

Built on httpx rather than urllib: it gives separate connect / read timeouts, streaming bodies that
yield data as it arrives (so a deadline can be checked between pieces), and one exception hierarchy
that tells a timeout from a refused connection from a dropped one.

Bounds, all set by :class:`HttpSettings` (environment variables, see ``docs/guide/manifests.md``):

- **Timeouts.** Connecting may take ``connect_timeout`` seconds; each read waits at most
  ``read_timeout`` seconds for the next bytes.
- **Deadline.** One fetch (every attempt and every wait between them) may take ``deadline`` seconds.
  Timeouts alone cannot stop a server that trickles a byte every few seconds; the low-speed rule
  does, and the deadline stays the outer bound (the only one with the rule off). Each attempt's
  timeouts are cut to the time left, so a silent server is also stopped by it; a trickling one is
  stopped at the first bytes that arrive after it.
- **Low speed.** A body that arrives at under ``low_speed_limit`` bytes a second, averaged over the last
  ``low_speed_time`` seconds, is stopped (curl's ``--speed-limit`` / ``--speed-time``): the deadline has to
  be long enough for the largest download, so alone it lets a stalled one hold a run (and the workspace
  lock) for that long, while a slow but steady download is never stopped by this rule. It is a sliding
  window (:class:`LowSpeedWindow`) over the bytes received on the wire (before any ``Content-Encoding`` is
  undone), started when the answer's headers arrive and judged only once the body has lasted a whole
  window. Silence is the read timeout's job, and it already stops a server that sends nothing; a trickle
  never trips a read timeout, so the window is judged each time bytes arrive, and a trickle is stopped at
  its first bytes after the window shows it too slow. ``low_speed_limit`` 0 turns the rule off; the
  deadline stays the outer bound either way.
- **Retries.** A 5xx answer, 429 Too Many Requests, a refused or dropped connection, a timeout and a
  low-speed stop are tried again, at most ``retries`` times, after ``backoff`` seconds, then twice
  that, and so on (at most :data:`MAX_BACKOFF`; a server's ``Retry-After`` in seconds is honoured
  within that cap). A 4xx answer is the request's fault and is never retried. A retry never starts
  if its wait would pass the deadline. A low-speed stop counts as a timeout, as curl's ``--retry``
  counts it: it says as little about the resource as a read timeout does (a congested path or a
  stuck server connection, which a new connection often escapes), and the retry count and the
  deadline bound what the retries can cost (each retry starts the body again from its first byte).

The body is streamed to a ``.part`` file beside the target and renamed when complete, so memory stays
flat whatever the size and a failure never leaves a half file under the target's name.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import ssl
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from odfproj.ingest.errors import (
    FetchError,
    IngestError,
    SourceNotFoundError,
    SourceUnreachableError,
    one_line,
)

__all__ = [
    "ENV_BACKOFF",
    "ENV_CONNECT_TIMEOUT",
    "ENV_DEADLINE",
    "ENV_LOW_SPEED_LIMIT",
    "ENV_LOW_SPEED_TIME",
    "ENV_READ_TIMEOUT",
    "ENV_RETRIES",
    "MAX_BACKOFF",
    "HttpResponse",
    "HttpSettings",
    "LowSpeedWindow",
    "download",
]

ENV_CONNECT_TIMEOUT = "ODFPROJ_HTTP_CONNECT_TIMEOUT"
ENV_READ_TIMEOUT = "ODFPROJ_HTTP_READ_TIMEOUT"
ENV_DEADLINE = "ODFPROJ_HTTP_DEADLINE"
ENV_RETRIES = "ODFPROJ_HTTP_RETRIES"
ENV_BACKOFF = "ODFPROJ_HTTP_BACKOFF"
ENV_LOW_SPEED_LIMIT = "ODFPROJ_HTTP_LOW_SPEED_LIMIT"
ENV_LOW_SPEED_TIME = "ODFPROJ_HTTP_LOW_SPEED_TIME"

#: The longest wait between two attempts, whatever the attempt count or a server's Retry-After.
MAX_BACKOFF = 60.0

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpSettings:
    """How long an HTTP fetch may take and how often it is tried (seconds, count)."""

    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    #: The whole fetch, retries and waits included.
    deadline: float = 900.0
    #: Attempts after the first one.
    retries: int = 3
    #: The wait before the first retry; it doubles with each further one.
    backoff: float = 1.0
    #: Bytes a second a body must average over ``low_speed_time`` seconds; 0 turns the rule off.
    low_speed_limit: int = 1024
    #: The window, in seconds, over which ``low_speed_limit`` is averaged.
    low_speed_time: float = 60.0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> HttpSettings:
        """The defaults, overridden by the ``ODFPROJ_HTTP_*`` variables set in ``environ``."""
        default = cls()
        return cls(
            connect_timeout=_seconds(environ, ENV_CONNECT_TIMEOUT, default.connect_timeout),
            read_timeout=_seconds(environ, ENV_READ_TIMEOUT, default.read_timeout),
            deadline=_seconds(environ, ENV_DEADLINE, default.deadline),
            retries=_count(environ, ENV_RETRIES, default.retries),
            backoff=_seconds(environ, ENV_BACKOFF, default.backoff, allow_zero=True),
            low_speed_limit=_count(environ, ENV_LOW_SPEED_LIMIT, default.low_speed_limit),
            low_speed_time=_seconds(environ, ENV_LOW_SPEED_TIME, default.low_speed_time),
        )

    def wait_before(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        wait = self.backoff * 2 ** (retry - 1)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, MAX_BACKOFF)


def _seconds(environ: Mapping[str, str], name: str, default: float, *, allow_zero: bool = False) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        what = "a number of seconds, 0 or more" if allow_zero else "a number of seconds above 0"
        raise IngestError(f"{name}={text!r} is not {what}")
    return value


def _count(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise IngestError(f"{name}={text!r} is not a whole number, 0 or more")
    return int(text)


class LowSpeedWindow:
    """The bytes a transfer got over its last ``seconds``, judged against ``limit`` bytes a second.

    Fed the transfer's running byte count with the time it was read (any monotonic clock, so a test
    passes its own times). It keeps one sample per ``seconds / RESOLUTION`` at most, so its memory is
    bounded however fast the bytes come; the bytes read between two kept samples count until the later
    sample leaves the window, so the count errs towards more bytes (and a later stop), never fewer.
    """

    #: Kept samples per window, at most (plus one).
    RESOLUTION = 64

    __slots__ = ("_samples", "limit", "seconds", "started")

    def __init__(self, limit: int, seconds: float, started: float) -> None:
        self.limit = limit
        self.seconds = seconds
        self.started = started
        #: (time, bytes so far), oldest first; the first is at or before the window's start.
        self._samples: deque[tuple[float, int]] = deque([(started, 0)])

    def too_slow(self, total: int, now: float) -> int | None:
        """Record that ``total`` bytes have arrived by ``now``; the bytes of the last ``seconds`` if they
        average under ``limit``, else ``None`` (also while the transfer has not lasted a whole window)."""
        samples = self._samples
        if now - samples[-1][0] >= self.seconds / self.RESOLUTION:
            samples.append((now, total))
        window_start = now - self.seconds
        while len(samples) > 1 and samples[1][0] <= window_start:
            samples.popleft()
        if now - self.started < self.seconds:
            return None
        got = total - samples[0][1]
        return got if got < self.limit * self.seconds else None

    def reason(self, got: int) -> str:
        """What a stop says: the bytes of the window and the rule, with the variables that set it."""
        return (
            f"transferred {got} bytes in the last {self.seconds:g} s, under the low-speed limit of "
            f"{self.limit} B/s ({ENV_LOW_SPEED_LIMIT} / {ENV_LOW_SPEED_TIME})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpResponse:
    """What a download got: the body in ``target`` (unless ``not_modified``) and its validators."""

    not_modified: bool
    etag: str | None = None
    last_modified: str | None = None
    #: The wait before each retry that was made, in order (empty when the first attempt succeeded).
    waits: tuple[float, ...] = ()


class _Transient(Exception):
    """An attempt failed in a way worth another try."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _Permanent(Exception):
    """An attempt failed in a way another try cannot fix: a 4xx answer, a bad URL, a redirect loop."""


class _NotFound(_Permanent):
    """404 or 410: the resource is not there."""


class _DeadlinePassed(Exception):
    """The fetch's deadline passed during an attempt."""


def download(
    url: str,
    headers: Sequence[tuple[str, str]],
    target: Path,
    *,
    settings: HttpSettings,
    proxy: str | None,
    where: str,
) -> HttpResponse:
    """GET ``url`` into the new file ``target``, within ``settings``' bounds.

    ``where`` starts every error message (dataset, source and URL as written in the manifest, so a
    secret expanded into the URL never reaches a message). A 304 answer returns ``not_modified``.
    """
    started = time.monotonic()
    deadline_at = started + settings.deadline
    waits: list[float] = []
    with _client(proxy) as client:
        while True:
            try:
                return _attempt(client, url, headers, target, settings, deadline_at, tuple(waits))
            except _DeadlinePassed:
                raise SourceUnreachableError(
                    f"{where}: gave up after the {settings.deadline:g} s deadline ({ENV_DEADLINE}); "
                    f"{_attempts(len(waits) + 1)} made"
                ) from None
            except _NotFound as e:
                raise SourceNotFoundError(f"{where}: {e}") from None
            except _Permanent as e:
                raise FetchError(f"{where}: {e}") from None
            except _Transient as e:
                failure = e
            if len(waits) >= settings.retries:
                raise SourceUnreachableError(
                    f"{where}: {failure.reason} (gave up after {_attempts(len(waits) + 1)})"
                ) from None
            wait = settings.wait_before(len(waits) + 1, failure.retry_after)
            if time.monotonic() + wait >= deadline_at:
                raise SourceUnreachableError(
                    f"{where}: {failure.reason} (gave up after {_attempts(len(waits) + 1)}: no time is "
                    f"left for another within the {settings.deadline:g} s deadline, {ENV_DEADLINE})"
                ) from None
            _LOG.warning("%s: %s; retrying in %g s", where, failure.reason, wait)
            waits.append(wait)
            time.sleep(wait)


def _attempts(count: int) -> str:
    return "1 attempt" if count == 1 else f"{count} attempts"


def _client(proxy: str | None) -> httpx.Client:
    # trust_env=False: proxies come from the environ given to fetch, not from os.environ; the
    # system's certificate store (what urllib used) rather than httpx's bundled one.
    return httpx.Client(
        proxy=proxy,
        trust_env=False,
        verify=ssl.create_default_context(),
        follow_redirects=True,
    )


def _attempt(
    client: httpx.Client,
    url: str,
    headers: Sequence[tuple[str, str]],
    target: Path,
    settings: HttpSettings,
    deadline_at: float,
    waits: tuple[float, ...],
) -> HttpResponse:
    left = deadline_at - time.monotonic()
    if left <= 0:
        raise _DeadlinePassed
    connect = min(settings.connect_timeout, left)
    read = min(settings.read_timeout, left)
    timeout = httpx.Timeout(connect=connect, read=read, write=read, pool=connect)
    part = target.with_name(target.name + ".part")
    try:
        with client.stream("GET", url, headers=list(headers), timeout=timeout) as response:
            status = response.status_code
            if status == 304:
                return HttpResponse(not_modified=True, waits=waits)
            if status >= 400:
                _raise_for_status(response)
            target.parent.mkdir(parents=True, exist_ok=True)
            low_speed = (
                LowSpeedWindow(settings.low_speed_limit, settings.low_speed_time, time.monotonic())
                if settings.low_speed_limit > 0
                else None
            )
            with open(part, "xb") as out:
                for piece in response.iter_bytes():
                    out.write(piece)
                    now = time.monotonic()
                    if now > deadline_at:
                        raise _DeadlinePassed
                    if low_speed is not None:
                        got = low_speed.too_slow(response.num_bytes_downloaded, now)
                        if got is not None:
                            raise _Transient(low_speed.reason(got))
            os.replace(part, target)
            return HttpResponse(
                not_modified=False,
                etag=response.headers.get("ETag"),
                last_modified=response.headers.get("Last-Modified"),
                waits=waits,
            )
    except httpx.TimeoutException as e:
        if time.monotonic() >= deadline_at:
            raise _DeadlinePassed from None
        phase = (
            "connecting" if isinstance(e, httpx.ConnectTimeout | httpx.PoolTimeout) else "waiting for data"
        )
        limit = connect if phase == "connecting" else read
        raise _Transient(f"timed out after {limit:g} s {phase}") from None
    except (httpx.NetworkError, httpx.RemoteProtocolError) as e:
        raise _Transient(_network_reason(e)) from None
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as e:  # redirects, bad URL or header
        raise _Permanent(one_line(str(e)) or type(e).__name__) from None
    except OSError as e:  # writing the download (a full disk, a missing work folder)
        raise _Permanent(f"cannot save the download: {one_line(str(e))}") from None
    finally:
        part.unlink(missing_ok=True)


def _raise_for_status(response: httpx.Response) -> None:
    status = response.status_code
    reason = f"HTTP {status} {one_line(response.reason_phrase)}".rstrip()
    if status >= 500 or status == 429:
        raise _Transient(reason, _retry_after(response.headers.get("Retry-After")))
    if status in (404, 410):
        raise _NotFound(reason)
    raise _Permanent(reason)


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds; an HTTP-date form is ignored (the backoff applies instead)."""
    if value and value.strip().isdigit():
        return float(value.strip())
    return None


def _network_reason(error: BaseException) -> str:
    """A short human reason for a failed connection, from the OS error httpx wraps."""
    cause = _os_error(error)
    if isinstance(cause, socket.gaierror):
        return f"cannot resolve host ({one_line(str(cause.strerror or cause))})"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, httpx.RemoteProtocolError):
        return "connection closed before the whole response was received"
    return one_line(str(cause or error)) or type(error).__name__


def _os_error(error: BaseException) -> OSError | None:
    """The ``OSError`` behind an httpx error: httpx and httpcore chain it as cause or first argument."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError):
            return current
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
        pending += [a for a in current.args if isinstance(a, BaseException)]
    return None
