"""Old workspaces through the command line: ``verify``, ``apply`` and ``run`` adopt one once, ``plan`` never.

The datasets are made with the storage API or by ``odfproj apply`` of push-source roots, and ``run``
has nothing to ingest: no JVM.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.odf.identity import DatasetKeyPair
from odfproj.project.config import WORKSPACE_ENV
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main_split
from tests.security.project_helpers import info_manifest, make_project
from tests.storage.helpers.old_layout import ADOPTED_2, make_old, two_datasets


def test_verify_adopts_an_old_workspace_once_and_passes(workspace: Workspace) -> None:
    two_datasets(workspace)
    make_old(workspace)

    code, out, err = run_main_split("verify", "--workspace", str(workspace.root))

    assert code == 0, out + err
    assert out == "2 datasets verified\n"
    assert err.count("adopted") == 1 and err.strip() == ADOPTED_2
    code, out, err = run_main_split("verify", "--workspace", str(workspace.root))
    assert (code, err) == (0, "")
    assert (
        out
        == "2 datasets verified: no new block since the last check (use --full to re-check all 3 blocks)\n"
    )


def test_verify_still_reports_a_dataset_it_could_not_adopt(workspace: Workspace) -> None:
    _, second = two_datasets(workspace)
    make_old(workspace)
    workspace.key_path(second.dataset_id).write_bytes(DatasetKeyPair.generate().to_pem())

    code, out, err = run_main_split("verify", "--workspace", str(workspace.root))

    assert code == 1
    assert "adopted 1 dataset of a workspace made before name records" in err
    assert "prices (its private key is of another dataset)" in err
    assert "the workspace has no record of dataset 'prices'" in out and "Trades" not in out
    code, out, err = run_main_split("verify", "--workspace", str(workspace.root))
    assert code == 1 and "adopted" not in err  # said once; verify keeps reporting prices


def test_verify_does_not_adopt_a_workspace_with_some_records(workspace: Workspace) -> None:
    two_datasets(workspace)
    workspace.name_record("prices").unlink()

    code, out, err = run_main_split("verify", "--workspace", str(workspace.root))

    assert code == 1 and "adopted" not in err
    assert "the workspace has no record of dataset 'prices'" in out


def test_apply_adopts_and_plan_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    project = make_project(
        tmp_path / "project",
        {"a.yaml": info_manifest("alpha", "first"), "b.yaml": info_manifest("beta", "second")},
    )
    code, out, err = run_main_split("apply", "--auto-approve", "--project", str(project))
    assert code == 0, out + err
    workspace = Workspace(project / ".odf")
    make_old(workspace)

    code, out, err = run_main_split("plan", "--project", str(project))
    assert code == 0, out + err
    assert "adopted" not in err and not workspace.names_dir.exists()  # plan writes nothing

    (project / "datasets" / "b.yaml").write_text(info_manifest("beta", "edited"), encoding="utf-8")
    code, out, err = run_main_split("apply", "--auto-approve", "--project", str(project))
    assert code == 0, out + err
    assert err.count("adopted") == 1
    assert "adopted 2 datasets of a workspace made before name records (.names/ written)" in err
    code, out, err = run_main_split("verify", "--project", str(project))
    assert (code, out, err) == (0, "2 datasets verified\n", "")


def test_run_adopts_an_old_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` of push-only roots: nothing to ingest, so no JVM (``--cold``: no warm engine either)."""
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    project = make_project(tmp_path / "project", {"a.yaml": info_manifest("alpha", "first")})
    code, out, err = run_main_split("apply", "--auto-approve", "--project", str(project))
    assert code == 0, out + err
    make_old(Workspace(project / ".odf"))

    code, out, err = run_main_split("--cold", "run", "--project", str(project))

    assert code == 0, out + err
    assert err == "adopted 1 dataset of a workspace made before name records (.names/ written)\n"
    code, out, err = run_main_split("verify", "--project", str(project))
    assert (code, out, err) == (0, "1 dataset verified\n", "")
