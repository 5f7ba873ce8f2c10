"""The data steps of a plan: what ``run`` will ingest and transform, judged without fetching anything.

A root with a polling source becomes an :class:`Ingest`; for a ``FilesGlob`` source the plan lists the
files it will read (inside the project folder only, judged by :mod:`odfproj.project.boundary` after
symlinks are resolved) and warns about the files it will never read. The choice of files is the one
``run`` makes: both call :func:`odfproj.ingest.fetch.fetch`, which for ``FilesGlob`` only lists and
orders local files (no copy, no network, no process). URL and container sources are described, never
contacted or started. A derivative becomes a :class:`Transform` with its inputs' offsets from the chains.
"""

from __future__ import annotations

import glob
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

from odfproj.errors import OdfprojError
from odfproj.odf import model
from odfproj.plan.diff import ChainView, fold
from odfproj.plan.model import DataStep, Ingest, LastRun, Transform, TransformInput
from odfproj.project.boundary import path_refusal
from odfproj.storage.update_record import UpdateRecord

if TYPE_CHECKING:  # pulls in sqlglot; planning an unchanged project never needs it
    from odfproj.transform.modes import QueryMode

#: A FilesGlob fetch lists the user's own files and never writes to its work folder: none is made.
_NO_WORK_DIR = Path(tempfile.gettempdir()) / "odfproj-plan-never-written"


def data_step(
    name: str,
    manifest: str | None,
    snapshot: model.DatasetSnapshot,
    views: Mapping[str, ChainView],
    project_root: Path | None,
    mode: QueryMode | None = None,
    last_update: UpdateRecord | None = None,
) -> DataStep | None:
    """The data step ``run`` takes for one dataset once its definition is applied (None: no data work).

    ``project_root`` None lists no files (a plan made without a project folder, e.g. in tests).
    ``mode`` is a derivative's execution mode when this plan checked its query (None: not known
    without the engine; ``run`` decides it from the query it analyses). ``last_update`` is the
    record of its last update when the plan keeps its query: the mode that run found, and its hint.
    """
    definition = fold(snapshot.metadata)
    source = definition.get("SetPollingSource")
    if isinstance(source, model.SetPollingSource):
        return _ingest(name, manifest, source.fetch, views.get(name.lower()), project_root)
    transform = definition.get("SetTransform")
    if isinstance(transform, model.SetTransform):
        last_run = None
        if last_update is not None and last_update.last_mode:
            last_run = LastRun(last_update.last_mode, last_update.path, last_update.why_full)
        hint = mode.hint if mode is not None else (last_update.hint if last_update is not None else None)
        return Transform(
            name,
            manifest,
            _inputs(name, transform, views),
            str(mode) if mode is not None else None,
            last_run,
            hint or None,
        )
    return None


def _inputs(
    name: str, transform: model.SetTransform, views: Mapping[str, ChainView]
) -> tuple[TransformInput, ...]:
    own = views.get(name.lower())
    consumed = dict(own.input_offsets) if own is not None else {}
    inputs = []
    for inp in transform.inputs:
        ref = inp.dataset_ref
        view = views.get(ref.lower()) or next((v for v in views.values() if v.dataset_id == ref), None)
        if view is None:
            inputs.append(TransformInput(ref, None, None, None))
        else:
            inputs.append(
                TransformInput(ref, view.dataset_id, view.last_offset, consumed.get(view.dataset_id))
            )
    return tuple(inputs)


def _ingest(
    name: str,
    manifest: str | None,
    step: model.FetchStep,
    view: ChainView | None,
    project_root: Path | None,
) -> Ingest:
    kind = type(step).__name__.removeprefix("FetchStep")
    if isinstance(step, model.FetchStepUrl):
        return Ingest(name, manifest, kind, step.url)
    if isinstance(step, model.FetchStepContainer):
        return Ingest(name, manifest, kind, step.image, notes=("the container is started by run only",))
    if not isinstance(step, model.FetchStepFilesGlob):
        return Ingest(name, manifest, kind, "")
    if project_root is None:
        return Ingest(name, manifest, kind, step.path)
    return _files_glob(name, manifest, step, view, project_root.resolve())


def _files_glob(
    name: str, manifest: str | None, step: model.FetchStepFilesGlob, view: ChainView | None, root: Path
) -> Ingest:
    """The files the glob will read and the ones it will never read, as ``run`` would choose them."""
    pattern = step.path
    outside = (
        PurePosixPath(pattern).is_absolute()
        or PureWindowsPath(pattern).is_absolute()
        or pattern.startswith("~")
        or ".." in PurePosixPath(pattern.replace("\\", "/")).parts
    )
    if outside:
        note = (
            "not listed: the pattern reaches outside the project folder, and plan reads only files inside it"
        )
        return Ingest(name, manifest, "FilesGlob", pattern, notes=(note,))
    matches = [root / m for m in glob.glob(pattern, root_dir=root, recursive=True)]
    refused = sorted(
        f"{m.relative_to(root).as_posix()} {why}"
        for m in matches
        if (why := path_refusal(m, root)) is not None
    )
    if refused:
        return Ingest(name, manifest, "FilesGlob", pattern, notes=tuple(refused))
    # Imported here: only a plan with a FilesGlob root needs the ingest package.
    from odfproj.ingest.fetch import POLLING_SOURCE_NAME, fetch

    try:
        chosen = fetch(
            step,
            dataset=name,
            source=POLLING_SOURCE_NAME,
            prev_state=view.polling_state if view is not None else None,
            project_root=root,
            work_dir=_NO_WORK_DIR,
            system_time=datetime.now(UTC),
            environ={},
            ingested=view.ingested_files if view is not None else None,
        )
    except OdfprojError as e:  # e.g. no file matches yet: run will say the same
        return Ingest(name, manifest, "FilesGlob", pattern, notes=(str(e),))
    files = tuple(item.display_name for item in chosen.items)
    notes = () if files else ("no new files: up to date",)
    return Ingest(name, manifest, "FilesGlob", pattern, files=files, notes=notes, warnings=chosen.warnings)
