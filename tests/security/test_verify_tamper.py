"""verify catches a swapped dataset folder and a rolled-back input (issue 13 point 6); transforms refuse the latter.

Each chain involved is whole and valid on its own, so ``verify_dataset`` alone sees nothing: only the
workspace's record of names, ids and keys, and the input blocks a derivative recorded, reveal them.
No Spark: the derivative's ExecuteTransform is committed by hand, and the coordinator refuses the
rollback before it asks for a session.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.spark import SparkEngine
from odfproj.odf import model
from odfproj.storage.verify import Verification, check_in_workspace, verify_dataset, verify_in_workspace
from odfproj.storage.workspace import Workspace
from odfproj.transform.coordinator import plan_inputs, update_derivative
from odfproj.transform.errors import TransformError
from tests.cli_inprocess import run_main_split
from tests.transform.helpers import T0, add_records, create_derivative, create_root, hours, schema_with

REPO = Path(__file__).resolve().parents[2]
SCHEMA = schema_with(("city", pa.string()), ("amount", pa.int64()))


def _consume(ws: Workspace, name: str) -> None:
    """Commit a data-less ExecuteTransform recording the inputs' current heads as consumed."""
    derivative = ws.open(name)
    p = derivative.projection()
    slices = plan_inputs(ws, derivative)
    marks = [s.projection.watermark for s in slices]
    event = model.ExecuteTransform(
        query_inputs=tuple(s.query_input for s in slices),
        prev_offset=p.last_offset,
        new_watermark=min(marks) if all(marks) else None,  # type: ignore[type-var]
    )
    derivative.append([event], expected_head=p.head, system_time=T0 + timedelta(hours=1))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """orders: two data slices then a data-less block; spent: consumed all of it; other: a second root."""
    ws = Workspace(tmp_path / "ws")
    orders = create_root(ws, "orders", SCHEMA)
    add_records(orders, tmp_path / "scratch", [(0, 1, "paris", 5)], T0, watermark=1)
    add_records(orders, tmp_path / "scratch", [(0, 2, "lyon", 7)], T0, watermark=2)
    orders.append([model.SetInfo(description="orders")], system_time=T0)  # no data: offsets stay
    create_derivative(ws, "spent", {"orders": orders}, (None, "SELECT event_time, city, amount FROM orders"))
    _consume(ws, "spent")
    create_root(ws, "other", SCHEMA)
    return ws


def _all_problems(ws: Workspace) -> dict[str, list[str]]:
    return {name: [str(p) for p in verify_in_workspace(ws, ws.open(name))] for name in ws.list_datasets()}


def test_an_untouched_workspace_verifies_clean(ws: Workspace) -> None:
    assert _all_problems(ws) == {"orders": [], "other": [], "spent": []}


def test_folder_replaced_by_another_datasets_chain(ws: Workspace) -> None:
    victim = ws.open("other").path
    shutil.rmtree(victim)
    shutil.copytree(ws.open("orders").path, victim)
    swapped = ws.open("other")
    assert verify_dataset(swapped) == []  # the chain itself is whole
    [problem] = _all_problems(ws)["other"]
    assert "Seed id" in problem and "the id of dataset 'orders'" in problem
    assert "another dataset's chain" in problem and "\n" not in problem


def test_folder_replaced_by_a_chain_from_another_workspace(ws: Workspace, tmp_path: Path) -> None:
    stranger = create_root(Workspace(tmp_path / "elsewhere"), "other", SCHEMA)
    victim = ws.open("other").path
    shutil.rmtree(victim)
    shutil.copytree(stranger.path, victim)
    problems = _all_problems(ws)["other"]
    assert any("an id this workspace never created" in p for p in problems), problems
    assert any(
        p.endswith(f"missing: no private key for dataset 'other' (Seed id {stranger.dataset_id})")
        for p in problems
    )


def test_input_head_rolled_back_below_a_consumed_block(ws: Workspace) -> None:
    orders = ws.open("orders")
    consumed = orders.head()
    assert consumed is not None
    before = orders.get_block(consumed).prev_block_hash
    assert before is not None
    orders.layout.head_ref.write_text(before.to_multibase())  # the tampering: refs/head one block back
    assert verify_dataset(ws.open("orders")) == []  # a shorter chain is still a valid chain

    [problem] = _all_problems(ws)["spent"]
    assert "input 'orders'" in problem and "'spent'" in problem and str(consumed) in problem
    assert "rolled back" in problem

    # The transform refuses instead of reporting "no new input data" (before any Spark work).
    engine = SparkEngine(SparkSessionHolder(SparkSettings()))
    with pytest.raises(TransformError, match=rf"no longer contains block {consumed}") as e:
        update_derivative(ws, "spent", engine, T0 + timedelta(hours=2))
    assert "spent" in str(e.value) and "orders" in str(e.value) and "\n" not in str(e.value)


def test_an_input_that_grew_still_verifies_clean(ws: Workspace, tmp_path: Path) -> None:
    add_records(ws.open("orders"), tmp_path / "scratch", [(0, 3, "rome", 9)], T0, watermark=3)
    assert _all_problems(ws)["spent"] == []  # the consumed blocks are still in the longer chain


