"""The fetch phase of polling ingestion: get a root dataset's source files onto the local disk.

:func:`fetch` turns one ``FetchStep`` plus the ``SourceState`` recorded by the last ingest into a
:class:`FetchResult`: the items to ingest, in order. Each item is committed as its own ``AddData``
carrying ``item.source_state``, so an interrupted run resumes after the last committed item. An
empty result means "up to date": the coordinator then starts no engine and commits nothing.

Nothing here modifies a user's file: local files (``file://`` URLs, ``FilesGlob`` matches) are
returned in place with ``temporary=False``; downloads and container output go to new files in
``work_dir`` (``temporary=True``), which the coordinator deletes after the commit.

Source-state kinds (``SourceState.kind`` / ``value``)
    ``odf/etag``
        The ``ETag`` of an HTTP resource, verbatim (sent back as ``If-None-Match``). Also written by
        Container fetchers that report one. Read (not written) by ``FilesGlob`` as the last ingested
        *file name*, which is what the reference implementation records there.
    ``odf/last-modified``
        RFC 3339 UTC time (``format_rfc3339``): the ``Last-Modified`` of an HTTP resource (sent back as
        ``If-Modified-Since``) or the millisecond-truncated mtime of a ``file://`` source.
        A ``SourceState`` holds one kind, so when a server sends both validators the ETag is kept:
        RFC 9110 makes ``If-None-Match`` take precedence over ``If-Modified-Since`` anyway, and the
        event time comes from the current response's ``Last-Modified``, not from the state.
    ``odfproj/files-glob``
        Compact JSON ``{"path": "<file>", "eventTime": "<RFC 3339>"}``: the last file of a ``FilesGlob``
        that was ingested. ``path`` is relative to the project root with ``/`` separators (absolute
        when the file lies outside it); ``eventTime`` is present when the step derives one. On the
        next run only files ordered *after* it are returned: by ``path`` for ``ByName``, by
        ``(eventTime, path)`` for ``ByEventTime``. A file is therefore ingested once, and a file that
        appears later but sorts before the recorded one is never picked up.
    ``odfproj/fetched``
        RFC 3339 system time of the fetch: written only under ``cache: Forever`` for an HTTP resource
        with neither ``ETag`` nor ``Last-Modified``, so the next run knows it was fetched once.

Other notes
    ``${{ env.NAME }}`` in URLs, header values, container args, command and env values is replaced
    from ``environ`` (the reference implementation's templating; reference manifests use it for
    tokens). Messages show the URL as written in the manifest, so secrets never reach a log.
    Mqtt (and EthereumLogs, which ODF 0.35 does not define) are rejected as not supported.
"""

from __future__ import annotations

import contextlib
import email.utils
import glob
import json
import os
import re
import secrets
import shutil
import subprocess
import urllib.request
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from odfproj import __version__
from odfproj.errors import InvalidValueError, OdfprojError
from odfproj.ingest.errors import (
    EventTimeError,
    FetchError,
    IngestError,
    MissingParameterError,
    SourceNotFoundError,
    SourceStateError,
    UnsupportedSourceError,
    last_stderr_line,
    one_line,
    source_label,
)
from odfproj.ingest.event_time import resolve_event_time
from odfproj.odf import model
from odfproj.odf.timestamps import format_rfc3339, parse_rfc3339

if TYPE_CHECKING:  # imported by an HTTP fetch only: listing a FilesGlob (plan, a no-op run) needs no httpx
    from odfproj.ingest.http import HttpSettings
    from odfproj.storage.dataset import Dataset

__all__ = [
    "KIND_ETAG",
    "KIND_FETCHED",
    "KIND_FILES_GLOB",
    "KIND_LAST_MODIFIED",
    "FetchResult",
    "FetchedItem",
    "expand_env_templates",
    "fetch",
    "find_container_runtime",
    "glob_history",
    "ingested_glob_files",
    "nothing_new",
]

