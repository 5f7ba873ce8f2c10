"""plan -> apply scenarios on a temporary git repository: the "Done when" list of the plan/apply issue.

Five datasets (two roots, three derivatives), edited the way users edit them, committed to git, and
applied with the same functions the CLI calls (and, where processes matter, with the CLI itself).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import git
import pytest

from odfproj.odf import model
from odfproj.plan.model import Action, Plan
from odfproj.plan.planfile import read_plan_file, write_plan_file
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.apply import StalePlanError, apply_plan
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from tests import manifests


def _root(name: str, description: str) -> str:
    return manifests.root(
        name,
        path=f"data/{name}/*.csv",
        schema=("id BIGINT", "city STRING", "value DOUBLE"),
        merge=manifests.ledger("id"),
        extra=[manifests.set_info(description)],
    )


def _derivative(name: str, inputs: tuple[str, ...], query: str) -> str:
    aliases = {n.split(".")[-1]: n for n in inputs}
    return manifests.derivative(name, aliases, query, extra=[manifests.set_info(f"{name} derived")])


MANIFESTS = {
    "com.example.orders": _root("com.example.orders", "Orders"),
    "com.example.cities": _root("com.example.cities", "Cities"),
    "com.example.enriched": _derivative(
        "com.example.enriched",
        ("com.example.orders", "com.example.cities"),
        "SELECT o.event_time, o.id, o.value, c.city FROM orders o JOIN cities c ON o.id = c.id",
    ),
    "com.example.by-city": _derivative(
        "com.example.by-city",
        ("com.example.enriched",),
        "SELECT max(event_time) AS event_time, city, sum(value) AS total FROM enriched GROUP BY city",
    ),
    "com.example.big": _derivative(
        "com.example.big", ("com.example.orders",), "SELECT * FROM orders WHERE value > 100"
    ),
}


class Project:
    """A project in a git repository, with helpers to edit, commit, plan and apply."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "datasets").mkdir(parents=True)
        (root / "odfproj.yaml").write_text("name: scenarios\n")
        (root / ".gitignore").write_text(".odf/\n")
        for name, text in MANIFESTS.items():
            self.path(name).write_text(text)
        self.repo = git.Repo.init(root)
        with self.repo.config_writer() as cw:
            cw.set_value("user", "name", "test").set_value("user", "email", "t@example.com")
        self.commit("initial manifests")

    def path(self, name: str) -> Path:
        return self.root / "datasets" / f"{name}.yaml"

    def edit(self, name: str, old: str, new: str) -> None:
        text = self.path(name).read_text()
        assert old in text, f"{old!r} not in {name}"
        self.path(name).write_text(text.replace(old, new))
        self.commit(f"edit {name}")

    def commit(self, message: str) -> None:
        self.repo.git.add(A=True)
        self.repo.index.commit(message)

    @property
    def workspace(self) -> Workspace:
        return Workspace(load_project(self.root).workspace())

    def plan(self, **request) -> Plan:
        plan, _ = plan_project(load_project(self.root), PlanRequest(**request))
        return plan

    def apply(self, plan: Plan | None = None):
        plan = plan or self.plan()
        ws = self.workspace
        with ws.lock():
            return apply_plan(plan, ws)

    def heads(self) -> dict[str, str]:
        ws = self.workspace
        return {n: ws.open(n).head().to_multibase() for n in ws.list_datasets()}

    def kinds_since(self, name: str, head: str) -> list[str]:
        """Event kinds appended to ``name`` after ``head``, oldest first."""
        out = []
        for block_hash, block in self.workspace.open(name).iter_blocks():
            if block_hash.to_multibase() == head:
                break
            out.append(type(block.event).__name__)
        return out[::-1]


def actions(plan: Plan) -> dict[str, Action]:
    return {s.dataset: s.action for s in plan.definitions}


@pytest.fixture()
def project(tmp_path) -> Project:
    return Project(tmp_path / "proj")


@pytest.fixture()
def applied(project) -> Project:
    plan = project.plan()
    assert set(actions(plan).values()) == {Action.CREATE}
    project.apply(plan)
    return project


