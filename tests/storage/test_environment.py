"""Preview environments at the storage layer: pins, forks, publish, refresh and destroy on real folders."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odfproj.errors import InvalidValueError
from odfproj.odf import model
from odfproj.state.compacted import compacted_copy
from odfproj.state.dataset_index import INDEX_DIR, open_state_index
from odfproj.storage.data_index import data_index
from odfproj.storage.dataset import Dataset
from odfproj.storage.env_record import PreviewEnvironmentError, list_environments
from odfproj.storage.environment import create_environment, destroy_environment, fork, refresh_environment
from odfproj.storage.errors import StorageError
from odfproj.storage.publish import publish_environment
from odfproj.storage.verify import verify_dataset
from odfproj.storage.workspace import Workspace
from odfproj.workspace_paths import environment_root
from tests.storage.helpers.chains import Writer, data_slice, set_schema, set_transform, write_slice

REPO = Path(__file__).resolve().parents[2]
#: The fixture root's one value column, as the key of a state index.
KEY = ("value",)


def production_files(workspace: Workspace) -> dict[str, tuple[int, bytes]]:
    """Every file of production outside ``envs/``, with its inode's link count left out (content only)."""
    out = {}
    for path in sorted(workspace.root.rglob("*")):
        relative = path.relative_to(workspace.root)
        if path.is_file() and relative.parts[0] != "envs" and relative.name != ".lock":
            out[str(relative)] = (path.stat().st_mode, path.read_bytes())
    return out


def env_workspace(workspace: Workspace, name: str = "pr-1") -> Workspace:
    return Workspace(environment_root(workspace.root, name))


def consume(derivative: Dataset, scratch: Path, inputs: dict[Dataset, Dataset], rows: int) -> None:
    """Append an ExecuteTransform of ``derivative`` consuming each input up to its current head."""
    p = derivative.projection()
    start = 0 if p.last_offset is None else p.last_offset + 1
    data_file = write_slice(scratch / f"et-{os.urandom(4).hex()}.parquet", p.arrow_schema, start, rows)
    query_inputs = []
    for upstream in inputs.values():
        up = upstream.projection()
        last = p.inputs.get(up.dataset_id)
        query_inputs.append(
            model.ExecuteTransformInput(
                dataset_id=up.dataset_id,
                prev_block_hash=last.new_block_hash if last else None,
                new_block_hash=up.head,
                prev_offset=last.new_offset if last else None,
                new_offset=up.last_offset,
            )
        )
    event = model.ExecuteTransform(
        query_inputs=tuple(query_inputs),
        prev_offset=p.last_offset,
        new_data=data_slice(data_file, start, rows),
        new_watermark=p.watermark,
    )
    derivative.append([event], expected_head=p.head, data_file=data_file)


@pytest.fixture
def production(workspace: Workspace, scratch: Path) -> Workspace:
    root = workspace.create("root", model.DatasetKind.Root)
    root.append([set_schema()])
    Writer(root, scratch).add_data(5)
    derived = workspace.create("derived", model.DatasetKind.Derivative)
    derived.append([set_transform(root.dataset_id), set_schema()])
    consume(derived, scratch, {root: root}, 5)
    return workspace


def test_a_new_environment_pins_every_dataset_and_copies_nothing(production: Workspace) -> None:
    before = production_files(production)
    record = create_environment(production, "pr-1")
    env = env_workspace(production)
    assert {n: p.state for n, p in record.datasets.items()} == {"derived": "pinned", "root": "pinned"}
    for name in ("root", "derived"):
        pinned = env.open(name)
        assert pinned.head() == production.open(name).head()
        assert pinned.projection() == production.open(name).projection()
        assert verify_dataset(pinned) == []  # every block and slice found through production's folder
    own = [
        p for p in env.root.rglob("*") if p.is_file() and p.parent.name in ("blocks", "data", "checkpoints")
    ]
    assert own == []
    assert production_files(production) == before
    assert [r.name for r in list_environments(production.root)] == ["pr-1"]


def test_a_pinned_dataset_cannot_be_appended_to(production: Workspace, scratch: Path) -> None:
    create_environment(production, "pr-1")
    pinned = env_workspace(production).open("root")
    with pytest.raises(StorageError, match="root: read from production at its pinned head"):
        Writer(pinned, scratch).add_data(1)


