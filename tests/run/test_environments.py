"""Preview environments end to end on bench_dag's 50 datasets: build a change beside production, diff it,
publish it, and compare with applying the same change to production directly. Real Spark, real files."""

from __future__ import annotations

import hashlib
import re
import shutil
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.bench_dag import Project, generate
from odfproj.odf import model
from odfproj.plan.sources import PlanRequest
from odfproj.project.config import ProjectConfig, load_project
from odfproj.run import run as run_module
from odfproj.run.data_diff import diff_datasets
from odfproj.run.environments import (
    ensure_environment,
    planned_config,
    publish,
    refresh,
)
from odfproj.run.recompute import recompute_on_production
from odfproj.run.run import run_project
from odfproj.run.verify import verify_datasets
from odfproj.storage.workspace import Workspace
from tests.spark_helpers import RecordingHolder

pytestmark = pytest.mark.spark

#: bench_dag's shape: 10 roots, 40 derivatives in layers of 10. Rows are few: the suite's budget.
ROOTS, DERIVATIVES, LAYER, ROWS, SEED = 10, 40, 10, 60, 7
#: A filter derivative of layer 2 (bench_dag makes every third derivative a filter).
CHANGED = "org.bench.derived-12"


def production_files(root: Path) -> dict[str, str]:
    """Every file of the workspace outside ``envs/`` (and its lock files) by content hash."""
    out = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if (
            path.is_file()
            and relative.parts[0] != "envs"
            and path.name != ".lock"
            and relative.parts[0] != "logs"
        ):
            out[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def downstream(project: Project, name: str) -> set[str]:
    found = {name}
    for node in project.nodes:  # topological order: one pass finds every reader
        if found & set(node.inputs):
            found.add(node.name)
    return found


def change_threshold(project_root: Path) -> tuple[int, int]:
    """Raise the changed filter's ``qty >`` threshold to the median ``qty`` of its output in production, so
    that about half of its rows go; returns (old, new)."""
    path = project_root / "datasets" / f"{CHANGED}.yaml"
    text = path.read_text()
    match = re.search(r"qty > (\d+)", text)
    assert match is not None
    old = int(match.group(1))
    output = project_root / ".odf" / "datasets" / CHANGED / "data"
    quantities = sorted(pq.read_table(list(output.iterdir()), columns=["qty"]).column("qty").to_pylist())
    new = quantities[len(quantities) // 2]
    assert new > old
    path.write_text(text.replace(f"qty > {old}", f"qty > {new}"))
    return old, new


def runner(spark, executed: set[str] | None = None):
    def run(config: ProjectConfig, **options: object):
        holder = RecordingHolder(spark)
        return run_project(config, PlanRequest(), holder=holder, **options)  # type: ignore[arg-type]

    return run


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> tuple[Project, Path]:
    """The project, run once on production (shared by the tests of this module: it is the costly part)."""
    root = tmp_path_factory.mktemp("envs") / "project"
    project = generate(root, ROOTS, DERIVATIVES, LAYER, ROWS, SEED)
    assert [n.kind for n in project.nodes if n.name == CHANGED] == ["filter"]
    result = runner(spark)(load_project(root))
    assert result.ok, [r.message for r in result.results if r.message]
    return project, root


@pytest.fixture
def project(built, tmp_path) -> tuple[Project, Path]:
    """A copy of the built project and its production workspace, for one test to change."""
    template_project, template = built
    copy = tmp_path / "project"
    shutil.copytree(template, copy, symlinks=True)
    return Project(copy, template_project.nodes), copy


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    names: set[str] = set()
    real = run_module._StepRunner._execute

    def execute(runner_: run_module._StepRunner, step: run_module.DataStep):
        names.add(step.dataset)
        return real(runner_, step)

    monkeypatch.setattr(run_module._StepRunner, "_execute", execute)
    return names


def test_a_change_builds_only_itself_and_its_downstream_and_leaves_production_byte_identical(
    spark, engine, project, executed
) -> None:
    dag, root = project
    production = root / ".odf"
    before = production_files(production)
    old, new = change_threshold(root)
    config = load_project(root).in_environment("pr-1")
    result = runner(spark)(config)
    assert result.ok
    expected = downstream(dag, CHANGED)
    assert executed == expected  # nothing else is computed: the rest is read from production
    assert {r.dataset for r in result.results} == expected
    assert production_files(production) == before

    env = Workspace(config.workspace())
    record = env.environment
    assert record is not None and set(record.changed()) == expected
    own = [p for p in env.root.glob("datasets/*/*/*") if p.parent.name in ("blocks", "data", "checkpoints")]
    assert {p.parts[-3] for p in own} <= expected  # only the changed part holds objects of its own
    for path in own:  # and each of them is new: production has no object of that name
        assert not (production / "datasets" / path.parts[-3] / path.parent.name / path.name).exists()
    for folder in env.datasets_dir.iterdir():  # a pinned dataset's folder lists its head, nothing more:
        if folder.name not in expected:  # production's records at that head (apply, data index) are its own
            files = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
            assert [f for f in files if f != ".lock"] == ["refs/head"], folder.name

    # The diff names exactly the rows the new threshold drops, computed here from the old output.
    [diff] = diff_datasets(engine, env, [CHANGED], base=Workspace(production), sample=1000)
    assert diff.diff is not None
    old_rows = pq.read_table([p for p in (production / "datasets" / CHANGED / "data").iterdir()]).to_pylist()
    dropped = Counter((r["id"], r["qty"], r["amount"]) for r in old_rows if old < r["qty"] <= new)
    assert (diff.diff.added, diff.diff.changed) == (0, 0)
    assert diff.diff.removed == sum(dropped.values()) > 0
    sample = Counter((r["id"], r["qty"], r["amount"]) for r in diff.diff.removed_sample)
    assert sample == dropped


def test_publish_equals_applying_the_change_on_production(spark, engine, project) -> None:
    dag, root = project
    direct = root.parent / "direct"
    shutil.copytree(root, direct, symlinks=True)  # production as it is, to apply the change directly
    change_threshold(root)
    change_threshold(direct)
    config = load_project(root).in_environment("pr-1")
    # The records carry it, so it is the same in both runs; after every block the applies write (at the
    # clock's time), since a chain's system time never goes backwards.
    moment = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    assert runner(spark)(config, system_time=moment).ok
    outcomes = publish(config, None, "pr-1")
    assert {o.status for o in outcomes} == {"published"}
    assert {o.dataset for o in outcomes} == downstream(dag, CHANGED)
    assert runner(spark)(load_project(direct), system_time=moment).ok

    published, applied = Workspace(root / ".odf"), Workspace(direct / ".odf")
    for name in dag.names:
        assert logical_history(published, name) == logical_history(applied, name), name
    changed = sorted(downstream(dag, CHANGED))
    results = list(verify_datasets(published, changed, integrity=True, engine=engine))
    assert [(r.dataset, r.problems) for r in results] == [(n, ()) for n in changed]
    assert all(r.reproduced for r in results)  # every transform re-run from its recorded inputs matched
    # Production is the environment's, byte for byte: same heads, and nothing is left to publish.
    env = Workspace(config.workspace())
    assert all(env.open(n).head() == published.open(n).head() for n in changed)
    assert publish(config, None, "pr-1") == []


def test_two_environments_at_once_and_publish_refuses_where_production_moved(spark, project) -> None:
    dag, root = project
    original = (root / "datasets" / f"{CHANGED}.yaml").read_text()
    change_threshold(root)
    changed = (root / "datasets" / f"{CHANGED}.yaml").read_text()
    first = load_project(root).in_environment("pr-1")
    assert runner(spark)(first).ok
    pr1 = Workspace(first.workspace())
    heads = {n: pr1.open(n).head() for n in downstream(dag, CHANGED)}

    # Another change in a second environment at the same time: neither sees the other's chains.
    (root / "datasets" / f"{CHANGED}.yaml").write_text(original)
    other = "org.bench.derived-15"
    path = root / "datasets" / f"{other}.yaml"
    other_original = path.read_text()
    path.write_text(re.sub(r"qty > (\d+)", lambda m: f"qty > {int(m.group(1)) + 1}", path.read_text()))
    second = load_project(root).in_environment("pr-2")
    assert runner(spark)(second).ok
    pr2 = Workspace(second.workspace())
    assert pr2.environment is not None and set(pr2.environment.changed()) == downstream(dag, other)
    assert {n: pr1.open(n).head() for n in heads} == heads
    production = Workspace(root / ".odf")
    for name in downstream(dag, CHANGED) - downstream(dag, other):
        assert pr2.open(name).head() == production.open(name).head()

    # Production moves (the same change applied and run there directly): publish refuses it all.
    (root / "datasets" / f"{CHANGED}.yaml").write_text(changed)
    path.write_text(other_original)
    assert runner(spark)(load_project(root)).ok
    before = production_files(root / ".odf")
    outcomes = publish(first, None, "pr-1")
    assert {o.dataset: o.status for o in outcomes} == {n: "refused" for n in downstream(dag, CHANGED)}
    assert all(o.reason and ("refresh" in o.reason or "was refused" in o.reason) for o in outcomes)
    assert production_files(root / ".odf") == before

    # Refresh resets each of them to production's head: nothing is left to publish.
    _, reset = refresh(first, None, "pr-1")
    assert set(reset) == downstream(dag, CHANGED)
    assert publish(first, None, "pr-1") == []


def test_recompute_applies_and_runs_on_production_what_publish_refused(spark, project) -> None:
    dag, root = project
    new = change_threshold(root)[1]
    config = load_project(root).in_environment("pr-1")
    assert runner(spark)(config).ok
    # Production moves under the changed dataset: new data in a root it reads, run there without the change.
    upstream = _upstream(dag, CHANGED)
    source = next(n for n in dag.nodes if n.name in upstream and not n.inputs)
    folder = root / "data" / source.name.removeprefix("org.bench.")
    header, *rows = (folder / "part-00.csv").read_text().splitlines()
    fresh = [",".join([r.split(",")[0], str(900_000 + i), *r.split(",")[2:]]) for i, r in enumerate(rows[:3])]
    (folder / "part-09.csv").write_text("\n".join([header, *fresh]) + "\n")  # new ids: new records
    request = PlanRequest(select=tuple(sorted(upstream)))
    assert run_project(load_project(root), request, holder=RecordingHolder(spark)).ok
    outcomes = publish(config, None, "pr-1")
    refused = [o.dataset for o in outcomes if o.status == "refused"]
    assert set(refused) == downstream(dag, CHANGED)
    assert "moved in production since the environment consumed it" in (outcomes[0].reason or "")
    recomputed = recompute_on_production(config, None, refused, holder=RecordingHolder(spark))
    assert recomputed.ok and {r.dataset for r in recomputed.results} == downstream(dag, CHANGED)
    transform = Workspace(root / ".odf").open(CHANGED).projection().set_transform
    assert transform is not None and f"qty > {new}" in repr(transform.transform)  # the change, applied there


def _upstream(dag: Project, name: str) -> set[str]:
    found: set[str] = set()
    frontier = list(_inputs(dag, name))
    while frontier:
        current = frontier.pop()
        if current not in found:
            found.add(current)
            frontier.extend(_inputs(dag, current))
    return found


def test_plan_of_a_new_environment_is_productions_and_writes_nothing(project) -> None:
    _, root = project
    config = load_project(root).in_environment("pr-9")
    planned, note = planned_config(config, None)
    assert planned.environment is None and note is not None and "does not exist yet" in note
    assert not (root / ".odf" / "envs" / "pr-9").exists()
    ensure_environment(config, None)
    assert (root / ".odf" / "envs" / "pr-9" / "env.json").is_file()


def _inputs(dag: Project, name: str) -> tuple[str, ...]:
    return next(n.inputs for n in dag.nodes if n.name == name)


def logical_history(workspace: Workspace, name: str) -> list[tuple[str, int]]:
    """The logical hash and record count of each data slice, oldest first: what the data is."""
    out = []
    for _, block in workspace.open(name).iter_blocks():
        event = block.event
        if isinstance(event, model.AddData | model.ExecuteTransform) and event.new_data is not None:
            data = event.new_data
            out.append(
                (data.logical_hash.to_multibase(), data.offset_interval.end - data.offset_interval.start)
            )
    return out[::-1]
