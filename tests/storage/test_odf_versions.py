"""Chains written as ODF 0.39 (manifest version 3, ODF-schema SetDataSchema) on request, read like any other.

A workspace set to ``odf_version: "0.39"`` creates chains in kamu v0.265's form; a chain keeps the form
of its Seed whatever the setting says later; plan names each dataset whose chain is in the other form.
Without Spark: data files are written with pyarrow, ``log`` and ``verify --integrity`` run in process.
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfproj.odf import model
from odfproj.odf.flatbuffers_codec import block_hash, decode_block
from odfproj.odf.odf_schema import set_data_schema
from odfproj.plan.odf_version import odf_version_warnings
from odfproj.plan.workspace_state import load_workspace_state
from odfproj.project.config import WORKSPACE_ENV, ProjectError, parse_config
from odfproj.remote.repository import pull, push
from odfproj.remote.sync import SyncState
from odfproj.storage.data_commit import commit_data
from odfproj.storage.dataset import Dataset
from odfproj.storage.object_store import FolderStore
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main_split
from tests.security.project_helpers import info_manifest, make_project
from tests.storage.helpers.chains import BASE_TIME, DEFAULT_SCHEMA, schema_with, write_slice

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _with_data(workspace: Workspace, name: str, scratch: Path) -> Dataset:
    dataset = workspace.create(name, model.DatasetKind.Root, system_time=BASE_TIME)
    path = write_slice(scratch / f"{name}.parquet", DEFAULT_SCHEMA, 0, 3)
    event = model.AddData(new_watermark=BASE_TIME)
    commit_data(
        dataset, dataset.projection(), event, system_time=BASE_TIME + timedelta(seconds=1),
        data_file=path, records=3, schema=DEFAULT_SCHEMA,
    )  # fmt: skip
    return dataset


def _stored_blocks(dataset: Dataset) -> list[tuple[model.MetadataBlock, int]]:
    """Every block from the head back, decoded from its stored bytes (hash checked by the reader)."""
    out = []
    head = dataset.head()
    while head is not None:
        data = dataset.read_block_bytes(head)
        assert block_hash(data) == head
        block, version = decode_block(data)
        out.append((block, version))
        head = block.prev_block_hash
    return out


def test_a_039_workspace_writes_kamus_current_form_and_reads_it_back(tmp_path: Path, scratch: Path) -> None:
    dataset = _with_data(Workspace(tmp_path / "ws", odf_version="0.39"), "prices", scratch)
    blocks = _stored_blocks(dataset)
    assert [type(b.event).__name__ for b, _ in blocks] == ["AddData", "SetDataSchema", "Seed"]
    assert {version for _, version in blocks} == {3}
    schema_event = blocks[1][0].event
    assert schema_event.schema is None and schema_event.data_schema is not None
    assert dataset.projection().arrow_schema == DEFAULT_SCHEMA  # the same Arrow schema as the 0.35 form

    code, out, err = run_main_split("log", "prices", "--oneline", "--workspace", str(tmp_path / "ws"))
    assert code == 0, err
    assert ("SetDataSchema" in out and "3 columns" not in out) or "columns" in out
    code, out, err = run_main_split("verify", "--integrity", "--workspace", str(tmp_path / "ws"))
    assert code == 0, out + err


def test_a_035_workspace_writes_what_it_always_wrote(tmp_path: Path, scratch: Path) -> None:
    dataset = _with_data(Workspace(tmp_path / "ws"), "prices", scratch)
    blocks = _stored_blocks(dataset)
    assert {version for _, version in blocks} == {2}
    assert blocks[1][0].event.data_schema is None and blocks[1][0].event.schema is not None


def test_a_chain_keeps_its_form_and_plan_says_when_the_setting_differs(tmp_path: Path, scratch: Path) -> None:
    _with_data(Workspace(tmp_path / "ws", odf_version="0.39"), "new-form", scratch)
    _with_data(Workspace(tmp_path / "ws"), "old-form", scratch)
    later = Workspace(tmp_path / "ws")  # the setting went back to 0.35
    later.open("new-form").append(
        [model.SetInfo(description="still 0.39")], system_time=BASE_TIME + timedelta(1)
    )
    assert {v for _, v in _stored_blocks(later.open("new-form"))} == {3}

    views = load_workspace_state(tmp_path / "ws").views
    lines = odf_version_warnings("0.35", views, ["new-form", "old-form", "absent"])
    assert len(lines) == 1 and lines[0].startswith("new-form: its chain is in the ODF 0.39 form")
    assert 'odf_version: "0.35"' in lines[0]
    assert [line.split(":")[0] for line in odf_version_warnings("0.39", views, ["old-form"])] == ["old-form"]


@pytest.mark.parametrize(
    ("text", "expected"), [("", "0.35"), ("odf_version: 0.39\n", "0.39"), ('odf_version: "0.35"\n', "0.35")]
)
def test_the_setting_is_read_from_odfproj_yaml(tmp_path: Path, text: str, expected: str) -> None:
    assert parse_config(tmp_path, f"name: p\n{text}").odf_version == expected


def test_an_unknown_odf_version_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match=r"odf_version: 0.38 is not one of"):
        parse_config(tmp_path, "name: p\nodf_version: 0.38\n")


def test_a_039_chain_pulled_from_a_repository_arrives_byte_for_byte_and_verifies(
    tmp_path: Path, scratch: Path
) -> None:
    source = Workspace(tmp_path / "a", odf_version="0.39")
    _with_data(source, "prices", scratch)
    repo = FolderStore(tmp_path / "repo")
    push(source, [], repo)
    target = Workspace(tmp_path / "b")  # a 0.35 workspace: the pulled chain keeps its own form
    [pulled] = pull(target, ["prices"], repo)
    assert pulled.state is SyncState.CREATED
    received = target.open("prices")
    assert [h for h, _ in received.iter_blocks()] == [h for h, _ in source.open("prices").iter_blocks()]
    assert {v for _, v in _stored_blocks(received)} == {3}
    assert verify_dataset(received, integrity=True) == []


@pytest.mark.spark
def test_a_039_chain_is_queried_and_read_as_a_transform_input(tmp_path: Path, scratch: Path, engine) -> None:
    from odfproj.state.views import run_sql
    from odfproj.transform.coordinator import update_derivative
    from tests.transform.helpers import create_derivative

    ws = Workspace(tmp_path / "ws", odf_version="0.39")
    prices = _with_data(ws, "prices", scratch)
    create_derivative(ws, "tagged", {"p": prices}, (None, "SELECT event_time, upper(value) AS tag FROM p"))
    assert update_derivative(ws, "tagged", engine, BASE_TIME + timedelta(minutes=1)).committed
    derived = ws.open("tagged")
    assert {v for _, v in _stored_blocks(derived)} == {3}
    assert derived.projection().arrow_schema.names == ["offset", "op", "system_time", "event_time", "tag"]
    assert verify_dataset(derived, integrity=True) == []
    rows = run_sql(engine, ws, "SELECT tag FROM tagged ORDER BY tag").column("tag").to_pylist()
    written = pq.read_table(scratch / "prices.parquet").column("value").to_pylist()
    assert rows == sorted(v.upper() for v in written) and len(rows) == 3


def test_apply_creates_a_039_chain_and_plan_prints_one_line_once_the_setting_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    project = make_project(
        tmp_path / "p", {"a.yaml": info_manifest("alpha", "first")}, 'name: p\nodf_version: "0.39"\n'
    )
    code, out, err = run_main_split("apply", "--auto-approve", "--project", str(project))
    assert code == 0, out + err
    assert {v for _, v in _stored_blocks(Workspace(project / ".odf").open("alpha"))} == {3}
    code, out, err = run_main_split("plan", "--project", str(project))
    assert code == 0 and "odf_version" not in out + err  # setting and chain agree: nothing to say

    (project / "odfproj.yaml").write_text("name: p\n")
    (project / "datasets" / "a.yaml").write_text(info_manifest("alpha", "second"))
    code, out, err = run_main_split("plan", "--project", str(project))
    assert code == 0, out + err
    [line] = [line for line in (out + err).splitlines() if "odf_version" in line]
    assert line.startswith("warning: alpha: its chain is in the ODF 0.39 form (manifest version 3)")


def test_a_chain_that_records_odf_schemas_in_version_2_blocks_goes_on_doing_so(
    tmp_path: Path, scratch: Path
) -> None:
    # kamu between ODF 0.37 and v0.265 wrote the ODF schema into manifest-version-2 blocks.
    ws = Workspace(tmp_path / "ws")
    dataset = ws.create(
        "prices",
        model.DatasetKind.Root,
        events=[set_data_schema(DEFAULT_SCHEMA, odf_schema=True)],
        system_time=BASE_TIME,
    )
    wider = schema_with(("value", pa.string()), ("n", pa.int64()))
    path = write_slice(scratch / "w.parquet", wider, 0, 2)
    commit_data(
        dataset, dataset.projection(), model.AddData(new_watermark=BASE_TIME),
        system_time=BASE_TIME + timedelta(seconds=1), data_file=path, records=2, schema=wider,
    )  # fmt: skip
    blocks = _stored_blocks(dataset)
    schemas = [b.event for b, _ in blocks if isinstance(b.event, model.SetDataSchema)]
    assert len(schemas) == 2 and all(s.schema is None and s.data_schema is not None for s in schemas)
    assert {v for _, v in blocks} == {2}
    assert dataset.projection().arrow_schema == wider


def test_a_stored_039_dataset_is_pulled_verified_and_logged(tmp_path: Path) -> None:
    repo_dir = tmp_path / "repo"
    shutil.copytree(FIXTURES / "odf-0.39" / "repository", repo_dir)
    target = Workspace(tmp_path / "ws")
    [pulled] = pull(target, ["org.example.cities"], FolderStore(repo_dir))
    assert pulled.state is SyncState.CREATED
    dataset = target.open("org.example.cities")
    blocks = _stored_blocks(dataset)
    assert {v for _, v in blocks} == {3}
    assert [type(b.event).__name__ for b, _ in reversed(blocks)] == [
        "Seed", "SetInfo", "AddPushSource", "SetDataSchema", "AddData",
    ]  # fmt: skip
    source = blocks[2][0].event
    assert (
        isinstance(source.merge, model.MergeStrategyChangelogStream) and source.read.data_schema is not None
    )
    assert verify_dataset(dataset, integrity=True) == []
    assert dataset.projection().arrow_schema.names == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "city",
        "population",
    ]
    code, out, err = run_main_split(
        "log", "org.example.cities", "--oneline", "--workspace", str(tmp_path / "ws")
    )
    assert code == 0, err
    assert "6 columns: offset, op, system_time, event_time, city, population" in out