#: ``SourceState.sourceName`` of a dataset's one polling source (as the reference implementation).
POLLING_SOURCE_NAME = "default"

KIND_ETAG = "odf/etag"
KIND_LAST_MODIFIED = "odf/last-modified"
KIND_FILES_GLOB = "odfproj/files-glob"
KIND_FETCHED = "odfproj/fetched"

_CONTAINER_OUT = "/opt/odf/out"
_CONTAINER_BATCH_SIZE = "10000"


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedItem:
    """One file to ingest as one ``AddData``."""

    #: The local file to read: in ``work_dir`` when ``temporary``, else the user's own file.
    path: Path
    #: URL as written in the manifest, path relative to the project root, or ``container <image>``.
    display_name: str
    #: Event time of the source (Last-Modified, from the path, system time); ``None`` when unknown.
    event_time: datetime | None
    #: State to record in the ``AddData`` that commits this item; ``None`` records none.
    source_state: model.SourceState | None
    #: Whether ``path`` was created by the fetch (the coordinator may delete it after the commit).
    temporary: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResult:
    """The items of one fetch, in ingestion order; none at all means the source is up to date."""

    items: tuple[FetchedItem, ...] = ()
    #: A container reported more data than one batch: fetch again after committing these items.
    has_more: bool = False
    #: Things the user should know that are not errors (a FilesGlob file that will never be ingested).
    warnings: tuple[str, ...] = ()

    @property
    def up_to_date(self) -> bool:
        return not self.items


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    """The arguments of :func:`fetch` that every fetch kind needs, bundled to keep signatures short."""

    dataset: str
    source: str
    prev_state: model.SourceState | None
    project_root: Path
    work_dir: Path
    system_time: datetime
    environ: Mapping[str, str]
    #: ``None``: read from ``environ`` when an HTTP fetch needs them (other kinds never do).
    http: HttpSettings | None
    ingested: Collection[str] | None

    @property
    def label(self) -> str:
        return source_label(self.dataset, self.source)

    def state(self, kind: str, value: str) -> model.SourceState:
        return model.SourceState(source_name=self.source, kind=kind, value=value)

    def new_file(self, prefix: str) -> Path:
        return self.work_dir / f"{prefix}-{secrets.token_hex(6)}"


def fetch(
    step: model.FetchStep,
    *,
    dataset: str,
    source: str,
    prev_state: model.SourceState | None,
    project_root: Path,
    work_dir: Path,
    system_time: datetime,
    environ: Mapping[str, str],
    http: HttpSettings | None = None,
    ingested: Collection[str] | None = None,
) -> FetchResult:
    """Fetch what is new at the source since ``prev_state``.

    ``source`` becomes ``SourceState.source_name``; ``system_time`` is the run's time (for
    ``FromSystemTime``); ``environ`` supplies ``${{ env.X }}`` values, ``PATH``, proxies and
    the ``ODFPROJ_HTTP_*`` bounds of a download (``http``, when given, replaces those).
    ``ingested`` (see :func:`ingested_glob_files`) lets a ``FilesGlob`` warn about the files it will
    never ingest because they sort before the last ingested one.
    Raises an :class:`~odfproj.ingest.errors.IngestError` naming the dataset, source and URL/file.
    """
    ctx = _Context(
        dataset=dataset,
        source=source,
        prev_state=prev_state,
        project_root=Path(project_root).absolute(),
        work_dir=Path(work_dir),
        system_time=system_time,
        environ=environ,
        http=http,
        ingested=ingested,
    )
    if _fetched_for_good(step, prev_state):
        return FetchResult()
    match step:
        case model.FetchStepUrl():
            return _fetch_url(step, ctx)
        case model.FetchStepFilesGlob():
            return _fetch_files_glob(step, ctx)
        case model.FetchStepContainer():
            return _fetch_container(step, ctx)
        case model.FetchStepMqtt():
            raise UnsupportedSourceError(f"{ctx.label}: fetch kind Mqtt is not supported by odfproj")
    kind = type(step).__name__.removeprefix("FetchStep")
    raise UnsupportedSourceError(f"{ctx.label}: fetch kind {kind} is not supported by odfproj")