def test_create_five_datasets_then_nothing_to_do(applied: Project) -> None:
    ws = applied.workspace
    assert sorted(ws.list_datasets()) == sorted(MANIFESTS)
    enriched = ws.open("com.example.enriched").projection()
    ids = {ws.open(n).dataset_id.as_did_str() for n in ("com.example.orders", "com.example.cities")}
    assert {i.dataset_ref for i in enriched.set_transform.inputs} == ids, "inputs stored as DatasetIds"
    assert enriched.set_transform.transform.query is None, "query normalised into queries"
    assert len(enriched.set_transform.transform.queries) == 1
    again = applied.plan()
    assert set(actions(again).values()) == {Action.UNCHANGED}
    before = applied.heads()
    result = applied.apply(again)
    assert not result.changed and applied.heads() == before, "applying twice changes nothing"
    for name in ws.list_datasets():
        assert verify_dataset(ws.open(name)) == []


def test_description_change_appends_exactly_one_set_info(applied: Project) -> None:
    before = applied.heads()
    applied.edit("com.example.orders", "description: Orders", "description: All orders")
    plan = applied.plan()
    assert actions(plan)["com.example.orders"] is Action.UPDATE
    assert sum(a is not Action.UNCHANGED for a in actions(plan).values()) == 1
    applied.apply(plan)
    assert applied.kinds_since("com.example.orders", before["com.example.orders"]) == ["SetInfo"]
    assert {n: h for n, h in applied.heads().items() if n != "com.example.orders"} == {
        n: h for n, h in before.items() if n != "com.example.orders"
    }


def test_reordered_equal_manifest_appends_nothing(applied: Project) -> None:
    path = applied.path("com.example.big")
    text = path.read_text()
    transform, info = text.split("    - kind: SetInfo\n")
    head, transform_body = transform.split("  metadata:\n")
    path.write_text(f"{head}  metadata:\n    - kind: SetInfo\n{info}{transform_body}")
    applied.commit("reorder")
    assert actions(applied.plan())["com.example.big"] is Action.UNCHANGED


def test_query_change_appends_one_set_transform(applied: Project) -> None:
    before = applied.heads()
    applied.edit("com.example.big", "value > 100", "value > 1000")
    plan = applied.plan()
    step = next(s for s in plan.definitions if s.dataset == "com.example.big")
    assert step.action is Action.UPDATE
    assert [c.kind for c in step.changes] == ["SetTransform"]
    applied.apply(plan)
    assert applied.kinds_since("com.example.big", before["com.example.big"]) == ["SetTransform"]


def test_column_removal_is_refused_and_nothing_is_written(applied: Project, tmp_path) -> None:
    before = applied.heads()
    applied.edit("com.example.cities", "          - city STRING\n", "")
    applied.edit("com.example.orders", "description: Orders", "description: Changed too")
    plan = applied.plan()
    step = next(s for s in plan.definitions if s.dataset == "com.example.cities")
    assert step.action is Action.REFUSED
    assert any("removes or renames column 'city'" in r for r in step.reasons)
    proc = _cli(["apply", "--auto-approve"], applied.root)
    assert proc.returncode == 1
    assert "refused" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    with pytest.raises(Exception, match="refused"):
        applied.apply(plan)
    assert applied.heads() == before, "a refused plan writes nothing, not even the allowed changes"


def test_deleted_manifest_becomes_an_orphan_and_is_kept(applied: Project) -> None:
    applied.path("com.example.big").unlink()
    applied.commit("drop big")
    plan = applied.plan()
    assert actions(plan)["com.example.big"] is Action.ORPHAN
    applied.apply(plan)
    assert applied.workspace.exists("com.example.big")
    proc = _cli(["plan"], applied.root)
    assert proc.returncode == 0 and "? com.example.big" in proc.stdout


def test_block_appended_behind_the_projects_back_is_drift(applied: Project) -> None:
    dataset = applied.workspace.open("com.example.cities")
    dataset.append([model.SetInfo(description="edited by hand")])
    plan = applied.plan()
    step = next(s for s in plan.definitions if s.dataset == "com.example.cities")
    assert step.action is Action.DRIFT
    assert any("SetInfo (block" in r for r in step.reasons)
    proc = _cli(["plan"], applied.root)
    assert "drift" in proc.stdout
    applied.apply(plan)
    after = applied.workspace.open("com.example.cities").projection()
    assert after.set_info.description == "Cities", "apply brings the chain back to the manifest"
    assert actions(applied.plan())["com.example.cities"] is Action.UNCHANGED


