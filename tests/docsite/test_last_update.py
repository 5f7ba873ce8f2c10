"""The dataset page shows the path a derivative's last update took, why full, and the hint (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.docsite.collect import collect_site
from odfproj.docsite.html import render_site
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import WORKSPACE_ENV, load_project
from odfproj.run.apply import apply_plan
from odfproj.storage.update_record import UpdateRecord, transform_block, write_update_record
from odfproj.storage.workspace import Workspace
from tests.docsite.projects import DAILY, ORDERS, write_shop

HINT = "sum a DECIMAL to make it incremental: sum(CAST(amount AS DECIMAL(p,s)))"


@pytest.fixture
def applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shop with its definitions applied (no data): DAILY's chain holds its SetTransform."""
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    shop = write_shop(tmp_path / "shop")
    config = load_project(shop)
    workspace = Workspace(config.workspace())
    with workspace.lock():
        apply_plan(plan_project(config, PlanRequest())[0], workspace)
    return shop


def _record(shop: Path, **fields) -> None:
    daily = Workspace(load_project(shop).workspace()).open(DAILY)
    p = daily.projection()
    fields.setdefault("transform", transform_block(p) or "")
    write_update_record(daily, UpdateRecord(head=p.head.to_multibase(), **fields))


def test_the_page_shows_the_path_its_reason_and_the_hint(applied: Path) -> None:
    _record(
        applied,
        path="full",
        why_full="sum over a floating-point value",
        mode="full: sum over a floating-point value",
        hint=HINT,
        updated_at="2026-11-27T20:00:00Z",
    )
    docs = {d.name: d for d in collect_site(load_project(applied)).datasets}
    assert docs[ORDERS].last_update is None  # a root: no query
    update = docs[DAILY].last_update
    assert update is not None and (update.path, update.hint) == ("full", HINT)
    page = render_site(collect_site(load_project(applied)))
    section = page[page.index(f'id="ds-{DAILY}"') :]
    assert (
        "<dt>Last update</dt><dd><b>full</b> (sum over a floating-point value) "
        '<span class="muted">at 2026-11-27T20:00:00Z</span></dd>'
    ) in section
    assert f"<dt>Hint</dt><dd>{HINT}</dd>" in section
    assert "<dt>Mode</dt>" not in section  # the same as the path's reason: not repeated


def test_a_forced_full_update_shows_the_querys_mode_and_another_querys_record_nothing(applied: Path) -> None:
    _record(applied, path="full", why_full="it had no data yet", mode="grouped over a join")
    page = render_site(collect_site(load_project(applied)))
    section = page[page.index(f'id="ds-{DAILY}"') :]
    assert "<dt>Last update</dt><dd><b>full</b> (it had no data yet)</dd>" in section
    assert "<dt>Mode</dt><dd>grouped over a join</dd>" in section
    _record(applied, path="grouped", mode="grouped", transform="f1620" + "0" * 64)  # of another SetTransform
    docs = {d.name: d for d in collect_site(load_project(applied)).datasets}
    assert docs[DAILY].last_update is None