def test_a_pinned_dataset_reads_productions_derived_records_in_place(
    production: Workspace, scratch: Path
) -> None:
    """What production keeps at the pinned head (data index, state index, compacted copy) serves the
    environment as it is: nothing rebuilt, nothing written on either side."""
    root = production.open("root")
    index, copy = open_state_index(root, KEY), compacted_copy(root)
    assert copy is not None
    before = production_files(production)
    create_environment(production, "pr-1")
    env = env_workspace(production)
    pinned = env.open("root")
    assert data_index(pinned).head == root.head()
    assert open_state_index(pinned, KEY).head == index.head
    their_copy = compacted_copy(pinned)
    assert their_copy is not None and their_copy.directory == copy.directory
    assert production_files(production) == before
    own = env.datasets_dir / "root"
    assert [p.relative_to(own).as_posix() for p in own.rglob("*") if p.is_file()] == ["refs/head"]


def test_a_pinned_dataset_builds_its_own_records_when_productions_moved_on(
    production: Workspace, scratch: Path
) -> None:
    create_environment(production, "pr-1")
    root = production.open("root")
    pinned_head = root.head()
    Writer(root, scratch).add_data(3)  # production moves on, and its records with it
    open_state_index(root, KEY)
    before = production_files(production)
    pinned = env_workspace(production).open("root")
    index = open_state_index(pinned, KEY)
    assert index.head == pinned_head and index.block_count == pinned.projection().sequence_number + 1
    assert (env_workspace(production).datasets_dir / "root" / "info" / INDEX_DIR).is_dir()
    assert production_files(production) == before


def test_a_forked_dataset_keeps_its_derived_folders_to_itself(production: Workspace) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    fork(env, ["root"])
    assert env.open("root").pinned_info_dirs(INDEX_DIR) == ()
    assert env.open("derived").pinned_info_dirs(INDEX_DIR) != ()


def test_a_fork_writes_only_its_new_objects_and_publish_fast_forwards_production(
    production: Workspace, scratch: Path
) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    assert fork(env, ["root", "derived"]) == ("derived", "root")
    before = production_files(production)
    Writer(env.open("root"), scratch).add_data(3)
    consume(env.open("derived"), scratch, {env.open("root"): env.open("root")}, 3)
    assert production_files(production) == before  # nothing written in production
    own_blocks = sorted(p.name for p in (env.datasets_dir / "root" / "blocks").iterdir())
    assert own_blocks == [env.open("root").head().to_multibase()]
    assert len(list((env.datasets_dir / "root" / "data").iterdir())) == 1

    outcomes = publish_environment(production, env)
    assert [(o.dataset, o.status, o.blocks, o.objects) for o in outcomes] == [
        ("root", "published", 1, 2),
        ("derived", "published", 1, 2),
    ]
    for name in ("root", "derived"):
        published = production.open(name)
        assert published.head() == env.open(name).head()
        assert verify_dataset(published) == []
        assert env.environment.pin(name).state == "pinned"  # type: ignore[union-attr]
    linked = production.datasets_dir / "root" / "blocks" / production.open("root").head().to_multibase()
    assert linked.stat().st_nlink == 2  # the environment's object itself, not a copy
    assert publish_environment(production, env) == []  # nothing left to publish


def test_publish_refuses_a_dataset_production_moved_and_its_downstream(
    production: Workspace, scratch: Path
) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    fork(env, ["root", "derived"])
    Writer(env.open("root"), scratch).add_data(3)
    consume(env.open("derived"), scratch, {env.open("root"): env.open("root")}, 3)
    Writer(production.open("root"), scratch).add_data(1)  # production moves meanwhile
    before = production_files(production)
    outcomes = publish_environment(production, env)
    assert [(o.dataset, o.status) for o in outcomes] == [("root", "refused"), ("derived", "refused")]
    assert "production's head moved since the fork" in (outcomes[0].reason or "")
    assert outcomes[1].reason == "its input root was refused"
    assert production_files(production) == before


def test_publish_refuses_a_derivative_whose_consumed_input_moved(
    production: Workspace, scratch: Path
) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    fork(env, ["derived"])
    consume(env.open("derived"), scratch, {env.open("root"): env.open("root")}, 2)
    Writer(production.open("root"), scratch).add_data(1)
    [outcome] = publish_environment(production, env)
    assert outcome.status == "refused"
    assert "input root moved in production" in (outcome.reason or "")


