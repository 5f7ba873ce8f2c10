"""``odfproj docs build`` without a JVM: what the page holds, its escaping, and run_results.json read defensively."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from odfproj.cli.main import app
from odfproj.docsite.collect import collect_site
from odfproj.docsite.html import render_site
from odfproj.odf import model
from odfproj.project.config import WORKSPACE_ENV, load_project
from odfproj.storage.workspace import Workspace
from tests.docsite.projects import DAILY, HOSTILE, ORDERS, REGIONS, add_orders_data, write_shop
from tests.storage.helpers.chains import set_schema


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    return write_shop(tmp_path / "shop")


def run_cli(args: list[str]):
    return CliRunner().invoke(app, args)


def test_a_project_that_never_ran_shows_its_definitions(shop: Path) -> None:
    site = collect_site(load_project(shop))
    docs = {d.name: d for d in site.datasets}
    assert [d.name for d in site.datasets][-1] == DAILY  # inputs first
    orders = docs[ORDERS]
    assert orders.state is None and orders.last_run is None
    assert orders.keywords == ("sales", "<b>bold</b>")
    assert orders.license is not None and orders.license.spdx_id == "CC-BY-4.0"
    assert [(c.name, c.type) for c in orders.schema][:2] == [("id", "BIGINT"), ("region", "STRING")]
    assert orders.schema_source == "manifest"
    assert orders.outputs == (DAILY,)
    assert docs[DAILY].inputs == ((ORDERS, "orders"), (REGIONS, None))
    assert docs[DAILY].schema == () and docs[DAILY].schema_source is None
    # The datafusion preprocess is shown as Spark runs it, with the text as written kept beside it.
    (preprocess,) = orders.queries
    assert preprocess.role == "preprocess" and "LOCATE('e', region)" in preprocess.steps[0].spark
    assert "strpos(region, 'e')" in preprocess.steps[0].source


def test_every_manifest_string_is_escaped_and_nothing_comes_from_the_network(shop: Path) -> None:
    page = render_site(collect_site(load_project(shop)))
    assert HOSTILE not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page
    assert page.count("<script") == 1  # the site's own, inline
    assert not re.search(r"<(link|img|iframe)\b|\ssrc=\"|@import|url\(http", page)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert (
        csp
        and "default-src 'none'" in csp.group(1)
        and "'unsafe-inline'" not in csp.group(1).split("script-src")[1].split(";")[0]
    )


def test_docs_build_cli_writes_the_site_into_the_workspace_or_out(shop: Path, tmp_path: Path) -> None:
    result = run_cli(["docs", "build", "--project", str(shop)])
    assert result.exit_code == 0, result.output
    page = shop / ".odf" / "site" / "index.html"
    assert f"Docs site written: {page}" in result.output
    assert f'id="ds-{DAILY}"' in page.read_text()
    out = tmp_path / "elsewhere"
    assert run_cli(["docs", "build", "--project", str(shop), "--out", str(out)]).exit_code == 0
    assert (out / "index.html").is_file()


def test_run_results_with_data_tests_are_shown_and_odd_entries_ignored(shop: Path) -> None:
    (shop / ".odf").mkdir()
    results = {
        "started_at": "2026-11-23T20:00:00Z",
        "results": [
            {
                "unique_id": ORDERS,
                "status": "success",
                "work": "ingest",
                "records_added": 12,
                "execution_time": 1.5,
                "message": "",
                "tests": [{"name": "not_null(id)", "status": "pass"}, "not a mapping"],
            },
            {
                "resource_type": "test",
                "test": "unique(region)",
                "dataset": REGIONS,
                "status": "fail",
                "failures": 2,
            },
            {"unique_id": DAILY, "status": "error", "message": "<i>boom</i>", "records_added": "many"},
            "garbage",
            {"no": "id"},
        ],
    }
    (shop / ".odf" / "run_results.json").write_text(json.dumps(results))
    site = collect_site(load_project(shop))
    docs = {d.name: d for d in site.datasets}
    assert [(t.name, t.status) for t in docs[ORDERS].tests] == [("not_null(id)", "pass")]
    assert [(t.name, t.status, t.message) for t in docs[REGIONS].tests] == [
        ("unique(region)", "fail", "2 failing row(s)")
    ]
    assert docs[ORDERS].last_run is not None and docs[ORDERS].last_run.records_added == 12
    assert docs[DAILY].last_run is not None and docs[DAILY].last_run.records_added is None
    page = render_site(site)
    assert "&lt;i&gt;boom&lt;/i&gt;" in page and "1/2</b><span>tests passed" in page


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"results": 3}'])
def test_an_unreadable_run_results_file_is_no_run(shop: Path, content: str) -> None:
    (shop / ".odf").mkdir()
    (shop / ".odf" / "run_results.json").write_text(content)
    site = collect_site(load_project(shop))
    assert all(d.last_run is None and not d.tests for d in site.datasets)


def test_a_manifest_with_errors_is_listed_with_its_problems(shop: Path) -> None:
    (shop / "datasets" / "bad.yaml").write_text(
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: com.example.bad\n  kind: Root\n  metadata: 3\n"
    )
    site = collect_site(load_project(shop))
    bad = next(d for d in site.datasets if d.name == "com.example.bad")
    assert bad.kind == "invalid" and bad.problems and "bad.yaml" in bad.problems[0]


def test_a_dataset_with_data_shows_rows_watermark_and_last_blocks(shop: Path, tmp_path: Path) -> None:
    add_orders_data(shop, tmp_path / "scratch")
    workspace = Workspace(shop / ".odf")
    workspace.create("com.example.gone", model.DatasetKind.Root).append([set_schema()])
    site = collect_site(load_project(shop))
    doc = next(d for d in site.datasets if d.name == ORDERS)
    assert doc.state is not None
    assert (doc.state.chain.records, doc.state.current_rows, doc.state.chain.primary_key) == (5, 5, ("id",))
    assert doc.state.chain.watermark == datetime(2024, 1, 2, tzinfo=UTC)
    assert doc.state.chain.blocks == 5 and [b.event for b in doc.state.last_blocks[:2]] == [
        "AddData",
        "AddData",
    ]
    assert doc.state.last_blocks[0].sequence_number == 4
    assert doc.schema_source == "chain" and ("region", "STRING") in [(c.name, c.type) for c in doc.schema]
    assert site.warnings == ("dataset com.example.gone is in the workspace but no manifest defines it",)
    page = render_site(site)
    assert "5 in the changelog" in page and doc.state.last_blocks[0].block_hash in page
    assert "The workspace has no data yet" not in page