def _fetched_for_good(step: model.FetchStep, prev_state: model.SourceState | None) -> bool:
    """``cache: Forever`` and fetched once: "after source was processed once it will never be ingested again"."""
    return isinstance(getattr(step, "cache", None), model.SourceCachingForever) and prev_state is not None


def nothing_new(
    step: model.FetchStep,
    *,
    dataset: str,
    source: str,
    prev_state: model.SourceState | None,
    project_root: Path,
    environ: Mapping[str, str],
    ingested: Collection[str] | None = None,
) -> bool:
    """Whether :func:`fetch` would return nothing and say nothing, known without reading or downloading.

    True only when that is certain from what is on this machine: a ``FilesGlob`` whose listing holds no
    file after the last ingested one and no file it would warn about, a ``file://`` URL whose mtime is
    the recorded one, a ``cache: Forever`` source fetched once. Anything else is False, and the caller
    fetches: an HTTP resource (only its server knows), a container, a fetch that would fail or warn (so
    that the real fetch reports it). ``run`` asks this before it loads the ingest code for a root.
    """
    if _fetched_for_good(step, prev_state):
        return True
    result = _local_listing(step, dataset, source, prev_state, project_root, environ, ingested)
    return result is not None and not result.items and not result.warnings and not result.has_more


def pending_bytes(
    step: model.FetchStep,
    *,
    dataset: str,
    source: str,
    prev_state: model.SourceState | None,
    project_root: Path,
    environ: Mapping[str, str],
    ingested: Collection[str] | None = None,
) -> int:
    """The bytes of the files :func:`fetch` would hand to the read, where a listing of this machine's
    files tells (a ``FilesGlob``, a ``file://`` URL); 0 where it cannot (an HTTP resource, a container).

    An estimate of the work ahead, for choosing how to start the engine (``run``), never a promise.
    """
    if _fetched_for_good(step, prev_state):
        return 0
    result = _local_listing(step, dataset, source, prev_state, project_root, environ, ingested)
    if result is None:
        return 0
    total = 0
    for item in result.items:
        with contextlib.suppress(OSError):
            total += item.path.stat().st_size
    return total


def _local_listing(
    step: model.FetchStep,
    dataset: str,
    source: str,
    prev_state: model.SourceState | None,
    project_root: Path,
    environ: Mapping[str, str],
    ingested: Collection[str] | None,
) -> FetchResult | None:
    """What :func:`fetch` would return, when listing and stat'ing local files is enough to know it
    (a ``FilesGlob``, a ``file://`` URL); None where only the fetch itself tells, or it would fail."""
    if isinstance(step, model.FetchStepFilesGlob) and ingested is None and prev_state is not None:
        return None  # which files it would warn about is known only from the chain's ingested files
    try:
        if isinstance(step, model.FetchStepUrl):
            url = expand_env_templates(step.url, environ, where=source_label(dataset, source))
            if urlsplit(url).scheme.lower() != "file":
                return None  # only its server knows
        elif not isinstance(step, model.FetchStepFilesGlob):
            return None  # a container: only running it tells
        # A FilesGlob or file:// fetch only lists and stats files; it writes nothing to its work folder.
        return fetch(
            step,
            dataset=dataset,
            source=source,
            prev_state=prev_state,
            project_root=project_root,
            work_dir=Path(project_root),
            system_time=datetime.now(UTC),
            environ=environ,
            ingested=ingested,
        )
    except OdfprojError:
        return None


# ---------------------------------------------------------------------------------------------
# Templates


_TEMPLATE = re.compile(r"\$\{\{([^}]*)\}\}")
_ENV_EXPRESSION = re.compile(r"env\.([A-Za-z_][A-Za-z0-9_-]*)")


