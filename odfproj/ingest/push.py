"""Push ingestion: files handed to odfproj (``odfproj ingest DATASET FILE...``) into a root dataset.

The data goes through the push source's declared read, preprocess and merge steps (spec: Push
Source), exactly like a polled file after its fetch: :func:`odfproj.ingest.pipeline.commit_batch`
does the event time, merge, offsets and the commit. All files of one call are read as one batch and
committed as one ``AddData`` (a push is one transaction); they must share the source's format.

The source is the one named by ``source_name``, or the dataset's only enabled ``AddPushSource``.
Event time comes from the data's event-time column when it has one, else the system time of the
ingest. A push records no source state (there is nothing to resume), so the ``AddData`` carries the
source's previous state, if any.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from odfproj.engine.spark import SparkEngine
from odfproj.ingest.errors import IngestError, SourceNotFoundError, source_label
from odfproj.ingest.pipeline import (
    CommittedItem,
    IngestResult,
    commit_batch,
    errors_named,
    materialize_read,
    origin_column,
    preprocess_batch,
    record_origin,
    small_ingest,
)
from odfproj.ingest.read import read_files
from odfproj.odf import model
from odfproj.storage.dataset import Dataset

__all__ = ["choose_push_source", "ingest_push"]


def choose_push_source(dataset: Dataset, source_name: str | None) -> model.AddPushSource:
    """The push source ``source_name``, or the only one; a clear error otherwise."""
    sources = dataset.projection().push_sources
    if source_name is not None:
        source = sources.get(source_name)
        if source is None:
            known = ", ".join(sorted(sources)) or "none"
            raise IngestError(
                f"{source_label(dataset.name, source_name)}: no such push source (enabled: {known})"
            )
        return source
    if not sources:
        raise IngestError(f"dataset {dataset.name!r} has no push source (AddPushSource) to ingest into")
    if len(sources) > 1:
        raise IngestError(
            f"dataset {dataset.name!r} has {len(sources)} push sources ({', '.join(sorted(sources))}); "
            "choose one with --source NAME"
        )
    return next(iter(sources.values()))


def ingest_push(
    dataset: Dataset,
    engine: SparkEngine,
    files: Sequence[Path],
    *,
    source_name: str | None = None,
    display_names: Sequence[str] | None = None,
    system_time: datetime | None = None,
    work_dir: Path | None = None,
) -> IngestResult:
    """Read ``files`` with the push source's read step and commit them as one ``AddData``.

    ``display_names`` (one per file, e.g. ``<stdin>``) name the files in messages.
    """
    source = choose_push_source(dataset, source_name)
    label = source_label(dataset.name, source.source_name)
    names = list(display_names) if display_names is not None else [str(f) for f in files]
    if not files:
        raise IngestError(f"{label}: no input files given")
    for path, name in zip(files, names, strict=True):
        if not Path(path).is_file():
            raise SourceNotFoundError(f"{label}: {name}: no such file")
    display = names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} more)"
    where = f"{label}: {display}"
    own_work = work_dir is None
    work = Path(tempfile.mkdtemp(prefix="odfproj-push-")) if work_dir is None else Path(work_dir)
    try:
        paths = {str(f): n for f, n in zip(files, names, strict=True)}
        with engine.small_work(small_ingest(dataset, [Path(f) for f in files])):
            with errors_named(where, paths):
                batch = read_files(
                    engine.session,
                    source.read,
                    list(files),
                    materialize=materialize_read(source.merge),
                    file_column=origin_column(source, list(files)),
                )
                batch = preprocess_batch(engine, batch, source.preprocess, where)
            done: CommittedItem | None = commit_batch(
                dataset,
                engine,
                batch,
                merge_strategy=source.merge,
                display_name=display,
                source=source.source_name,
                event_time=None,
                source_state=None,
                system_time=system_time,
                work_dir=work,
                paths=paths,
                origin=record_origin(source, list(files), names),
            )
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)
    items = (done,) if done is not None else ()
    return IngestResult(dataset=dataset.name, source=source.source_name, items=items)
