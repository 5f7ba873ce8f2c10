"""Declared renames (odfproj.yaml ``moved:``) across real git commits, and plan's counting of orphans.

The end-to-end test runs a project, renames a root in a second commit (``git mv`` of its manifest, its
new name, the derivative's input, a ``moved:`` entry), and checks that plan shows a rename and nothing
else, that run renames it keeping id, chain and data, and that the derivative's next run reads on from
where it was. The refusals and the orphan counting need no Spark: they are planned and applied
without query validation.
"""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from odfproj.errors import PlanError
from odfproj.odf import model
from odfproj.plan.apply_record import APPLY_RECORD
from odfproj.plan.model import Action, Plan, RenameDataset
from odfproj.plan.planfile import plan_from_data, plan_to_data
from odfproj.plan.renames import plan_renames
from odfproj.plan.render import render_markdown, render_text
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.plan.workspace_state import load_workspace_state
from odfproj.project.config import WORKSPACE_ENV, load_project
from odfproj.project.moves import Move
from odfproj.run.apply import StalePlanError, apply_plan
from odfproj.run.destroy import DestroyError, destroy_plan
from odfproj.storage.workspace import Workspace
from tests import manifests
from tests.cli_inprocess import cli_in
from tests.storage.helpers.chains import snapshot

APPLY_RECORD_FILE = f"info/{APPLY_RECORD}"
ORDERS, SALES, BIG = "com.example.orders", "com.example.sales", "com.example.big"


def _root(name: str, folder: str = "orders") -> str:
    return manifests.root(
        name, path=f"data/{folder}/*.csv", schema=("id BIGINT", "value DOUBLE"), merge=manifests.ledger("id")
    )


def _big(input_name: str) -> str:
    return manifests.derivative(
        BIG, {"orders": input_name}, "SELECT event_time, id, value FROM orders WHERE value > 10"
    )


class Repo:
    """A project in a git repository: write files, commit, plan and apply as the CLI does."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "datasets").mkdir(parents=True)
        (root / "data" / "orders").mkdir(parents=True)
        (root / ".gitignore").write_text(".odf/\n")
        self.write("odfproj.yaml", "name: renames\n")
        self.write(f"datasets/{ORDERS}.yaml", _root(ORDERS))
        self.write(f"datasets/{BIG}.yaml", _big(ORDERS))
        self.write("data/orders/1.csv", "id,value\n1,5\n2,50\n")
        self.repo = git.Repo.init(root)
        with self.repo.config_writer() as cw:
            cw.set_value("user", "name", "test").set_value("user", "email", "t@example.com")
        self.commit("a project")

    def write(self, rel: str, text: str) -> None:
        (self.root / rel).write_text(text)

    def commit(self, message: str) -> None:
        self.repo.git.add(A=True)
        self.repo.index.commit(message)

    def rename_orders(self, *, moved: bool = True, reader: str = SALES) -> None:
        """The user's edit: ``git mv`` the manifest, change its name, point the reader at it, declare it."""
        self.repo.git.mv(f"datasets/{ORDERS}.yaml", f"datasets/{SALES}.yaml")
        self.write(f"datasets/{SALES}.yaml", _root(SALES))
        self.write(f"datasets/{BIG}.yaml", _big(reader))
        if moved:
            self.write("odfproj.yaml", f"name: renames\nmoved:\n  - from: {ORDERS}\n    to: {SALES}\n")
        self.commit(f"rename {ORDERS} to {SALES}")

    @property
    def workspace(self) -> Workspace:
        return Workspace(load_project(self.root).workspace())

    def plan(self) -> Plan:
        return plan_project(load_project(self.root), PlanRequest())[0]

    def apply(self, plan: Plan | None = None):
        workspace = self.workspace
        with workspace.lock():
            return apply_plan(plan or self.plan(), workspace)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    return Repo(tmp_path / "proj")


@pytest.fixture
def applied(repo: Repo) -> Repo:
    repo.apply()
    return repo