def expand_env_templates(text: str, environ: Mapping[str, str], *, where: str) -> str:
    """Replace each ``${{ env.NAME }}`` with ``environ[NAME]``; ``where`` starts any error message.

    Only ``env.`` expressions exist in the reference implementation; anything else is an error
    rather than being passed through, where it would fail later with a confusing message.
    """

    def replace(m: re.Match[str]) -> str:
        expression = m.group(1).strip()
        env = _ENV_EXPRESSION.fullmatch(expression)
        if env is None:
            raise IngestError(
                f"{where}: unsupported template {m.group(0)!r}; only ${{{{ env.NAME }}}} is supported"
            )
        name = env.group(1)
        if name not in environ:
            raise MissingParameterError(
                f"{where}: environment variable {name} is not set (used by ${{{{ env.{name} }}}})"
            )
        return environ[name]

    return _TEMPLATE.sub(replace, text)


# ---------------------------------------------------------------------------------------------
# Url


def _fetch_url(step: model.FetchStepUrl, ctx: _Context) -> FetchResult:
    display = step.url
    where = f"{ctx.label}: {display}"
    url = expand_env_templates(step.url, ctx.environ, where=where)
    headers = [
        (h.name, expand_env_templates(h.value, ctx.environ, where=f"{where}: header {h.name}"))
        for h in step.headers or ()
    ]
    scheme = urlsplit(url).scheme.lower()
    event_time_source = step.event_time or model.EventTimeSourceFromMetadata()
    if scheme == "file":
        return _fetch_file_url(url, display, event_time_source, ctx)
    if scheme in ("http", "https"):
        return _fetch_http(url, display, headers, event_time_source, step.cache, ctx)
    raise UnsupportedSourceError(
        f"{where}: URL scheme {scheme or '(none)'!r} is not supported by odfproj (use http, https or file)"
    )


