"""Fetch of ``FilesGlob`` sources: one item per file, ordering, and resuming from the recorded state."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from odfproj.ingest.errors import EventTimeError, FetchError, SourceNotFoundError, SourceStateError
from odfproj.ingest.fetch import KIND_ETAG, KIND_FILES_GLOB, FetchResult, fetch, ingested_glob_files
from odfproj.odf import model

SYSTEM_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
BY_EVENT_TIME = model.SourceOrdering.ByEventTime


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def write(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {name}\n")


def run(
    step: model.FetchStepFilesGlob,
    root: Path,
    prev: model.SourceState | None = None,
    ingested: frozenset[str] | None = None,
) -> FetchResult:
    return fetch(
        step,
        dataset="snap.ds",
        source="default",
        prev_state=prev,
        project_root=root,
        work_dir=root.parent / "work",
        system_time=SYSTEM_TIME,
        environ={},
        ingested=ingested,
    )


def names(result: FetchResult) -> list[str]:
    return [i.display_name for i in result.items]


def test_one_item_per_file_by_name(project: Path) -> None:
    write(project, "in/b.csv", "in/a.csv", "in/c.csv", "in/skip.txt")
    result = run(model.FetchStepFilesGlob(path="in/*.csv"), project)
    assert names(result) == ["in/a.csv", "in/b.csv", "in/c.csv"]
    first = result.items[0]
    assert first.path == project / "in/a.csv" and not first.temporary
    assert first.event_time is None
    assert first.source_state == model.SourceState(
        source_name="default", kind=KIND_FILES_GLOB, value='{"path":"in/a.csv"}'
    )


def test_resumes_after_the_recorded_file(project: Path) -> None:
    write(project, "in/a.csv", "in/b.csv")
    step = model.FetchStepFilesGlob(path="in/*.csv")
    first = run(step, project)
    state = first.items[-1].source_state
    assert run(step, project, prev=state).up_to_date
    write(project, "in/c.csv", "in/d.csv")
    assert names(run(step, project, prev=state)) == ["in/c.csv", "in/d.csv"]
    # resuming from the middle (a crash after committing the first of two items)
    assert names(run(step, project, prev=first.items[0].source_state)) == ["in/b.csv", "in/c.csv", "in/d.csv"]


def test_files_are_never_modified_or_copied(project: Path) -> None:
    write(project, "x.csv")
    before = (project / "x.csv").stat()
    item = run(model.FetchStepFilesGlob(path="*.csv"), project).items[0]
    assert item.path == project / "x.csv"
    assert (project / "x.csv").stat().st_mtime_ns == before.st_mtime_ns
    assert not (project.parent / "work").exists() or not any((project.parent / "work").iterdir())


def test_no_match_the_first_time_is_an_error(project: Path) -> None:
    with pytest.raises(SourceNotFoundError, match=r"no files match 'in/\*\.csv'") as e:
        run(model.FetchStepFilesGlob(path="in/*.csv"), project)
    assert "'snap.ds'" in str(e.value) and "'default'" in str(e.value)


def test_no_match_after_a_previous_ingest_is_up_to_date(project: Path) -> None:
    prev = model.SourceState(source_name="default", kind=KIND_FILES_GLOB, value='{"path":"in/z.csv"}')
    assert run(model.FetchStepFilesGlob(path="in/*.csv"), project, prev=prev).up_to_date


def test_recursive_glob_and_folders_are_skipped(project: Path) -> None:
    write(project, "in/2024/01/a.csv", "in/2023/12/b.csv")
    (project / "in" / "dir.csv").mkdir()
    assert names(run(model.FetchStepFilesGlob(path="in/**/*.csv"), project)) == [
        "in/2023/12/b.csv",
        "in/2024/01/a.csv",
    ]


def test_absolute_glob(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    write(outside, "one.json")
    result = run(model.FetchStepFilesGlob(path=str(outside / "*.json")), project)
    assert names(result) == [(outside / "one.json").as_posix()]


def test_order_by_event_time_from_path(project: Path) -> None:
    # by name the order would be 01.03, 02.01, 15.02; by the date in the name it is January first
    write(project, "s/snap-01.03.2024.csv", "s/snap-15.02.2024.csv", "s/snap-02.01.2024.csv")
    step = model.FetchStepFilesGlob(
        path="s/snap-*.csv",
        order=BY_EVENT_TIME,
        event_time=model.EventTimeSourceFromPath(pattern=r"snap-(.+)\.csv", timestamp_format="dd.MM.yyyy"),
    )
    result = run(step, project)
    assert names(result) == ["s/snap-02.01.2024.csv", "s/snap-15.02.2024.csv", "s/snap-01.03.2024.csv"]
    assert [i.event_time for i in result.items] == [
        datetime(2024, 1, 2, tzinfo=UTC),
        datetime(2024, 2, 15, tzinfo=UTC),
        datetime(2024, 3, 1, tzinfo=UTC),
    ]
    state = result.items[1].source_state
    assert state is not None
    assert json.loads(state.value) == {"path": "s/snap-15.02.2024.csv", "eventTime": "2024-02-15T00:00:00Z"}
    write(project, "s/snap-10.01.2024.csv", "s/snap-20.03.2024.csv")  # one late, one new
    assert names(run(step, project, prev=state)) == ["s/snap-01.03.2024.csv", "s/snap-20.03.2024.csv"]


def test_order_by_event_time_from_mtime(project: Path) -> None:
    write(project, "a.csv", "b.csv")
    os.utime(project / "a.csv", (2_000_000_000, 2_000_000_000))
    os.utime(project / "b.csv", (1_000_000_000, 1_000_000_000))
    step = model.FetchStepFilesGlob(
        path="*.csv", order=BY_EVENT_TIME, event_time=model.EventTimeSourceFromMetadata()
    )
    result = run(step, project)
    assert names(result) == ["b.csv", "a.csv"]
    assert result.items[0].event_time == datetime.fromtimestamp(1_000_000_000, tz=UTC)


def test_order_by_event_time_needs_an_event_time(project: Path) -> None:
    write(project, "a.csv")
    with pytest.raises(FetchError, match=r"ByEventTime needs eventTime FromPath or FromMetadata"):
        run(model.FetchStepFilesGlob(path="*.csv", order=BY_EVENT_TIME), project)


def test_event_time_from_path_by_name_order(project: Path) -> None:
    write(project, "data/2024/03/07/dump.csv")
    step = model.FetchStepFilesGlob(
        path="data/**/*.csv",
        event_time=model.EventTimeSourceFromPath(
            pattern=r"(\d{4}/\d{2}/\d{2})/", timestamp_format="%Y/%m/%d"
        ),
    )
    assert run(step, project).items[0].event_time == datetime(2024, 3, 7, tzinfo=UTC)


def test_event_time_from_system_time(project: Path) -> None:
    write(project, "a.csv")
    step = model.FetchStepFilesGlob(path="*.csv", event_time=model.EventTimeSourceFromSystemTime())
    assert run(step, project).items[0].event_time == SYSTEM_TIME


def test_event_time_pattern_mismatch_names_the_file(project: Path) -> None:
    write(project, "no-date.csv")
    step = model.FetchStepFilesGlob(
        path="*.csv", event_time=model.EventTimeSourceFromPath(pattern=r"(\d{8})")
    )
    with pytest.raises(EventTimeError, match=r"'snap.ds', source 'default': no-date.csv: .*does not match"):
        run(step, project)


def test_reference_implementation_state_is_a_file_name(project: Path) -> None:
    """kamu records the last file *name* of a glob as an ``odf/etag`` state."""
    write(project, "in/a.csv", "in/b.csv", "in/c.csv")
    prev = model.SourceState(source_name="default", kind=KIND_ETAG, value="b.csv")
    assert names(run(model.FetchStepFilesGlob(path="in/*.csv"), project, prev=prev)) == ["in/c.csv"]


def test_unreadable_state_is_an_error(project: Path) -> None:
    write(project, "a.csv")
    prev = model.SourceState(source_name="default", kind=KIND_FILES_GLOB, value="not json")
    with pytest.raises(SourceStateError, match=r"cannot read the recorded odfproj/files-glob state"):
        run(model.FetchStepFilesGlob(path="*.csv"), project, prev=prev)


def test_cache_forever_ignores_new_files(project: Path) -> None:
    write(project, "a.csv")
    step = model.FetchStepFilesGlob(path="*.csv", cache=model.SourceCachingForever())
    state = run(step, project).items[0].source_state
    write(project, "b.csv")
    assert run(step, project, prev=state).up_to_date


# -- files that will never be ingested (issue 14 point 6) ------------------------------------------


def test_a_late_file_sorting_before_the_last_ingested_one_is_named_in_a_warning(project: Path) -> None:
    write(project, "in/2024-01.csv", "in/2024-03.csv")
    step = model.FetchStepFilesGlob(path="in/*.csv")
    first = run(step, project)
    ingested = ingested_glob_files(i.source_state for i in first.items if i.source_state)
    assert ingested == {"in/2024-01.csv", "in/2024-03.csv"}
    last = first.items[-1].source_state
    assert last is not None
    assert run(step, project, last, ingested).warnings == ()  # ingested files are not news

    write(project, "in/2024-02.csv", "in/2024-04.csv")
    result = run(step, project, last, ingested)
    assert names(result) == ["in/2024-04.csv"]
    [warning] = result.warnings
    assert warning.startswith("dataset 'snap.ds', source 'default': 1 file(s) matching 'in/*.csv' will never")
    assert "in/2024-02.csv" in warning and "(in/2024-03.csv, order by name)" in warning
    assert "in/2024-01.csv" not in warning


def test_reference_implementation_history_counts_file_names(project: Path) -> None:
    write(project, "in/a.csv", "in/b.csv", "in/aa.csv")
    prev = model.SourceState(source_name="default", kind=KIND_ETAG, value="b.csv")
    ingested = ingested_glob_files(
        [model.SourceState(source_name="default", kind=KIND_ETAG, value=n) for n in ("a.csv", "b.csv")]
    )
    [warning] = run(model.FetchStepFilesGlob(path="in/*.csv"), project, prev, ingested).warnings
    assert "in/aa.csv" in warning and "in/a.csv," not in warning


def test_without_history_no_warning_is_guessed(project: Path) -> None:
    write(project, "in/a.csv", "in/b.csv")
    prev = model.SourceState(source_name="default", kind=KIND_FILES_GLOB, value='{"path":"in/b.csv"}')
    assert run(model.FetchStepFilesGlob(path="in/*.csv"), project, prev=prev).warnings == ()


def test_ingest_reports_and_logs_the_warning_without_starting_spark(
    project: Path, tmp_path: Path, caplog
) -> None:
    from odfproj.engine.session import SparkSessionHolder, SparkSettings
    from odfproj.engine.spark import SparkEngine
    from odfproj.ingest.pipeline import ingest_polling
    from odfproj.storage.workspace import Workspace

    write(project, "in/a.csv", "in/b.csv")
    dataset = Workspace(tmp_path / "ws").create(
        "globbed",
        model.DatasetKind.Root,
        system_time=SYSTEM_TIME,
        events=[
            model.SetPollingSource(
                fetch=model.FetchStepFilesGlob(path="in/*.csv"),
                read=model.ReadStepCsv(header=True, schema=("a STRING",)),
                merge=model.MergeStrategyAppend(),
            )
        ],
    )
    for name in ("in/a.csv", "in/c.csv"):  # what earlier runs recorded, one AddData per file
        state = model.SourceState(
            source_name="default", kind=KIND_FILES_GLOB, value=json.dumps({"path": name})
        )
        dataset.append([model.AddData(new_source_state=state)], system_time=SYSTEM_TIME)
    holder = SparkSessionHolder(SparkSettings())
    result = ingest_polling(dataset, SparkEngine(holder), project_root=project, system_time=SYSTEM_TIME)
    assert result.up_to_date
    [warning] = result.warnings
    assert "in/b.csv" in warning and "will never be ingested" in warning and "in/a.csv" not in warning
    assert warning in caplog.messages
