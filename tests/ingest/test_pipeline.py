"""Root ingestion end to end: real files, a real HTTP server, real Spark, real chains on disk."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq
import pytest

from odfproj.engine.spark import SparkEngine
from odfproj.errors import OdfprojError
from odfproj.ingest.errors import IngestError
from odfproj.ingest.pipeline import ingest_polling
from odfproj.ingest.push import ingest_push
from odfproj.ingest.read import ReadError
from odfproj.odf import model
from odfproj.storage.dataset import Dataset
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CSV = model.ReadStepCsv(header=True, schema=("id BIGINT", "name STRING", "value DOUBLE"))


def engine_for(spark) -> tuple[SparkEngine, RecordingHolder]:
    holder = RecordingHolder(spark)
    return SparkEngine(holder), holder  # type: ignore[arg-type]


def at(minutes: int) -> datetime:
    return T0.replace(minute=minutes)


def root(ws: Workspace, name: str, source: model.MetadataEvent) -> Dataset:
    return ws.create(name, model.DatasetKind.Root, events=[source], system_time=T0)


def rows(dataset: Dataset) -> list[dict]:
    """Every record, in offset order, with op codes."""
    paths = [
        dataset.layout.data_path(b.event.new_data.physical_hash)
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData) and b.event.new_data is not None
    ]
    out: list[dict] = []
    for p in reversed(paths):
        out += pq.read_table(p).to_pylist()
    return out


def assert_valid(dataset: Dataset) -> None:
    assert verify_dataset(dataset) == []


def blocks(dataset: Dataset) -> list[str]:
    return [type(b.event).__name__ for _, b in dataset.iter_blocks()][::-1]


# --- FilesGlob + Ledger ---------------------------------------------------------------------------


def test_files_glob_ledger_appends_once_and_rerun_starts_no_spark(spark, project, ws):
    (project / "data" / "a-1.csv").write_text("id,name,value\n1,one,1.5\n2,two,2.5\n")
    ds = root(
        ws,
        "ledger",
        model.SetPollingSource(
            fetch=model.FetchStepFilesGlob(path="data/a-*.csv"),
            read=CSV,
            merge=model.MergeStrategyLedger(primary_key=("id",)),
        ),
    )
    engine, holder = engine_for(spark)
    result = ingest_polling(ds, engine, project_root=project, system_time=at(1))
    assert result.records_added == 2 and holder.created
    assert blocks(ds) == ["Seed", "SetPollingSource", "SetDataSchema", "AddData"]
    first = rows(ds)
    assert [(r["offset"], r["op"], r["id"], r["name"]) for r in first] == [(0, 0, 1, "one"), (1, 0, 2, "two")]
    assert all(r["system_time"] == at(1) and r["event_time"] == at(1) for r in first)
    assert ds.projection().watermark == at(1)
    schema = ds.projection().arrow_schema
    assert [str(f.type) for f in schema] == [
        "int64", "int32", "timestamp[ms, tz=UTC]", "timestamp[ms, tz=UTC]", "int64", "string", "double"
    ]  # fmt: skip

    head = ds.head()
    engine2, holder2 = engine_for(spark)
    again = ingest_polling(ds, engine2, project_root=project, system_time=at(2))
    assert again.up_to_date and ds.head() == head
    assert not holder2.created

    # A new file: only the unseen key is appended, offsets continue.
    (project / "data" / "a-2.csv").write_text("id,name,value\n2,two,2.5\n3,three,3.5\n")
    third = ingest_polling(ds, engine, project_root=project, system_time=at(3))
    assert third.records_added == 1
    assert [(r["offset"], r["id"]) for r in rows(ds)] == [(0, 1), (1, 2), (2, 3)]
    assert ds.projection().last_offset == 2
    assert_valid(ds)


# --- Snapshot fed by dated files ------------------------------------------------------------------


def test_snapshot_from_three_dated_files(spark, project, ws):
    files = {
        "snap-2024-01-01.csv": "id,name,value\n1,a,1\n2,b,2\n3,c,3\n",
        "snap-2024-01-02.csv": "id,name,value\n1,a,1\n2,B,2\n4,d,4\n",  # 2 changed, 3 gone, 4 new
        "snap-2024-01-03.csv": "id,name,value\n1,a,1\n2,B,2\n4,d,4\n",  # unchanged
    }
    for name, text in files.items():
        (project / "data" / name).write_text(text)
    ds = root(
        ws,
        "snap",
        model.SetPollingSource(
            fetch=model.FetchStepFilesGlob(
                path="data/snap-*.csv",
                event_time=model.EventTimeSourceFromPath(
                    pattern=r"snap-(\d{4}-\d{2}-\d{2})\.csv", timestamp_format="%Y-%m-%d"
                ),
            ),
            read=CSV,
            merge=model.MergeStrategySnapshot(primary_key=("id",)),
        ),
    )
    engine, _ = engine_for(spark)
    result = ingest_polling(ds, engine, project_root=project, system_time=at(5))
    assert [i.records for i in result.items] == [3, 4, 0]
    d1, d2 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)
    got = [(r["offset"], r["op"], r["id"], r["name"], r["event_time"]) for r in rows(ds)]
    assert got == [
        (0, 0, 1, "a", d1),
        (1, 0, 2, "b", d1),
        (2, 0, 3, "c", d1),
        (3, 2, 2, "b", d1),  # -C carries the old row
        (4, 3, 2, "B", d2),  # +C the new one
        (5, 1, 3, "c", d1),  # -R
        (6, 0, 4, "d", d2),  # +A
    ]
    # The third (unchanged) snapshot commits only its source state.
    last = next(b for _, b in ds.iter_blocks())
    assert isinstance(last.event, model.AddData) and last.event.new_data is None
    assert "snap-2024-01-03.csv" in last.event.new_source_state.value
    assert ds.projection().watermark == d2
    assert_valid(ds)


# --- Url with ETag --------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    body = b"id,name,value\n1,x,1\n"
    etag = '"v1"'
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.headers.get("If-None-Match") or "")
        if self.path != "/data.csv":
            self.send_error(404, "Not Found")
            return
        if self.headers.get("If-None-Match") == self.etag:
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("ETag", self.etag)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.hits = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_url_etag_second_run_is_304_and_starts_no_spark(spark, project, ws, server):
    ds = root(
        ws,
        "web",
        model.SetPollingSource(
            fetch=model.FetchStepUrl(url=f"{server}/data.csv"), read=CSV, merge=model.MergeStrategyAppend()
        ),
    )
    engine, _ = engine_for(spark)
    assert ingest_polling(ds, engine, project_root=project, system_time=at(1)).records_added == 1
    assert ds.projection().source_states["default"].value == '"v1"'
    head = ds.head()
    engine2, holder2 = engine_for(spark)
    assert ingest_polling(ds, engine2, project_root=project, system_time=at(2)).up_to_date
    assert _Handler.hits == ["", '"v1"']
    assert ds.head() == head and not holder2.created
    assert_valid(ds)


# --- push -----------------------------------------------------------------------------------------


def test_push_ingest_from_file_with_event_time_column(spark, tmp_path, ws):
    ds = ws.create(
        "pushed",
        model.DatasetKind.Root,
        events=[
            model.AddPushSource(
                source_name="events",
                read=model.ReadStepNdJson(schema=("event_time DATE", "id BIGINT", "v STRING")),
                merge=model.MergeStrategyAppend(),
            )
        ],
        system_time=T0,
    )
    f = tmp_path / "in.ndjson"
    f.write_text(
        '{"event_time": "2024-03-02", "id": 2, "v": "b"}\n{"event_time": "2024-03-01", "id": 1, "v": "a"}\n'
    )
    engine, _ = engine_for(spark)
    result = ingest_push(ds, engine, [f], system_time=at(1))
    assert result.records_added == 2 and result.source == "events"
    got = [(r["offset"], r["event_time"], r["id"]) for r in rows(ds)]
    assert got == [  # stable sort by event time; a DATE stays a DATE (as in the reference)
        (0, date(2024, 3, 1), 1),
        (1, date(2024, 3, 2), 2),
    ]
    assert ds.projection().watermark == datetime(2024, 3, 2, tzinfo=UTC)
    with pytest.raises(IngestError, match="no such push source"):
        ingest_push(ds, engine, [f], source_name="nope")
    assert_valid(ds)


# --- bad inputs -----------------------------------------------------------------------------------


def _failing(ws: Workspace, project: Path, source: model.SetPollingSource, spark) -> tuple[str, Dataset]:
    ds = root(ws, "bad", source)
    head = ds.head()
    engine, _ = engine_for(spark)
    with pytest.raises(OdfprojError) as info:
        ingest_polling(ds, engine, project_root=project, system_time=at(1))
    message = str(info.value)
    assert "\n" not in message and message.startswith("dataset 'bad', source 'default'")
    assert ds.head() == head
    assert_valid(ds)
    return message, ds


@pytest.mark.parametrize(
    "merge",
    [
        model.MergeStrategyAppend(),
        model.MergeStrategyLedger(primary_key=("id",)),
        model.MergeStrategySnapshot(primary_key=("id",)),  # a first snapshot: read lazily too
    ],
    ids=["append", "ledger", "first-snapshot"],
)
def test_malformed_csv_names_dataset_source_and_file(spark, project, ws, merge):
    (project / "data" / "x.csv").write_text("id,name,value\n1,a,1\nnot-a-number,b,2\n")
    source = model.SetPollingSource(fetch=model.FetchStepFilesGlob(path="data/*.csv"), read=CSV, merge=merge)
    message, _ = _failing(ws, project, source, spark)
    assert "data/x.csv" in message and "not-a-number" in message


def test_malformed_csv_is_a_read_error(spark, project, ws):
    (project / "data" / "x.csv").write_text("id,name,value\nnot-a-number,b,2\n")
    ds = root(
        ws,
        "bad",
        model.SetPollingSource(
            fetch=model.FetchStepFilesGlob(path="data/*.csv"), read=CSV, merge=model.MergeStrategyAppend()
        ),
    )
    with pytest.raises(ReadError):
        ingest_polling(ds, engine_for(spark)[0], project_root=project, system_time=at(1))


def test_preprocess_and_schema_growth_and_temporary_files_removed(spark, project, ws, server):
    ds = root(
        ws,
        "grow",
        model.SetPollingSource(
            fetch=model.FetchStepUrl(url=f"{server}/data.csv"), read=CSV, merge=model.MergeStrategyAppend()
        ),
    )
    work = project / "work"
    engine, _ = engine_for(spark)
    ingest_polling(ds, engine, project_root=project, system_time=at(1), work_dir=work)
    assert list(work.iterdir()) == []  # the download and the Parquet file are gone
    (project / "data" / "more.csv").write_text("id,name,value\n7,seven,7\n")
    ds.append(
        [
            model.SetPollingSource(
                fetch=model.FetchStepFilesGlob(path="data/more.csv"),
                read=CSV,
                preprocess=model.TransformSql(
                    engine="spark", query="SELECT id, name, value, upper(name) AS shout FROM input"
                ),
                merge=model.MergeStrategyAppend(),
            )
        ],
        system_time=at(2),
    )
    result = ingest_polling(ds, engine, project_root=project, system_time=at(3))
    assert result.items[0].schema_changed and result.blocks_added == 2
    assert ds.projection().arrow_schema.names[-1] == "shout"
    got = [(r["offset"], r["id"], r.get("shout")) for r in rows(ds)]
    assert got == [(0, 1, None), (1, 7, "SEVEN")]
    assert_valid(ds)


def test_missing_file(spark, project, ws):
    source = model.SetPollingSource(
        fetch=model.FetchStepUrl(url="file:///nonexistent/odfproj/x.csv"),
        read=CSV,
        merge=model.MergeStrategyAppend(),
    )
    message, _ = _failing(ws, project, source, spark)
    assert "x.csv" in message


def test_http_404(spark, project, ws, server):
    source = model.SetPollingSource(
        fetch=model.FetchStepUrl(url=f"{server}/missing.csv"), read=CSV, merge=model.MergeStrategyAppend()
    )
    message, _ = _failing(ws, project, source, spark)
    assert "404" in message and "missing.csv" in message


def test_pipe_exiting_non_zero(spark, project, ws):
    (project / "data" / "x.csv").write_text("id,name,value\n1,a,1\n")
    source = model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path="data/*.csv"),
        prepare=(model.PrepStepPipe(command=("sh", "-c", "echo broken pipe tool >&2; exit 3")),),
        read=CSV,
        merge=model.MergeStrategyAppend(),
    )
    message, _ = _failing(ws, project, source, spark)
    assert "data/x.csv" in message and "3" in message


def test_a_system_column_in_the_data_is_refused(spark, project, ws):
    (project / "data" / "x.csv").write_text("offset,name\n1,a\n")
    source = model.SetPollingSource(
        fetch=model.FetchStepFilesGlob(path="data/*.csv"),
        read=model.ReadStepCsv(header=True, schema=("offset BIGINT", "name STRING")),
        merge=model.MergeStrategyAppend(),
    )
    message, _ = _failing(ws, project, source, spark)
    assert "'offset'" in message and "data/x.csv" in message


def test_set_vocab_event_time_column_is_used_and_kept_in_the_files(spark, project, ws):
    (project / "data" / "1.csv").write_text("id,ts\n1,2024-05-02\n2,2024-05-01\n")
    (project / "data" / "2.csv").write_text("id,ts\n2,2024-05-01\n3,2024-05-03\n")
    ds = ws.create(
        "vocab",
        model.DatasetKind.Root,
        events=[
            model.SetVocab(event_time_column="ts"),
            model.SetPollingSource(
                fetch=model.FetchStepFilesGlob(path="data/*.csv"),
                read=model.ReadStepCsv(header=True, schema=("id BIGINT", "ts DATE")),
                merge=model.MergeStrategyLedger(primary_key=("id",)),
            ),
        ],
        system_time=T0,
    )
    result = ingest_polling(ds, engine_for(spark)[0], project_root=project, system_time=at(1))
    assert [i.records for i in result.items] == [2, 1]
    assert ds.projection().arrow_schema.names == ["offset", "op", "system_time", "ts", "id"]
    got = [(r["offset"], r["id"], r["ts"].day) for r in rows(ds)]
    assert got == [(0, 2, 1), (1, 1, 2), (2, 3, 3)]  # sorted by event time within each slice
    assert ds.projection().watermark == datetime(2024, 5, 3, tzinfo=UTC)
    assert_valid(ds)