def test_stale_saved_plan_is_refused_naming_the_dataset(applied: Project, tmp_path) -> None:
    applied.edit("com.example.orders", "description: Orders", "description: Saved")
    saved = tmp_path / "plan.json"
    write_plan_file(applied.plan(), saved)
    applied.workspace.open("com.example.by-city").append([model.SetInfo(description="meanwhile")])
    before = applied.heads()
    with pytest.raises(StalePlanError, match=r"com\.example\.by-city"):
        applied.apply(read_plan_file(saved))
    proc = _cli(["apply", str(saved)], applied.root)
    assert proc.returncode == 1 and "com.example.by-city" in proc.stderr and "Traceback" not in proc.stderr
    assert applied.heads() == before


def test_saved_plan_applies_exactly_and_only_once(applied: Project, tmp_path) -> None:
    applied.edit("com.example.orders", "description: Orders", "description: Saved")
    saved = tmp_path / "plan.json"
    assert _cli(["plan", "--out", str(saved)], applied.root).returncode == 0
    applied.edit("com.example.cities", "description: Cities", "description: Not in the saved plan")
    proc = _cli(["apply", str(saved)], applied.root)
    assert proc.returncode == 0, proc.stderr
    ws = applied.workspace
    assert ws.open("com.example.orders").projection().set_info.description == "Saved"
    assert ws.open("com.example.cities").projection().set_info.description == "Cities"
    second = _cli(["apply", str(saved)], applied.root)
    assert second.returncode == 1 and "since the plan was made" in second.stderr


def test_changed_since_selects_edited_manifests_and_downstream(applied: Project) -> None:
    base = applied.repo.head.commit.hexsha
    applied.edit("com.example.cities", "description: Cities", "description: Towns")
    plan = applied.plan(changed_since=base)
    assert [s.dataset for s in plan.definitions] == [
        "com.example.cities",
        "com.example.enriched",
        "com.example.by-city",
    ]


def test_second_apply_fails_fast_while_one_holds_the_lock(applied: Project) -> None:
    applied.edit("com.example.orders", "description: Orders", "description: Locked")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from odfproj.storage.workspace import Workspace
                with Workspace({str(applied.workspace.root)!r}).lock(purpose="odfproj apply"):
                    print("locked", flush=True)
                    time.sleep(30)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = applied.heads()
        proc = _cli(["apply", "--auto-approve"], applied.root)
        assert proc.returncode == 1
        assert f"locked by pid {holder.pid}" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert applied.heads() == before
    finally:
        holder.kill()
        holder.wait()


def test_two_racing_applies_leave_valid_chains(project: Project) -> None:
    """Started together: each either applies or fails cleanly on the lock; the chains stay valid."""
    procs = [_cli_async(["apply", "--auto-approve"], project.root) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for code, err in results:
        assert code == 0 or "locked by pid" in err, err
        assert "Traceback" not in err
    assert any(code == 0 for code, _ in results)
    ws = project.workspace
    assert sorted(ws.list_datasets()) == sorted(MANIFESTS)
    for name in ws.list_datasets():
        assert verify_dataset(ws.open(name)) == []
    assert set(actions(project.plan()).values()) == {Action.UNCHANGED}


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfproj", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _cli_async(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    time.sleep(0)  # both start as close together as the OS allows
    return subprocess.Popen(
        [sys.executable, "-m", "odfproj", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def test_interrupted_apply_stops_between_datasets_and_apply_again_finishes(project: Project) -> None:
    """Ctrl-C's event is set by the first step's report: that dataset is whole, the others untouched."""
    plan = project.plan()
    cancel = threading.Event()
    ws = project.workspace
    with ws.lock():
        result = apply_plan(plan, ws, on_step=lambda step: cancel.set(), cancel=cancel)
    assert len(result.steps) == 1 and len(result.not_applied) == len(MANIFESTS) - 1
    assert (
        result.summary().startswith("Apply interrupted: 1 created")
        and "apply again to finish" in result.summary()
    )
    assert ws.list_datasets() == [result.steps[0].dataset]
    assert verify_dataset(ws.open(result.steps[0].dataset)) == []
    again = project.plan()
    assert sorted(s.dataset for s in again.definitions if s.action is Action.CREATE) == sorted(
        result.not_applied
    )
    assert not project.apply(again).not_applied
    assert sorted(ws.list_datasets()) == sorted(MANIFESTS)