@pytest.mark.spark
def test_a_rename_across_commits_keeps_identity_chain_and_data(
    repo: Repo, spark, monkeypatch: pytest.MonkeyPatch
) -> None:
    odfproj = cli_in(spark, monkeypatch, lambda: repo.root)
    code, out = odfproj("run")
    assert code == 0, out
    before = repo.workspace.open(ORDERS)
    orders_id, orders_head = before.dataset_id, before.head()
    big = repo.workspace.open(BIG).projection()
    assert big.last_offset == 0  # one order over 10

    repo.rename_orders()
    moves = [line for line in repo.repo.git.show("-M", "--name-status", "--format=").splitlines()]
    assert any(
        line.startswith("R") and line.endswith(f"datasets/{ORDERS}.yaml\tdatasets/{SALES}.yaml")
        for line in moves
    ), moves  # git itself sees the manifest's move as a rename
    code, out = odfproj("plan", "--detailed-exitcode")
    assert code == 2, out
    assert f"~ {ORDERS} -> {SALES}  (odfproj.yaml, datasets/{SALES}.yaml)  # rename" in out
    assert f"keeps its id {orders_id.as_did_str()}" in out
    assert "Plan: 0 to create, 0 to update, 1 to rename, 2 unchanged, 0 refused." in out
    assert "without a manifest" not in out  # the rename consumed the would-be orphan
    code, out = odfproj("plan", "--format", "json")
    data = json.loads(out)
    assert data["counts"]["rename"] == 1 and data["counts"]["orphan"] == 0
    assert data["steps"][0] == {
        "step": "rename",
        "source": ORDERS,
        "dataset": SALES,
        "declared_in": "odfproj.yaml",
        "manifest": f"datasets/{SALES}.yaml",
        "dataset_id": orders_id.as_did_str(),
        "expected_head": orders_head.to_multibase(),
        "reasons": [],
    }

    files = snapshot(repo.workspace.open(ORDERS).path)
    assert any(f.startswith("info/") and "index" in f for f in files), sorted(files)  # the state index
    code, out = odfproj("apply", "--auto-approve")
    assert code == 0, out
    assert f"~ {ORDERS} -> {SALES}: renamed (same id, chain and data)" in out
    assert "Apply complete: 1 renamed, 0 created, 0 updated, 0 block(s) appended." in out
    moved = snapshot(repo.workspace.open(SALES).path)
    # Apply re-records where it left the chain, now under the new manifest (drift is judged from it).
    assert json.loads(moved.pop(APPLY_RECORD_FILE))["manifest"] == f"datasets/{SALES}.yaml"
    files.pop(APPLY_RECORD_FILE)
    assert moved == files  # chain, data, checkpoints, caches and state index, byte for byte

    repo.write("data/orders/2.csv", "id,value\n3,70\n")
    repo.commit("new orders")
    code, out = odfproj("run")
    assert code == 0, out
    workspace = repo.workspace
    assert workspace.list_datasets() == [BIG, SALES]
    sales = workspace.open(SALES)
    assert sales.dataset_id == orders_id  # same identity, same key, and the old chain is its past
    blocks = [h for h, _ in sales.iter_blocks()]
    assert orders_head in blocks and sales.projection().last_offset == 2
    assert workspace.key_path(orders_id).is_file() and workspace.recorded_id(SALES) == orders_id
    assert workspace.recorded_id(ORDERS) is None
    # The derivative read on by id: only the new order, appended after its earlier output.
    after = workspace.open(BIG).projection()
    assert after.dataset_id == big.dataset_id and after.last_offset == 1
    code, out = odfproj("query", BIG)
    assert code == 0 and "70" in out, out
    code, out = odfproj("verify", "--integrity")
    assert code == 0, out
    # Kept after it is applied, the entry plans to nothing.
    code, out = odfproj("plan", "--detailed-exitcode")
    assert code == 0, out
    assert "No changes." in out


def test_a_rename_with_a_compatible_change_renames_then_appends(applied: Repo) -> None:
    orders_id = applied.workspace.open(ORDERS).dataset_id
    applied.rename_orders()
    applied.write(f"datasets/{SALES}.yaml", _root(SALES) + "    - kind: SetInfo\n      description: Sales\n")
    applied.commit("describe sales")
    plan = applied.plan()
    assert [(r.source, r.dataset, r.refused) for r in plan.renames] == [(ORDERS, SALES, False)]
    assert {s.dataset: s.action for s in plan.definitions} == {SALES: Action.UPDATE, BIG: Action.UNCHANGED}
    result = applied.apply(plan)
    assert result.renamed == ((ORDERS, SALES),)
    assert result.summary() == "Apply complete: 1 renamed, 0 created, 1 updated, 1 block(s) appended."
    sales = applied.workspace.open(SALES).projection()
    assert sales.dataset_id == orders_id and sales.set_info is not None