def _fetch_file_url(
    url: str, display: str, event_time_source: model.EventTimeSource, ctx: _Context
) -> FetchResult:
    """A local file is ingested in place; its mtime plays the role of ``Last-Modified``."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise UnsupportedSourceError(f"{ctx.label}: {display}: file URLs on another host are not supported")
    path = Path(urllib.request.url2pathname(parts.path))
    if not path.is_absolute():
        path = ctx.project_root / path
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise SourceNotFoundError(f"{ctx.label}: cannot fetch {display}: no such file {path}") from None
    except OSError as e:
        raise FetchError(f"{ctx.label}: cannot fetch {display}: {one_line(str(e))}") from None
    if not path.is_file():
        raise FetchError(f"{ctx.label}: cannot fetch {display}: {path} is not a file")
    mtime = _mtime_of(stat)
    state = ctx.state(KIND_LAST_MODIFIED, format_rfc3339(mtime))
    if _same_state(ctx.prev_state, state):
        return FetchResult()
    return _one_item(path, display, state, event_time_source, ctx, last_modified=mtime, temporary=False)


def _fetch_http(
    url: str,
    display: str,
    headers: list[tuple[str, str]],
    event_time_source: model.EventTimeSource,
    cache: model.SourceCaching | None,
    ctx: _Context,
) -> FetchResult:
    from odfproj.ingest.http import HttpSettings, download

    where = f"{ctx.label}: cannot fetch {display}"
    settings = ctx.http
    if settings is None:
        try:
            settings = HttpSettings.from_environ(ctx.environ)
        except IngestError as e:
            raise IngestError(f"{where}: {e}") from None
    target = ctx.new_file("download")
    response = download(
        url,
        _request_headers(headers, ctx.prev_state),
        target,
        settings=settings,
        proxy=_proxies(url, ctx.environ).get(urlsplit(url).scheme.lower()),
        where=where,
    )
    if response.not_modified:
        return FetchResult()
    etag = response.etag
    last_modified = _http_date(response.last_modified)
    if etag:
        state: model.SourceState | None = ctx.state(KIND_ETAG, etag)
    elif last_modified is not None:
        state = ctx.state(KIND_LAST_MODIFIED, format_rfc3339(last_modified))
    elif isinstance(cache, model.SourceCachingForever):
        state = ctx.state(KIND_FETCHED, format_rfc3339(ctx.system_time))
    else:
        state = None
    if state is not None and _same_state(ctx.prev_state, state):
        target.unlink()  # the server ignored the conditional request, but the resource is unchanged
        return FetchResult()
    return _one_item(
        target, display, state, event_time_source, ctx, last_modified=last_modified, temporary=True
    )


def _one_item(
    path: Path,
    display: str,
    state: model.SourceState | None,
    event_time_source: model.EventTimeSource,
    ctx: _Context,
    *,
    last_modified: datetime | None,
    temporary: bool,
) -> FetchResult:
    """A fetch of one resource: the file, its source state and its event time."""
    event_time = _event_time(event_time_source, ctx, path=display, last_modified=last_modified)
    item = FetchedItem(
        path=path, display_name=display, event_time=event_time, source_state=state, temporary=temporary
    )
    return FetchResult(items=(item,))


def _request_headers(
    headers: list[tuple[str, str]], prev_state: model.SourceState | None
) -> list[tuple[str, str]]:
    """The step's headers, a User-Agent unless the step sets one, and the conditional header of the state."""
    out = list(headers)
    if not any(name.lower() == "user-agent" for name, _ in out):
        out.append(("User-Agent", f"odfproj/{__version__}"))
    if prev_state is not None and prev_state.kind == KIND_ETAG:
        out.append(("If-None-Match", prev_state.value))
    elif prev_state is not None and prev_state.kind == KIND_LAST_MODIFIED:
        since = _state_time(prev_state)
        if since is not None:
            out.append(("If-Modified-Since", email.utils.format_datetime(since, usegmt=True)))
    return out


def _http_date(value: str | None) -> datetime | None:
    """Parse an HTTP date; a malformed header is ignored rather than failing the ingest."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _proxies(url: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``http_proxy`` / ``https_proxy`` / ``no_proxy`` from ``environ`` (not from ``os.environ``)."""
    lowered = {k.lower(): v for k, v in environ.items() if k.lower().endswith("_proxy") and v}
    host = (urlsplit(url).hostname or "").lower()
    for entry in lowered.get("no_proxy", "").split(","):
        entry = entry.strip().lower().lstrip(".")
        if entry == "*" or (entry and (host == entry or host.endswith("." + entry))):
            return {}
    return {
        scheme: lowered[f"{scheme}_proxy"] for scheme in ("http", "https") if f"{scheme}_proxy" in lowered
    }


# ---------------------------------------------------------------------------------------------
# FilesGlob


@dataclass(frozen=True, slots=True)
class _GlobFile:
    path: Path
    name: str  # relative to the project root, "/" separators
    event_time: datetime | None


