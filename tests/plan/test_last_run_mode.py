"""``plan`` shows an unchanged query's mode as its last run recorded it, without the engine.

JVM-free: the record a run leaves in the derivative's ``info/`` (``storage/update_record.py``) is
written here by hand, as ``transform/coordinator.py`` writes it after an update.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from odfproj.plan.model import LastRun, Transform
from odfproj.plan.planfile import plan_from_data, plan_to_data
from odfproj.plan.render import MODE_UNKNOWN, render_markdown, render_text
from odfproj.project.config import load_project
from odfproj.storage.update_record import UpdateRecord, transform_block, write_update_record
from odfproj.storage.workspace import Workspace
from tests.plan.test_plan_steps import apply, make_project, plan_of

HINT = "sum a DECIMAL to make it incremental: sum(CAST(amount AS DECIMAL(p,s)))"


def _record(root: Path, **fields) -> None:
    dataset = Workspace(load_project(root).workspace()).open("cities.view")
    p = dataset.projection()
    fields.setdefault("transform", transform_block(p) or "")
    write_update_record(dataset, UpdateRecord(head=p.head.to_multibase(), **fields))


def _transform(root: Path) -> Transform:
    return next(s for s in plan_of(root).data_steps if isinstance(s, Transform))


def test_an_unchanged_query_shows_the_mode_its_last_run_recorded(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    apply(root)
    assert _transform(root).last_run is None  # never run: not known
    _record(
        root,
        path="full",
        why_full="sum over a floating-point value",
        mode="full: sum over a floating-point value",
        hint=HINT,
    )
    step = _transform(root)
    assert (step.mode, step.hint) == (None, HINT)
    assert step.last_run == LastRun(
        "full: sum over a floating-point value", "full", "sum over a floating-point value"
    )
    plan = plan_of(root)
    for text in (render_text(plan), render_markdown(plan)):
        assert f"    # mode: full: sum over a floating-point value (last run)\n    # hint: {HINT}\n" in text
    assert plan_from_data(json.loads(json.dumps(plan_to_data(plan)))) == plan

    # A grouped query whose last update was forced full: its mode is the one plan shows.
    _record(root, path="full", why_full="it had no data yet", mode="grouped")
    assert "    # mode: grouped (last run)\n" in render_text(plan_of(root))


def test_a_changed_query_or_a_record_of_another_query_is_not_shown(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    apply(root)
    _record(root, path="stateless", mode="stateless", transform="f1620" + "0" * 64)  # another SetTransform
    assert _transform(root).last_run is None
    _record(root, path="stateless", mode="stateless")
    assert _transform(root).last_run == LastRun("stateless", "stateless")
    manifest = root / "datasets" / "cities.view.yaml"
    manifest.write_text(manifest.read_text().replace("SELECT * FROM src", "SELECT id, city FROM src"))
    step = _transform(root)  # the plan changes the query: the record is of the old one
    assert (step.mode, step.last_run, step.hint) == (None, None, None)
    assert f"    # mode: {MODE_UNKNOWN}\n" in render_text(plan_of(root))


def test_cli_plan_reads_it_with_no_java_to_start(tmp_path) -> None:
    """No Java on the PATH nor JAVA_HOME: a plan that tried to start a JVM would fail."""
    root = make_project(tmp_path / "proj")
    apply(root)
    _record(root, path="grouped", mode="grouped")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ODFPROJ_", "SPARK_", "PYSPARK_"))}
    env.update(PATH="/nonexistent", JAVA_HOME="/nonexistent", COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-m", "odfproj", "plan"],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "  transform cities.view\n" in done.stdout
    assert "    # mode: grouped (last run)\n" in done.stdout
    assert done.stderr == "", done.stderr