def _refusal(plan: Plan) -> str:
    (rename,) = plan.renames
    assert rename.refused and plan.has_refusals
    assert len(rename.reasons) == 1 and "\n" not in rename.reasons[0]
    return rename.reasons[0]


def test_a_taken_target_is_refused(applied: Repo) -> None:
    applied.workspace.create(SALES, applied.workspace.open(ORDERS).kind)
    applied.rename_orders()
    reason = _refusal(applied.plan())
    assert reason.startswith(
        f"odfproj.yaml: moved {ORDERS} -> {SALES}: {SALES} already exists in the workspace"
    )


def test_a_source_that_is_not_in_the_workspace_is_refused(applied: Repo) -> None:
    applied.rename_orders()
    applied.write("odfproj.yaml", f"name: renames\nmoved:\n  - from: com.example.ordres\n    to: {SALES}\n")
    applied.commit("a typo")
    plan = applied.plan()
    reason = _refusal(plan)
    assert reason == (
        f"odfproj.yaml: moved com.example.ordres -> {SALES}: no dataset com.example.ordres in the workspace "
        f"(did you mean {ORDERS}?): fix 'from', or remove the entry"
    )
    with pytest.raises(PlanError, match="the plan has refused changes; nothing was applied"):
        applied.apply(plan)
    assert applied.workspace.list_datasets() == [BIG, ORDERS]


def test_a_narrowed_plan_renames_what_it_selects_or_reads(applied: Repo) -> None:
    applied.rename_orders()
    config = load_project(applied.root)
    for select in (SALES, BIG):  # the renamed dataset, or a reader of it (its input must be found)
        plan = plan_project(config, PlanRequest(select=(select,)))[0]
        assert [r.dataset for r in plan.renames] == [SALES], select
        assert not plan.has_refusals and not plan.count(Action.CREATE), select
    applied.write("datasets/other.yaml", _root("com.example.other", folder="other"))
    applied.commit("an unrelated root")
    plan = plan_project(config, PlanRequest(select=("com.example.other",)))[0]
    assert plan.renames == () and [s.dataset for s in plan.definitions] == ["com.example.other"]


def test_in_a_new_workspace_an_entry_is_history_and_the_dataset_is_created(repo: Repo) -> None:
    repo.rename_orders()
    plan = repo.plan()
    assert plan.renames == () and {s.action for s in plan.definitions} == {Action.CREATE}


def test_a_manifest_still_defining_the_old_name_is_refused(applied: Repo) -> None:
    applied.write("odfproj.yaml", f"name: renames\nmoved:\n  - from: {ORDERS}\n    to: {SALES}\n")
    applied.commit("declared, but the manifest was not renamed")
    plan = applied.plan()
    (rename,) = plan.renames
    assert rename.reasons == (
        f"odfproj.yaml: moved {ORDERS} -> {SALES}: datasets/{ORDERS}.yaml still defines {ORDERS}: "
        f"rename its name to {SALES}",
        f"odfproj.yaml: moved {ORDERS} -> {SALES}: no manifest defines {SALES}",
    )


def test_a_rename_with_an_incompatible_change_is_refused_naming_both_files(applied: Repo) -> None:
    applied.rename_orders()
    (applied.root / "datasets" / f"{BIG}.yaml").unlink()  # so that sales may read big without a cycle
    applied.write(f"datasets/{SALES}.yaml", manifests.derivative(SALES, {"o": BIG}, "SELECT * FROM o"))
    applied.commit("sales becomes a derivative")
    plan = applied.plan()
    steps = {s.dataset: s for s in plan.definitions}
    assert steps[SALES].action is Action.REFUSED
    assert "a dataset cannot change kind" in steps[SALES].reasons[0]
    reason = _refusal(plan)
    assert reason.startswith(
        f"odfproj.yaml: moved {ORDERS} -> {SALES}: refused with the change datasets/{SALES}.yaml makes: "
        "dataset kind changes from Root to Derivative"
    )


