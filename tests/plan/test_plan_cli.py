"""``odfproj plan`` end to end on a copy of the example project (fresh workspace: everything is created)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from tests.conftest import REPO_DIR


def run(args, cwd):
    return subprocess.run([sys.executable, "-m", "odfproj", *args], cwd=cwd, capture_output=True, text=True)


def test_plan_on_the_example_project(tmp_path) -> None:
    project = tmp_path / "example"
    shutil.copytree(REPO_DIR / "example_project", project, ignore=shutil.ignore_patterns(".odf"))
    text = run(["plan"], project)
    assert text.returncode == 0, text.stderr
    assert "Plan: 7 to create, 0 to update, 0 unchanged, 0 refused." in text.stdout
    detailed = run(["plan", "--detailed-exitcode", "--format", "json"], project)  # one JVM start fewer
    assert detailed.returncode == 2
    data = json.loads(detailed.stdout)
    assert data["format_version"] == 2
    definitions = [s for s in data["steps"] if s["step"] == "append_definitions"]
    assert {s["action"] for s in definitions} == {"create"} and len(definitions) == 7
    # Definitions come first, then one data step per dataset with data work, in dependency order.
    tags = [s["step"] for s in data["steps"]]
    assert tags[:7] == ["append_definitions"] * 7 and set(tags[7:]) == {"ingest", "transform"}
    assert "Data work `odfproj run` does after applying, in this order:" in text.stdout
    assert not (project / ".odf").exists(), "plan must not write to the workspace"


def test_plan_reports_every_bad_manifest_without_a_traceback(tmp_path) -> None:
    project = tmp_path / "example"
    shutil.copytree(REPO_DIR / "example_project", project, ignore=shutil.ignore_patterns(".odf"))
    (project / "datasets" / "broken.yaml").write_text(
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: x\n\tkind: Root\n"
    )
    proc = run(["plan"], project)
    assert proc.returncode == 1
    assert "datasets/broken.yaml:" in proc.stderr
    assert "Traceback" not in proc.stderr
