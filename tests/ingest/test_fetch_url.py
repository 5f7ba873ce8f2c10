"""Fetch of ``Url`` sources against a real HTTP server on 127.0.0.1, and of ``file://`` URLs."""

from __future__ import annotations

import email.utils
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from odfproj.ingest.errors import (
    FetchError,
    IngestError,
    MissingParameterError,
    SourceNotFoundError,
    SourceUnreachableError,
    UnsupportedSourceError,
)
from odfproj.ingest.fetch import (
    KIND_ETAG,
    KIND_FETCHED,
    KIND_LAST_MODIFIED,
    FetchResult,
    expand_env_templates,
    fetch,
)
from odfproj.ingest.http import HttpSettings
from odfproj.odf import model

SYSTEM_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LAST_MODIFIED = datetime(2024, 3, 15, 8, 30, tzinfo=UTC)
#: No retries, so a failure test fails at once (retries are tested in tests/security/test_fetch_bounds.py).
ONCE = HttpSettings(retries=0)


@dataclass
class Resource:
    body: bytes
    etag: str | None = None
    last_modified: datetime | None = None
    status: int = 200
    delay: float = 0.0
    ignore_conditional: bool = False


@dataclass
class Server:
    """A tiny conditional-GET server: routes are edited by tests, requests are recorded."""

    base_url: str = ""
    routes: dict[str, Resource] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.base_url + path


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server.requests.append((self.path, dict(self.headers.items())))
            res = server.routes.get(self.path)
            if res is None:
                self.send_error(404, "Not Found")
                return
            if res.delay:
                time.sleep(res.delay)
            if res.status != 200:
                self.send_error(res.status)
                return
            if not res.ignore_conditional and self._not_modified(res):
                self.send_response(304)
                self.end_headers()
                return
            self.send_response(200)
            if res.etag:
                self.send_header("ETag", res.etag)
            if res.last_modified:
                self.send_header("Last-Modified", email.utils.format_datetime(res.last_modified, usegmt=True))
            self.send_header("Content-Length", str(len(res.body)))
            self.end_headers()
            self.wfile.write(res.body)

        def _not_modified(self, res: Resource) -> bool:
            inm = self.headers.get("If-None-Match")
            if inm is not None:
                return res.etag is not None and inm == res.etag
            ims = self.headers.get("If-Modified-Since")
            if ims is not None and res.last_modified is not None:
                return res.last_modified <= email.utils.parsedate_to_datetime(ims)
            return False

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client of the timeout test hangs up on purpose


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()
    httpd = _QuietServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


def run(step: model.FetchStep, tmp_path: Path, prev: model.SourceState | None = None, **kw) -> FetchResult:
    return fetch(
        step,
        dataset="my.dataset",
        source="default",
        prev_state=prev,
        project_root=tmp_path / "project",
        work_dir=tmp_path / "work",
        system_time=SYSTEM_TIME,
        environ=kw.pop("environ", {}),
        http=kw.pop("http", ONCE),
        **kw,
    )


def only(result: FetchResult):
    assert len(result.items) == 1
    return result.items[0]


# -- http -------------------------------------------------------------------------------------


def test_first_fetch_downloads_and_records_etag(server: Server, tmp_path: Path) -> None:
    server.routes["/data.csv"] = Resource(b"a,b\n1,2\n", etag='"v1"', last_modified=LAST_MODIFIED)
    item = only(run(model.FetchStepUrl(url=server.url("/data.csv")), tmp_path))
    assert item.path.read_bytes() == b"a,b\n1,2\n"
    assert item.path.parent == tmp_path / "work"
    assert item.temporary
    assert item.display_name == server.url("/data.csv")
    assert item.source_state == model.SourceState(source_name="default", kind=KIND_ETAG, value='"v1"')
    # the default event time is FromMetadata: Last-Modified, even though the state keeps the ETag
    assert item.event_time == LAST_MODIFIED


def test_unchanged_etag_gets_304_and_nothing_to_ingest(server: Server, tmp_path: Path) -> None:
    server.routes["/data.csv"] = Resource(b"x\n", etag='"v1"')
    step = model.FetchStepUrl(url=server.url("/data.csv"))
    state = only(run(step, tmp_path)).source_state
    result = run(step, tmp_path, prev=state)
    assert result.up_to_date and result.items == ()
    assert server.requests[-1][1]["If-None-Match"] == '"v1"'