def _fetch_files_glob(step: model.FetchStepFilesGlob, ctx: _Context) -> FetchResult:
    order = step.order if step.order is not None else model.SourceOrdering.ByName
    if order == model.SourceOrdering.ByEventTime and not isinstance(
        step.event_time, model.EventTimeSourceFromPath | model.EventTimeSourceFromMetadata
    ):
        raise FetchError(
            f"{ctx.label}: FilesGlob {step.path!r} with order ByEventTime needs eventTime FromPath or FromMetadata"
        )
    paths = _glob(step.path, ctx.project_root)
    if not paths:
        if ctx.prev_state is None:
            raise SourceNotFoundError(
                f"{ctx.label}: no files match {step.path!r} (relative to {ctx.project_root})"
            )
        return FetchResult()
    is_new = _glob_resume_filter(ctx.prev_state, order, ctx.label)

    def make(path: Path) -> _GlobFile:
        name = _display_path(path, ctx.project_root)
        last_modified = (
            _mtime(path) if isinstance(step.event_time, model.EventTimeSourceFromMetadata) else None
        )
        event_time = _event_time(step.event_time, ctx, path=name, last_modified=last_modified)
        return _GlobFile(path, name, event_time)

    if order == model.SourceOrdering.ByEventTime:
        every = sorted((make(p) for p in paths), key=lambda f: (f.event_time, f.name))
        files = [f for f in every if is_new(f)]
        passed = [f.name for f in every if not is_new(f)]
    else:
        named = sorted((_display_path(p, ctx.project_root), p) for p in paths)
        files = [make(p) for name, p in named if is_new(_GlobFile(p, name, None))]
        passed = [name for name, p in named if not is_new(_GlobFile(p, name, None))]
    items = tuple(
        FetchedItem(
            path=f.path,
            display_name=f.name,
            event_time=f.event_time,
            source_state=ctx.state(KIND_FILES_GLOB, _glob_state_value(f)),
            temporary=False,
        )
        for f in files
    )
    return FetchResult(items=items, warnings=_never_ingested(passed, step, order, ctx))


def _never_ingested(
    passed: list[str], step: model.FetchStepFilesGlob, order: model.SourceOrdering, ctx: _Context
) -> tuple[str, ...]:
    """A warning naming the files the resume rule skips although no block records them as ingested."""
    if ctx.ingested is None or ctx.prev_state is None:
        return ()
    missed = [n for n in passed if n not in ctx.ingested and n.rsplit("/", 1)[-1] not in ctx.ingested]
    if not missed:
        return ()
    last = _last_ingested_name(ctx.prev_state)
    rule = "by name" if order == model.SourceOrdering.ByName else "by event time, then name"
    shown = ", ".join(missed[:5]) + (f" and {len(missed) - 5} more" if len(missed) > 5 else "")
    return (
        f"{ctx.label}: {len(missed)} file(s) matching {step.path!r} will never be ingested: {shown}. "
        f"FilesGlob ingests only files that sort after the last ingested one ({last}, order {rule}); "
        "rename them to sort after it to ingest them",
    )


def _last_ingested_name(state: model.SourceState) -> str:
    if state.kind == KIND_FILES_GLOB:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            return str(json.loads(state.value)["path"])
    return state.value


def ingested_glob_files(source_states: Iterable[model.SourceState]) -> frozenset[str]:
    """The file names that ``FilesGlob`` states of a chain's ``AddData`` blocks record as ingested.

    Both our ``odfproj/files-glob`` path and the reference implementation's ``odf/etag`` file name.
    """
    names: set[str] = set()
    for state in source_states:
        if state.kind == KIND_FILES_GLOB:
            names.add(_last_ingested_name(state))
        elif state.kind == KIND_ETAG:
            names.add(state.value)
    return frozenset(names)


def glob_history(dataset: Dataset) -> frozenset[str]:
    """The files the polling source's ``AddData`` blocks record as ingested (metadata only).

    Here rather than beside the ingest itself: plan reads it for every ingested ``FilesGlob`` root,
    and the ingest pipeline's module brings the Spark engine's with it.
    """
    return ingested_glob_files(
        block.event.new_source_state
        for _, block in dataset.iter_blocks()
        if isinstance(block.event, model.AddData)
        and block.event.new_source_state is not None
        and block.event.new_source_state.source_name == POLLING_SOURCE_NAME
    )


def _glob(pattern: str, project_root: Path) -> list[Path]:
    """Files (not folders) matching ``pattern``; ``**`` spans folders, hidden files need a ``.``."""
    if os.path.isabs(pattern):
        matches = [Path(m) for m in glob.glob(pattern, recursive=True)]
    else:
        matches = [project_root / m for m in glob.glob(pattern, root_dir=project_root, recursive=True)]
    return [m for m in matches if m.is_file()]


