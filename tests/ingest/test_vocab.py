"""The dataset vocabulary (SetVocab) honoured by roots and derivatives: keys, event time, stored names.

Real Spark, real chains on disk. The shapes come from real manifests (kamu-contrib): a Ledger keyed on
``[PID, REPORT_YEAR]`` with ``eventTimeColumn: REPORT_YEAR``, and derivatives whose query outputs the
column their own ``SetVocab`` names as the event time.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.spark import SparkEngine
from odfproj.ingest.errors import IngestError
from odfproj.ingest.pipeline import ingest_polling
from odfproj.odf import model
from odfproj.state.read import read_state
from odfproj.state.views import run_sql
from odfproj.storage.dataset import Dataset
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import update_derivative
from odfproj.transform.reproduce import reproduce_all
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0.replace(minute=minutes)


def engine_for(spark) -> SparkEngine:
    return SparkEngine(RecordingHolder(spark))  # type: ignore[arg-type]


def records(dataset: Dataset) -> pa.Table:
    paths = [
        dataset.layout.data_path(b.event.new_data.physical_hash)
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.AddData | model.ExecuteTransform) and b.event.new_data is not None
    ]
    return pa.concat_tables([pq.read_table(p) for p in reversed(paths)])


def vocab_root(ws: Workspace, merge: model.MergeStrategy, schema: tuple[str, ...]) -> Dataset:
    return ws.create(
        "reports",
        model.DatasetKind.Root,
        events=[
            model.SetPollingSource(
                fetch=model.FetchStepFilesGlob(path="data/*.csv"),
                read=model.ReadStepCsv(header=True, schema=schema),
                merge=merge,
            ),
            model.SetVocab(
                event_time_column="REPORT_YEAR", offset_column="row_id", operation_type_column="change"
            ),
        ],
        system_time=T0,
    )


def test_ledger_key_containing_the_event_time_column(spark, project, ws):
    (project / "data" / "1.csv").write_text("PID,REPORT_YEAR,AMOUNT\n1,2020-01-01,10\n1,2021-01-01,11\n")
    (project / "data" / "2.csv").write_text("PID,REPORT_YEAR,AMOUNT\n1,2021-01-01,99\n2,2021-01-01,20\n")
    ds = vocab_root(
        ws,
        model.MergeStrategyLedger(primary_key=("PID", "REPORT_YEAR")),
        ("PID BIGINT", "REPORT_YEAR DATE", "AMOUNT BIGINT"),
    )
    result = ingest_polling(ds, engine_for(spark), project_root=project, system_time=at(1))
    assert [i.records for i in result.items] == [2, 1]  # (1, 2021) was already known
    table = records(ds)
    assert table.schema.names == ["row_id", "change", "system_time", "REPORT_YEAR", "PID", "AMOUNT"]
    assert table.schema.field("REPORT_YEAR").type == pa.date32()  # DATE event time stays DATE
    got = [(r["PID"], r["REPORT_YEAR"], r["AMOUNT"]) for r in table.to_pylist()]
    assert got == [(1, date(2020, 1, 1), 10), (1, date(2021, 1, 1), 11), (2, date(2021, 1, 1), 20)]
    assert ds.projection().watermark == datetime(2021, 1, 1, tzinfo=UTC)
    assert verify_dataset(ds) == []


def test_snapshot_key_containing_the_event_time_column_uses_the_state_index(spark, project, ws):
    (project / "data" / "1.csv").write_text("PID,REPORT_YEAR,AMOUNT\n1,2020-01-01,10\n2,2020-01-01,20\n")
    ds = vocab_root(
        ws,
        model.MergeStrategySnapshot(primary_key=("PID", "REPORT_YEAR")),
        ("PID BIGINT", "REPORT_YEAR DATE", "AMOUNT BIGINT"),
    )
    engine = engine_for(spark)
    ingest_polling(ds, engine, project_root=project, system_time=at(1))
    (project / "data" / "2.csv").write_text("PID,REPORT_YEAR,AMOUNT\n1,2020-01-01,15\n3,2021-01-01,30\n")
    ingest_polling(ds, engine, project_root=project, system_time=at(2))
    ops = [(r["change"], r["PID"], r["AMOUNT"]) for r in records(ds).to_pylist()]
    assert ops == [(0, 1, 10), (0, 2, 20), (2, 1, 10), (3, 1, 15), (1, 2, 20), (0, 3, 30)]
    state = read_state(ds)
    assert state.column_names == ["row_id", "REPORT_YEAR", "PID", "AMOUNT"]
    assert sorted(state.column("AMOUNT").to_pylist()) == [15, 30]
    assert verify_dataset(ds) == []


def test_a_user_column_named_like_a_renamed_system_column_is_refused(spark, project, ws):
    (project / "data" / "1.csv").write_text("PID,REPORT_YEAR,event_time\n1,2020-01-01,x\n")
    ds = vocab_root(ws, model.MergeStrategyAppend(), ("PID BIGINT", "REPORT_YEAR DATE", "event_time STRING"))
    with pytest.raises(IngestError, match=r"dataset 'reports'.*'event_time'.*SetVocab"):
        ingest_polling(ds, engine_for(spark), project_root=project, system_time=at(1))
    assert ds.projection().last_offset is None


def derivative(ws: Workspace, source: Dataset, query: str, event_time: str) -> Dataset:
    return ws.create(
        "derived",
        model.DatasetKind.Derivative,
        events=[
            model.SetTransform(
                inputs=(model.TransformInput(dataset_ref=source.dataset_id.as_did_str(), alias="reports"),),
                transform=model.TransformSql(engine="spark", query=query),
            ),
            model.SetVocab(event_time_column=event_time),
        ],
        system_time=T0,
    )


def test_derivative_query_sees_the_inputs_names_and_outputs_its_own_vocab(spark, project, ws):
    (project / "data" / "1.csv").write_text("PID,REPORT_YEAR,AMOUNT\n1,2020-01-01,10\n2,2021-01-01,20\n")
    root = vocab_root(
        ws,
        model.MergeStrategyLedger(primary_key=("PID",)),
        ("PID BIGINT", "REPORT_YEAR DATE", "AMOUNT BIGINT"),
    )
    engine = engine_for(spark)
    ingest_polling(root, engine, project_root=project, system_time=at(1))
    ds = derivative(
        ws,
        root,
        "SELECT REPORT_YEAR AS reported_date, PID AS id, AMOUNT * 2 AS doubled FROM reports",
        "reported_date",
    )
    outcome = update_derivative(ws, "derived", engine, at(2))
    assert outcome.records == 2
    table = records(ds)
    assert table.schema.names == ["offset", "op", "system_time", "reported_date", "id", "doubled"]
    assert table.schema.field("reported_date").type == pa.date32()
    assert [(r["id"], r["doubled"]) for r in table.to_pylist()] == [(1, 20), (2, 40)]
    # A second run after new input data diffs against the stored state under the vocabulary's names.
    (project / "data" / "2.csv").write_text("PID,REPORT_YEAR,AMOUNT\n3,2022-01-01,30\n")
    ingest_polling(root, engine, project_root=project, system_time=at(3))
    second = update_derivative(ws, "derived", engine, at(4))
    assert (second.records, second.mode) == (1, "stateless")  # the new records only, under both vocabularies
    assert all(r for r in reproduce_all(ws, "derived", engine))
    assert verify_dataset(ds) == []
    # odfproj sql shows both under their own names.
    derived = run_sql(engine, ws, "SELECT id, reported_date FROM `derived` ORDER BY id")
    assert derived.column("reported_date").to_pylist() == [
        date(2020, 1, 1),
        date(2021, 1, 1),
        date(2022, 1, 1),
    ]
    raw = run_sql(engine, ws, "SELECT count(*) AS n, max(REPORT_YEAR) AS y FROM `reports`")
    assert raw.to_pylist() == [{"n": 3, "y": date(2022, 1, 1)}]


def test_derivative_without_its_vocab_column_is_refused_naming_it(spark, project, ws):
    (project / "data" / "1.csv").write_text("PID,REPORT_YEAR,AMOUNT\n1,2020-01-01,10\n")
    root = vocab_root(ws, model.MergeStrategyAppend(), ("PID BIGINT", "REPORT_YEAR DATE", "AMOUNT BIGINT"))
    engine = engine_for(spark)
    ingest_polling(root, engine, project_root=project, system_time=at(1))
    derivative(ws, root, "SELECT REPORT_YEAR, PID FROM reports", "reported_date")
    with pytest.raises(InvalidQueryError, match="no 'reported_date' column"):
        update_derivative(ws, "derived", engine, at(2))