def test_changed_etag_is_fetched_again(server: Server, tmp_path: Path) -> None:
    server.routes["/data.csv"] = Resource(b"x\n", etag='"v1"')
    step = model.FetchStepUrl(url=server.url("/data.csv"))
    state = only(run(step, tmp_path)).source_state
    server.routes["/data.csv"] = Resource(b"y\n", etag='"v2"')
    item = only(run(step, tmp_path, prev=state))
    assert item.path.read_bytes() == b"y\n"
    assert item.source_state is not None and item.source_state.value == '"v2"'


def test_last_modified_only_is_recorded_and_sent_back(server: Server, tmp_path: Path) -> None:
    server.routes["/d"] = Resource(b"x\n", last_modified=LAST_MODIFIED)
    step = model.FetchStepUrl(url=server.url("/d"))
    state = only(run(step, tmp_path)).source_state
    assert state == model.SourceState(
        source_name="default", kind=KIND_LAST_MODIFIED, value="2024-03-15T08:30:00Z"
    )
    assert run(step, tmp_path, prev=state).up_to_date
    assert server.requests[-1][1]["If-Modified-Since"] == "Fri, 15 Mar 2024 08:30:00 GMT"


def test_server_ignoring_conditional_request_is_still_up_to_date(server: Server, tmp_path: Path) -> None:
    """Some servers answer 200 to If-None-Match; an identical ETag still means "unchanged"."""
    server.routes["/d"] = Resource(b"x\n", etag='"v1"', ignore_conditional=True)
    step = model.FetchStepUrl(url=server.url("/d"))
    state = only(run(step, tmp_path)).source_state
    before = sorted(os.listdir(tmp_path / "work"))
    assert run(step, tmp_path, prev=state).up_to_date
    assert sorted(os.listdir(tmp_path / "work")) == before  # the second download was discarded


def test_no_validators_records_no_state(server: Server, tmp_path: Path) -> None:
    server.routes["/d"] = Resource(b"x\n")
    item = only(run(model.FetchStepUrl(url=server.url("/d")), tmp_path))
    assert item.source_state is None
    assert item.event_time is None  # no Last-Modified: unknown, the coordinator falls back


def test_cache_forever_fetches_once(server: Server, tmp_path: Path) -> None:
    server.routes["/d"] = Resource(b"x\n")
    step = model.FetchStepUrl(url=server.url("/d"), cache=model.SourceCachingForever())
    state = only(run(step, tmp_path)).source_state
    assert state == model.SourceState(source_name="default", kind=KIND_FETCHED, value="2024-05-01T12:00:00Z")
    count = len(server.requests)
    assert run(step, tmp_path, prev=state).up_to_date
    assert len(server.requests) == count  # not even asked


def test_headers_are_sent_with_env_templates_expanded(server: Server, tmp_path: Path) -> None:
    server.routes["/d"] = Resource(b"x\n")
    step = model.FetchStepUrl(
        url=server.url("/d"),
        headers=(model.RequestHeader(name="Authorization", value="Bearer ${{ env.API_TOKEN }}"),),
    )
    run(step, tmp_path, environ={"API_TOKEN": "s3cret"})
    assert server.requests[-1][1]["Authorization"] == "Bearer s3cret"
    assert server.requests[-1][1]["User-Agent"].startswith("odfproj/")


def test_missing_env_var_in_url_is_a_clear_error_without_secrets(server: Server, tmp_path: Path) -> None:
    step = model.FetchStepUrl(url=server.url("/d?token=${{ env.TOKEN }}"))
    with pytest.raises(MissingParameterError, match=r"environment variable TOKEN is not set") as e:
        run(step, tmp_path)
    assert "my.dataset" in str(e.value) and "default" in str(e.value)


def test_templated_url_is_shown_as_written(server: Server, tmp_path: Path) -> None:
    server.routes["/d?token=s3cret"] = Resource(b"x\n")
    item = only(
        run(model.FetchStepUrl(url=server.url("/d?token=${{ env.T }}")), tmp_path, environ={"T": "s3cret"})
    )
    assert "s3cret" not in item.display_name
    assert item.path.read_bytes() == b"x\n"


def test_event_time_from_system_time(server: Server, tmp_path: Path) -> None:
    server.routes["/d"] = Resource(b"x\n", last_modified=LAST_MODIFIED)
    step = model.FetchStepUrl(url=server.url("/d"), event_time=model.EventTimeSourceFromSystemTime())
    assert only(run(step, tmp_path)).event_time == SYSTEM_TIME