def _display_path(path: Path, project_root: Path) -> str:
    try:
        return path.relative_to(project_root).as_posix()
    except ValueError:
        return path.as_posix()


def _glob_state_value(f: _GlobFile) -> str:
    value: dict[str, str] = {"path": f.name}
    if f.event_time is not None:
        value["eventTime"] = format_rfc3339(f.event_time)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _glob_resume_filter(
    prev: model.SourceState | None, order: model.SourceOrdering, label: str
) -> Callable[[_GlobFile], bool]:
    """Which files come after the last ingested one, according to the recorded state."""
    if prev is None:
        return lambda f: True
    if prev.kind == KIND_ETAG:  # the reference implementation records the last file *name* here
        return lambda f: f.name.rsplit("/", 1)[-1] > prev.value
    if prev.kind != KIND_FILES_GLOB:
        return lambda f: True  # recorded by another kind of fetch step: none of these files was ingested
    try:
        recorded = json.loads(prev.value)
        last_path = recorded["path"]
        last_time = parse_rfc3339(recorded["eventTime"]) if "eventTime" in recorded else None
        if not isinstance(last_path, str):
            raise TypeError(last_path)
    except (ValueError, KeyError, TypeError, InvalidValueError):
        raise SourceStateError(
            f"{label}: cannot read the recorded {KIND_FILES_GLOB} state {one_line(prev.value, 100)!r}"
        ) from None
    if order == model.SourceOrdering.ByEventTime and last_time is not None:
        return lambda f: f.event_time is not None and (f.event_time, f.name) > (last_time, last_path)
    return lambda f: f.name > last_path


# ---------------------------------------------------------------------------------------------
# Container


def find_container_runtime(environ: Mapping[str, str]) -> str | None:
    """``podman`` if it is on ``PATH``, else ``docker``, else ``None``."""
    search_path = environ.get("PATH", os.defpath)
    for tool in ("podman", "docker"):
        found = shutil.which(tool, path=search_path)
        if found:
            return found
    return None


def _fetch_container(step: model.FetchStepContainer, ctx: _Context) -> FetchResult:
    """Run the image; its stdout is the data (the reference implementation's container protocol).

    The container sees the previous state in ``ODF_ETAG`` / ``ODF_LAST_MODIFIED`` and may report a new
    one by writing the files named in ``ODF_NEW_ETAG_PATH`` / ``ODF_NEW_LAST_MODIFIED_PATH``, and
    "more data remains" by creating ``ODF_NEW_HAS_MORE_DATA_PATH``. Values are passed by name
    (``-e NAME``) so secrets never appear on a command line.
    """
    display = f"container {step.image}"
    where = f"{ctx.label}: {display}"
    runtime = find_container_runtime(ctx.environ)
    if runtime is None:
        raise FetchError(
            f"{where}: neither podman nor docker is on PATH; install one to run container fetch steps"
        )
    env = _container_env(step, ctx, where)
    out_dir = ctx.new_file("container")
    out_dir.mkdir(parents=True)
    argv = [runtime, "run", "--rm", "-v", f"{out_dir}:{_CONTAINER_OUT}"]
    for name in env:
        argv += ["-e", name]
    command = [expand_env_templates(c, ctx.environ, where=where) for c in step.command or ()]
    if command:
        argv += ["--entrypoint", command[0]]
    argv.append(step.image)
    argv += command[1:]
    argv += [expand_env_templates(a, ctx.environ, where=where) for a in step.args or ()]

    target = ctx.new_file("container-output")
    stderr_path = out_dir / "stderr.txt"
    process_env = {**ctx.environ, **env}
    try:
        with open(target, "xb") as stdout, open(stderr_path, "wb") as stderr:
            code = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=process_env, check=False
            ).returncode
    except OSError as e:
        target.unlink(missing_ok=True)
        raise FetchError(f"{where}: cannot run {Path(runtime).name}: {one_line(str(e))}") from None
    if code != 0:
        target.unlink(missing_ok=True)
        raise FetchError(f"{where} exited with code {code}: {last_stderr_line(stderr_path)}")

    state = _container_state(out_dir, ctx, where)
    has_more = (out_dir / "new-has-more-data").exists()
    if target.stat().st_size == 0 and state == ctx.prev_state and not has_more:
        target.unlink()
        return FetchResult()
    item = FetchedItem(path=target, display_name=display, event_time=None, source_state=state, temporary=True)
    return FetchResult(items=(item,), has_more=has_more)