def test_a_reader_still_naming_the_old_name_is_refused(applied: Repo) -> None:
    applied.rename_orders(reader=ORDERS)
    plan = applied.plan()
    assert not any(r.refused for r in plan.renames)
    (big,) = [s for s in plan.definitions if s.dataset == BIG]
    assert big.action is Action.REFUSED
    assert big.reasons == (
        f"input {ORDERS!r} is renamed to {SALES!r} (odfproj.yaml moved): name it {SALES!r} "
        "(same id: nothing is recomputed)",
    )


def test_a_plan_saved_before_someone_else_renamed_is_stale(applied: Repo) -> None:
    applied.rename_orders()
    plan = applied.plan()
    applied.workspace.create(SALES, applied.workspace.open(ORDERS).kind)
    with pytest.raises(StalePlanError, match=f"dataset {SALES} was created since the plan was made"):
        applied.apply(plan)
    assert applied.workspace.exists(ORDERS)


def test_a_plan_whose_source_moved_since_is_stale(applied: Repo) -> None:
    applied.rename_orders()
    plan = plan_project(load_project(applied.root), PlanRequest(select=(BIG,)))[0]
    assert [r.dataset for r in plan.renames] == [SALES] and SALES not in {s.dataset for s in plan.definitions}
    applied.workspace.open(ORDERS).append([model.SetInfo(description="appended meanwhile")])
    with pytest.raises(
        StalePlanError, match=f"dataset {ORDERS} \\(to be renamed to {SALES}\\) changed since"
    ):
        applied.apply(plan)
    assert applied.workspace.list_datasets() == [BIG, ORDERS]


def test_the_plan_file_round_trips_and_renders_the_rename(applied: Repo) -> None:
    applied.rename_orders()
    plan = applied.plan()
    assert plan_from_data(json.loads(json.dumps(plan_to_data(plan)))) == plan
    assert isinstance(plan.steps[0], RenameDataset)
    markdown = render_markdown(plan)
    assert f"| `~` | `{ORDERS} -> {SALES}` | rename | `odfproj.yaml` | - |" in markdown
    assert "**Plan: 0 to create, 0 to update, 1 to rename, 2 unchanged, 0 refused.**" in markdown


def test_a_deleted_manifest_is_counted_as_a_change_to_act_on(applied: Repo) -> None:
    (applied.root / "datasets" / f"{BIG}.yaml").unlink()
    applied.commit("drop big")
    plan = applied.plan()
    assert plan.needs_action and not plan.has_changes  # apply has nothing to write; destroy does
    assert plan.summary() == (
        "Plan: 0 to create, 0 to update, 1 unchanged, 0 refused, "
        "1 without a manifest (to destroy: odfproj destroy --orphans)."
    )
    assert plan_to_data(plan)["counts"]["orphan"] == 1
    assert f"? {BIG} [Derivative]" in render_text(plan)


def test_a_rename_in_a_remote_workspace_is_refused(applied: Repo) -> None:
    state = load_workspace_state(applied.workspace.root)
    planned = plan_renames(
        [Move(ORDERS, SALES)],
        state.views,
        {n.lower(): n for n in state.names},
        {SALES: f"datasets/{SALES}.yaml", BIG: f"datasets/{BIG}.yaml"},
        workspace_empty=False,
        remote="s3://bucket/shop",
    )
    (step,) = planned.steps
    assert step.reasons == (
        f"odfproj.yaml: moved {ORDERS} -> {SALES}: renames in a remote workspace (s3://bucket/shop) are not supported yet",
    )
    assert planned.views == state.views  # a refused rename renames nothing for the rest of the plan


def test_destroy_orphans_leaves_a_dataset_that_is_to_be_renamed(applied: Repo) -> None:
    applied.rename_orders()
    with pytest.raises(DestroyError, match="nothing to destroy"):
        destroy_plan(load_project(applied.root), orphans=True)
    applied.write("odfproj.yaml", "name: renames\n")  # undeclared: now it is an orphan
    (doomed,) = destroy_plan(load_project(applied.root), orphans=True).datasets
    assert (doomed.name, doomed.orphan) == (ORDERS, True)