def test_recorded_offset_that_the_input_does_not_have_at_that_block(ws: Workspace) -> None:
    orders = ws.open("orders")
    create_derivative(ws, "liar", {"orders": orders}, (None, "SELECT event_time, city FROM orders"))
    liar = ws.open("liar")
    p = liar.projection()
    [honest] = plan_inputs(ws, liar)
    assert honest.query_input.new_offset == 1
    bogus = replace(honest.query_input, new_offset=7)
    event = model.ExecuteTransform(query_inputs=(bogus,), prev_offset=p.last_offset, new_watermark=hours(2))
    liar.append([event], expected_head=p.head, system_time=T0 + timedelta(hours=1))
    [problem] = _all_problems(ws)["liar"]
    assert "recorded input 'orders' up to offset 7" in problem and "ends at offset 1 there" in problem


def test_verify_command_reports_the_rollback(ws: Workspace) -> None:
    orders = ws.open("orders")
    consumed = orders.head()
    assert consumed is not None
    orders.layout.head_ref.write_text(str(orders.get_block(consumed).prev_block_hash.to_multibase()))  # type: ignore[union-attr]
    with contextlib.chdir(REPO):  # the command through its real entry point, in-process (no Spark needed)
        code, stdout, stderr = run_main_split("verify", "--workspace", str(ws.root))
    assert code == 1, stdout + stderr
    assert str(consumed) in stdout and "'spent'" in stdout
    assert "Traceback" not in stderr


# --- after a successful check: the next one continues from its record (issue 36) -----------------------


def _checked(ws: Workspace, name: str) -> Verification:
    return check_in_workspace(ws, ws.open(name), full=False)


def test_a_rollback_after_a_successful_check_is_caught_by_the_next_one(ws: Workspace) -> None:
    """The record keeps each input's head: one no longer in the input's chain re-checks every consumed block."""
    assert [_checked(ws, name).problems for name in ("orders", "spent")] == [(), ()]
    orders = ws.open("orders")
    consumed = orders.head()
    assert consumed is not None
    orders.layout.head_ref.write_text(str(orders.get_block(consumed).prev_block_hash.to_multibase()))  # type: ignore[union-attr]

    result = _checked(ws, "spent")

    assert not result.full and result.checked == 0  # spent's own chain did not change
    [problem] = result.problems
    assert (
        "input 'orders'" in str(problem) and str(consumed) in str(problem) and "rolled back" in str(problem)
    )


def test_a_folder_swap_after_a_successful_check_is_caught_by_the_next_one(ws: Workspace) -> None:
    """The identity checks run every time: a copied folder brings its own record along, at its own head."""
    assert [_checked(ws, name).problems for name in ws.list_datasets()] == [(), (), ()]
    victim = ws.open("other").path
    shutil.rmtree(victim)
    shutil.copytree(ws.open("orders").path, victim)
    result = _checked(ws, "other")
    assert not result.full
    [problem] = result.problems
    assert "the id of dataset 'orders'" in str(problem) and "another dataset's chain" in str(problem)


def test_a_derivative_check_reads_only_the_new_blocks_of_it_and_its_inputs(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _checked(ws, "spent").full
    orders = ws.open("orders")
    old_orders = [h for h, _ in orders.iter_blocks()]
    old_spent_head = ws.open("spent").head()
    add_records(orders, tmp_path / "scratch", [(0, 3, "rome", 9)], T0, watermark=3)
    _consume(ws, "spent")
    reads: list[Path] = []
    original = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.parent.name == "blocks":
            reads.append(self)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    result = _checked(ws, "spent")

    assert result.problems == () and not result.full and result.checked == 1
    spent = ws.open("spent")
    assert {p for p in reads if p.parent == spent.layout.blocks_dir} == {
        spent.layout.block_path(spent.head()),  # type: ignore[arg-type]
        spent.layout.block_path(old_spent_head),  # type: ignore[arg-type]
    }
    # orders: its new block, the head consumed before (the new block's prevBlockHash) and the data
    # block under it that gives its offset; never its Seed or first slice.
    read_orders = {p.name for p in reads if p.parent == orders.layout.blocks_dir}
    assert read_orders == {orders.head().to_multibase(), *(h.to_multibase() for h in old_orders[:2])}  # type: ignore[union-attr]


def test_a_tamper_after_a_successful_check_needs_full(ws: Workspace) -> None:
    """An input's old block rewritten after a check is not re-read by the next check; ``full`` finds it."""
    assert _checked(ws, "orders").problems == ()
    orders = ws.open("orders")
    seed_path = orders.layout.block_path([h for h, _ in orders.iter_blocks()][-1])
    seed_path.write_bytes(seed_path.read_bytes() + b"\0")
    assert _checked(ws, "orders").problems == ()
    [problem] = check_in_workspace(ws, ws.open("orders"), full=True).problems
    assert problem.path == seed_path and "not to its file name" in problem.message