def _container_env(step: model.FetchStepContainer, ctx: _Context, where: str) -> dict[str, str]:
    prev = ctx.prev_state
    env = {
        "ODF_ETAG": prev.value if prev is not None and prev.kind == KIND_ETAG else "",
        "ODF_LAST_MODIFIED": prev.value if prev is not None and prev.kind == KIND_LAST_MODIFIED else "",
        "ODF_NEW_ETAG_PATH": f"{_CONTAINER_OUT}/new-etag",
        "ODF_NEW_LAST_MODIFIED_PATH": f"{_CONTAINER_OUT}/new-last-modified",
        "ODF_NEW_HAS_MORE_DATA_PATH": f"{_CONTAINER_OUT}/new-has-more-data",
        "ODF_BATCH_SIZE": _CONTAINER_BATCH_SIZE,
    }
    for var in step.env or ():
        if var.value is not None:
            env[var.name] = expand_env_templates(var.value, ctx.environ, where=f"{where}: env {var.name}")
        elif var.name in ctx.environ:
            env[var.name] = ctx.environ[var.name]
        else:
            raise MissingParameterError(
                f"{where}: environment variable {var.name} is not set (the step passes it through)"
            )
    return env


def _container_state(out_dir: Path, ctx: _Context, where: str) -> model.SourceState | None:
    etag_file = out_dir / "new-etag"
    modified_file = out_dir / "new-last-modified"
    if etag_file.exists():
        return ctx.state(KIND_ETAG, etag_file.read_text(encoding="utf-8").strip())
    if modified_file.exists():
        text = modified_file.read_text(encoding="utf-8").strip()
        try:
            return ctx.state(KIND_LAST_MODIFIED, format_rfc3339(parse_rfc3339(text)))
        except InvalidValueError:
            raise FetchError(
                f"{where} reported an invalid last-modified time {one_line(text, 60)!r}"
            ) from None
    return None


# ---------------------------------------------------------------------------------------------
# Shared helpers


def _event_time(
    source: model.EventTimeSource | None, ctx: _Context, *, path: str, last_modified: datetime | None
) -> datetime | None:
    try:
        return resolve_event_time(source, path=path, last_modified=last_modified, system_time=ctx.system_time)
    except EventTimeError as e:
        raise EventTimeError(f"{ctx.label}: {path}: {e}") from None


def _mtime(path: Path) -> datetime:
    return _mtime_of(path.stat())


def _mtime_of(stat: os.stat_result) -> datetime:
    """Millisecond precision, like the reference implementation: RFC 3339 state values stay short."""
    millis = stat.st_mtime_ns // 1_000_000
    return datetime.fromtimestamp(millis // 1000, tz=UTC).replace(microsecond=millis % 1000 * 1000)


def _state_time(state: model.SourceState) -> datetime | None:
    try:
        return parse_rfc3339(state.value)
    except InvalidValueError:
        return None


def _same_state(prev: model.SourceState | None, new: model.SourceState) -> bool:
    """Whether the recorded state says the source is unchanged (times compare as instants)."""
    if prev is None or prev.kind != new.kind:
        return False
    if new.kind == KIND_LAST_MODIFIED:
        return _state_time(prev) == _state_time(new) is not None
    return prev.value == new.value
