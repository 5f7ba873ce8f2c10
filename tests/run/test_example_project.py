"""The example project end to end on the shared Spark session: run, reproduce, and detect tampering."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from odfproj.docsite.collect import collect_site
from odfproj.odf import model
from odfproj.plan.sources import PlanRequest
from odfproj.project.config import load_project
from odfproj.run.run import run_project
from odfproj.storage.workspace import Workspace
from odfproj.transform.reproduce import reproduce_all
from tests.conftest import REPO_DIR
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

TAMPERED = "org.example.weather.monthly"


@pytest.fixture(scope="module")
def example(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("example") / "example_project"
    shutil.copytree(
        REPO_DIR / "example_project", root, ignore=shutil.ignore_patterns(".odf", "spark-warehouse")
    )
    result = run_project(load_project(root), PlanRequest(), holder=RecordingHolder(spark), threads=2)
    assert result.ok, [(r.dataset, r.message) for r in result.results if r.message]
    return root


def test_the_docs_site_of_the_run_example_shows_every_dataset_with_its_data(example):
    site = collect_site(load_project(example))
    assert len(site.datasets) == 7 and not site.warnings
    for doc in site.datasets:
        assert doc.state is not None and doc.state.chain.records > 0 and doc.state.chain.watermark, doc.name
        assert doc.schema_source == "chain" and doc.last_run is not None and doc.last_run.status == "success"
        assert doc.queries or doc.kind == "root", doc.name
    keyed = next(d for d in site.datasets if d.name == "org.example.weather.daily")
    assert keyed.state is not None and keyed.state.current_rows == keyed.state.chain.records


def test_every_example_transform_reproduces(example, engine):
    workspace = Workspace(example / ".odf")
    derivatives = [
        n for n in workspace.list_datasets() if workspace.open(n).kind is model.DatasetKind.Derivative
    ]
    assert len(derivatives) >= 3
    for name in derivatives:
        results = reproduce_all(workspace, name, engine)
        assert results and all(results), [r.message for r in results if not r]


def test_tampering_with_a_derivative_data_file_makes_verify_fail(example, tmp_path):
    root = Path(shutil.copytree(example, tmp_path / "copy"))
    dataset = Workspace(root / ".odf").open(TAMPERED)
    data = next(
        dataset.layout.data_path(b.event.new_data.physical_hash)
        for _, b in dataset.iter_blocks()
        if isinstance(b.event, model.ExecuteTransform) and b.event.new_data is not None
    )
    table = pq.read_table(data)
    column = table.schema.get_field_index("precipitation")
    bumped = pc.add(table.column(column), pa.scalar(0.1))  # one plausible edit: the same shape, other values
    data.chmod(0o644)
    pq.write_table(table.set_column(column, table.field(column), bumped), data)

    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "odfproj", "verify", "--reproduce", TAMPERED],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert data.name in done.stdout and "block" in done.stdout, done.stdout  # names the file and block
    assert "Traceback" not in done.stderr