def test_refresh_repins_and_resets_a_fork_production_moved(production: Workspace, scratch: Path) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    fork(env, ["root"])
    Writer(env.open("root"), scratch).add_data(3)
    Writer(production.open("root"), scratch).add_data(1)
    production.create("newer", model.DatasetKind.Root).append([set_schema()])
    with env.lock():
        record, reset = refresh_environment(production, env)
    assert reset == ("root",)
    assert {n: p.state for n, p in record.datasets.items()} == {
        "derived": "pinned",
        "newer": "pinned",
        "root": "pinned",
    }
    assert env.open("root").head() == production.open("root").head()
    assert not (env.datasets_dir / "root" / "data").exists()


def test_a_dataset_created_in_an_environment_is_created_in_production_on_publish(
    production: Workspace, scratch: Path
) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    made = env.create("fresh", model.DatasetKind.Root)
    made.append([set_schema()])
    Writer(made, scratch).add_data(2)
    assert env.environment.pin("fresh").state == "created"  # type: ignore[union-attr]
    assert not production.exists("fresh")
    [outcome] = publish_environment(production, env)
    assert (outcome.status, outcome.blocks, outcome.objects) == ("created", 3, 4)
    published = production.open("fresh")
    assert published.head() == made.head()
    assert verify_dataset(published) == []
    assert production.recorded_id("fresh") == made.dataset_id
    assert not production.is_received("fresh")
    assert production.key_path(made.dataset_id).is_file()


def test_destroy_removes_only_the_environment(production: Workspace, scratch: Path) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    fork(env, ["root"])
    Writer(env.open("root"), scratch).add_data(3)
    publish_environment(production, env)
    before = production_files(production)
    destroy_environment(production.root, "pr-1")
    assert not env.root.exists()
    assert production_files(production) == before
    assert verify_dataset(production.open("root")) == []
    with pytest.raises(PreviewEnvironmentError, match="environment 'pr-1' does not exist"):
        destroy_environment(production.root, "pr-1")


def test_an_environment_cannot_rename_or_delete_a_production_dataset(production: Workspace) -> None:
    create_environment(production, "pr-1")
    env = env_workspace(production)
    with pytest.raises(PreviewEnvironmentError, match="cannot delete a production dataset"):
        env.delete("root")
    with pytest.raises(PreviewEnvironmentError, match="cannot rename a production dataset"):
        env.rename("root", "other")


@pytest.mark.parametrize("name", ["", "PR-1", "-x", "a/b", "x" * 64])
def test_environment_names_are_checked(production: Workspace, name: str) -> None:
    with pytest.raises(InvalidValueError, match="is not an environment name"):
        create_environment(production, name)


def test_a_publish_killed_at_any_moment_leaves_each_dataset_old_or_published_and_a_rerun_finishes(
    tmp_path: Path,
) -> None:
    """SIGKILL a publish of 24 datasets at random moments, twelve times; a rerun always finishes."""
    template = Workspace(tmp_path / "template")
    scratch = tmp_path / "scratch"
    names = [f"ds-{i:02d}" for i in range(24)]
    for name in names:
        made = template.create(name, model.DatasetKind.Root)
        made.append([set_schema()])
        Writer(made, scratch).add_data(2)
    create_environment(template, "pr-1")
    env = env_workspace(template)
    fork(env, names)
    for name in names:
        for _ in range(3):
            Writer(env.open(name), scratch).add_data(2)
    old = {n: template.open(n).head() for n in names}
    new = {n: env.open(n).head() for n in names}
    rng = random.Random(os.environ.get("ODFPROJ_CRASH_SEED", "7a11"))
    partial = 0
    for round_ in range(12):
        copy = tmp_path / f"round-{round_}"
        shutil.copytree(template.root, copy, symlinks=True)
        production = Workspace(copy)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.storage.helpers.publisher", str(copy), "pr-1"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        heads = {n: production.open(n).head() for n in names}
        assert all(heads[n] in (old[n], new[n]) for n in names), f"round {round_}"
        partial += 0 < sum(heads[n] == new[n] for n in names) < len(names)
        for name in names:
            assert verify_dataset(production.open(name)) == [], f"round {round_}: {name}"
        publish_environment(production, Workspace(environment_root(copy, "pr-1")))
        assert {n: production.open(n).head() for n in names} == new, f"round {round_}"
        assert all(verify_dataset(production.open(n)) == [] for n in names)
        shutil.rmtree(copy)
    assert partial >= 1, "no kill landed while heads were moving: the test proved nothing"
