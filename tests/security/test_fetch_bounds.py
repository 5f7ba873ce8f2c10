"""A Url source cannot hold a run: timeouts, an overall deadline, bounded retries (issue 13 point 5).

Real servers on 127.0.0.1 (tests/security/fetch_helpers.py) that hang, trickle, fail and refuse.
Deadlines are small configured values; the tests assert the error, never the time it took.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odfproj.ingest.errors import FetchError, IngestError, SourceNotFoundError, SourceUnreachableError
from odfproj.ingest.fetch import fetch
from odfproj.ingest.http import ENV_DEADLINE, ENV_RETRIES, HttpSettings, download
from odfproj.odf import model
from tests.cli_inprocess import cli_in
from tests.security.fetch_helpers import (
    SYSTEM_TIME,
    fetch_url,
    hanging,
    no_leftovers,
    raw_server,
    refused_port,
    scripted_server,
    trickling,
)


def _one_line_naming(message: str, url: str) -> None:
    assert "'bounded.ds'" in message and url in message and "\n" not in message


def test_hanging_server_is_stopped_by_the_deadline(tmp_path: Path) -> None:
    with (
        raw_server(hanging) as server,
        pytest.raises(SourceUnreachableError, match=r"gave up after the 2 s deadline") as e,
    ):
        fetch_url(server.url(), tmp_path, HttpSettings(deadline=2, retries=3))
    _one_line_naming(str(e.value), server.url())
    assert no_leftovers(tmp_path)


def test_read_timeout_is_retried_a_bounded_number_of_times(tmp_path: Path) -> None:
    settings = HttpSettings(read_timeout=0.3, retries=2, backoff=0.01)
    with raw_server(hanging) as server:
        with pytest.raises(SourceUnreachableError, match=r"timed out after 0.3 s waiting for data") as e:
            fetch_url(server.url(), tmp_path, settings)
        assert server.connections == 3
    assert "gave up after 3 attempts" in str(e.value)


def test_trickling_server_is_stopped_by_the_deadline(tmp_path: Path) -> None:
    """One byte at a time never trips a read timeout; the deadline stops it anyway."""
    with (
        raw_server(trickling(0.1)) as server,
        pytest.raises(SourceUnreachableError, match=r"deadline") as e,
    ):
        fetch_url(server.url(), tmp_path, HttpSettings(read_timeout=30, deadline=1, retries=3))
    _one_line_naming(str(e.value), server.url())
    assert no_leftovers(tmp_path)  # the partial download is gone


def test_503_twice_then_200_is_retried_with_growing_waits(tmp_path: Path) -> None:
    settings = HttpSettings(retries=3, backoff=0.05)
    with scripted_server([503, 503, 200]) as server:
        result = fetch_url(server.url(), tmp_path, settings)
        assert server.statuses == [503, 503, 200]
    [item] = result.items
    assert item.path.read_bytes() == b"a\n1\n"
    with scripted_server([503, 503, 200]) as server:
        response = download(server.url(), [], tmp_path / "d", settings=settings, proxy=None, where="w")
    assert response.waits == (0.05, 0.1)  # exponential backoff: each wait doubles


def test_retries_are_bounded(tmp_path: Path) -> None:
    with scripted_server([503]) as server:
        with pytest.raises(SourceUnreachableError, match=r"HTTP 503 .*gave up after 3 attempts"):
            fetch_url(server.url(), tmp_path, HttpSettings(retries=2, backoff=0.01))
        assert server.statuses == [503, 503, 503]


def test_retry_after_is_honoured(tmp_path: Path) -> None:
    with scripted_server([503, 200], retry_after="1") as server:
        response = download(
            server.url(), [], tmp_path / "d", settings=HttpSettings(backoff=0.01), proxy=None, where="w"
        )
    assert response.waits == (1.0,)


def test_no_retry_that_would_pass_the_deadline(tmp_path: Path) -> None:
    with scripted_server([503]) as server:
        with pytest.raises(
            SourceUnreachableError, match=r"no time is left for another within the 1 s deadline"
        ):
            fetch_url(server.url(), tmp_path, HttpSettings(retries=5, backoff=5, deadline=1))
        assert server.statuses == [503]


@pytest.mark.parametrize(("status", "error"), [(404, SourceNotFoundError), (403, FetchError)])
def test_4xx_is_not_retried(tmp_path: Path, status: int, error: type[Exception]) -> None:
    with scripted_server([status]) as server:
        with pytest.raises(error, match=rf"HTTP {status}") as e:
            fetch_url(server.url(), tmp_path, HttpSettings(retries=3, backoff=0.01))
        assert server.statuses == [status]
    assert not isinstance(e.value, SourceUnreachableError)
    _one_line_naming(str(e.value), server.url())


def test_refused_connection_is_retried_then_named(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{refused_port()}/data.csv"
    with pytest.raises(SourceUnreachableError, match=r"connection refused \(gave up after 3 attempts\)") as e:
        fetch_url(url, tmp_path, HttpSettings(retries=2, backoff=0.01))
    _one_line_naming(str(e.value), url)


def test_bounds_come_from_the_environment(tmp_path: Path) -> None:
    environ = {ENV_DEADLINE: "1", ENV_RETRIES: "0"}
    assert HttpSettings.from_environ(environ) == HttpSettings(deadline=1, retries=0)
    with (
        raw_server(hanging) as server,
        pytest.raises(SourceUnreachableError, match=r"1 s deadline \(ODFPROJ_HTTP_DEADLINE\)"),
    ):
        fetch_url(server.url(), tmp_path, None, environ)


@pytest.mark.parametrize(
    ("name", "value"),
    [(ENV_DEADLINE, "soon"), (ENV_DEADLINE, "0"), (ENV_DEADLINE, "inf"), (ENV_RETRIES, "-1")],
)
def test_bad_bound_is_a_one_line_error_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(IngestError, match=rf"^{name}='{value}' is not a "):
        HttpSettings.from_environ({name: value})


@pytest.mark.spark
def test_a_run_is_not_held_by_a_trickling_server(
    spark, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """End to end: `odfproj run` with ODFPROJ_HTTP_DEADLINE set reports the source and finishes (exit 1).

    In-process (tests/cli_inprocess.py): the bounds are read from the run's environment, no new JVM needed.
    """
    project = tmp_path / "proj"
    (project / "datasets").mkdir(parents=True)
    (project / "odfproj.yaml").write_text("name: bounded\nmanifests:\n  - datasets/*.yaml\nworkspace: .odf\n")
    with raw_server(trickling(0.2)) as server:
        (project / "datasets" / "web.yaml").write_text(
            "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: web\n  kind: Root\n  metadata:\n"
            "    - kind: SetPollingSource\n"
            f"      fetch:\n        kind: Url\n        url: {server.url()}\n"
            "      read:\n        kind: Csv\n        header: true\n        schema:\n          - a BIGINT\n"
            "      merge:\n        kind: Append\n"
        )
        for name in [k for k in os.environ if k.startswith("ODFPROJ_")]:
            monkeypatch.delenv(name)
        for name, value in {
            "ODFPROJ_HTTP_DEADLINE": "2",
            "ODFPROJ_HTTP_RETRIES": "0",
            "COLUMNS": "300",
        }.items():
            monkeypatch.setenv(name, value)
        code, output = cli_in(spark, monkeypatch, lambda: project)("run")
    assert code == 1, output
    assert "gave up after the 2 s deadline" in output and "Traceback" not in output


def test_a_bad_bound_fails_only_http_sources_naming_the_source(tmp_path: Path) -> None:
    environ = {ENV_DEADLINE: "soon"}
    with pytest.raises(
        IngestError,
        match=r"^dataset 'bounded.ds', source 'default': cannot fetch .*ODFPROJ_HTTP_DEADLINE='soon'",
    ):
        fetch_url(f"http://127.0.0.1:{refused_port()}/x.csv", tmp_path, None, environ)
    (tmp_path / "in.csv").write_text("a\n1\n")
    result = fetch(
        model.FetchStepFilesGlob(path="*.csv"),
        dataset="bounded.ds",
        source="default",
        prev_state=None,
        project_root=tmp_path,
        work_dir=tmp_path / "work",
        system_time=SYSTEM_TIME,
        environ=environ,
    )
    assert [i.display_name for i in result.items] == ["in.csv"]  # a FilesGlob does not care