def test_event_time_from_url_path(server: Server, tmp_path: Path) -> None:
    server.routes["/export-2024-02-29.csv"] = Resource(b"x\n")
    step = model.FetchStepUrl(
        url=server.url("/export-2024-02-29.csv"),
        event_time=model.EventTimeSourceFromPath(pattern=r"export-(.+)\.csv", timestamp_format="yyyy-MM-dd"),
    )
    assert only(run(step, tmp_path)).event_time == datetime(2024, 2, 29, tzinfo=UTC)


def test_404_names_dataset_source_and_url(server: Server, tmp_path: Path) -> None:
    url = server.url("/missing.csv")
    with pytest.raises(SourceNotFoundError) as e:
        run(model.FetchStepUrl(url=url), tmp_path)
    message = str(e.value)
    assert "'my.dataset'" in message and "'default'" in message and url in message
    assert "HTTP 404" in message and "\n" not in message


def test_500_is_unreachable(server: Server, tmp_path: Path) -> None:
    server.routes["/boom"] = Resource(b"", status=500)
    with pytest.raises(SourceUnreachableError, match=r"HTTP 500"):
        run(model.FetchStepUrl(url=server.url("/boom")), tmp_path)


def test_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as s:  # reserve a free port, then close it: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/data.csv"
    with pytest.raises(SourceUnreachableError, match=r"connection refused") as e:
        run(model.FetchStepUrl(url=url), tmp_path)
    assert url in str(e.value) and "\n" not in str(e.value)


def test_timeout(server: Server, tmp_path: Path) -> None:
    server.routes["/slow"] = Resource(b"x", delay=1.5)
    with pytest.raises(SourceUnreachableError, match=r"timed out after 0.3 s waiting for data"):
        run(
            model.FetchStepUrl(url=server.url("/slow")),
            tmp_path,
            http=HttpSettings(read_timeout=0.3, retries=0),
        )
    leftovers = list((tmp_path / "work").glob("*")) if (tmp_path / "work").exists() else []
    assert leftovers == []


def test_unsupported_scheme(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedSourceError, match=r"URL scheme 'ftp' is not supported"):
        run(model.FetchStepUrl(url="ftp://example.org/x.csv"), tmp_path)


def test_unsupported_template_expression(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"unsupported template"):
        expand_env_templates("${{ secrets.X }}", {}, where="here")
    assert expand_env_templates("a${{env.A}}b${{ env.B-2 }}", {"A": "1", "B-2": "2"}, where="x") == "a1b2"


def test_mqtt_is_not_supported(tmp_path: Path) -> None:
    step = model.FetchStepMqtt(host="localhost", port=1883, topics=())
    with pytest.raises(UnsupportedSourceError, match=r"Mqtt is not supported by odfproj"):
        run(step, tmp_path)


# -- file:// ----------------------------------------------------------------------------------


def _file(tmp_path: Path, content: bytes = b"a\n1\n") -> Path:
    path = tmp_path / "data" / "my file.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    os.utime(path, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    return path


def test_file_url_is_used_in_place_with_mtime(tmp_path: Path) -> None:
    path = _file(tmp_path)
    item = only(run(model.FetchStepUrl(url=path.as_uri()), tmp_path))
    assert item.path == path and not item.temporary
    assert item.source_state is not None
    assert item.source_state.kind == KIND_LAST_MODIFIED
    assert item.source_state.value == "2023-11-14T22:13:20.123Z"
    assert item.event_time == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert path.read_bytes() == b"a\n1\n"


def test_file_url_unchanged_mtime_is_up_to_date(tmp_path: Path) -> None:
    path = _file(tmp_path)
    step = model.FetchStepUrl(url=path.as_uri())
    state = only(run(step, tmp_path)).source_state
    assert run(step, tmp_path, prev=state).up_to_date
    os.utime(path, ns=(1_800_000_000_000_000_000, 1_800_000_000_000_000_000))
    assert len(run(step, tmp_path, prev=state).items) == 1


def test_file_url_missing(tmp_path: Path) -> None:
    url = (tmp_path / "nope.csv").as_uri()
    with pytest.raises(SourceNotFoundError, match=r"no such file") as e:
        run(model.FetchStepUrl(url=url), tmp_path)
    assert url in str(e.value)


def test_file_url_on_a_folder(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match=r"is not a file"):
        run(model.FetchStepUrl(url=tmp_path.as_uri()), tmp_path)
