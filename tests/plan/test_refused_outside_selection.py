"""A manifest that cannot be loaded stops only what needs it (issue 34, point 1).

kamu-contrib's EthereumLogs roots (verbatim, fixtures/kamu-contrib-ethereum/SOURCES.md) are refused by name
in one line. Outside the selection (``--select``, ``--exclude``) such a manifest, or any other that cannot be
loaded, is a warning and the selected datasets plan and run; a selected dataset that reads it fails naming
both; with no selector the whole project stops as before. Everything here runs without a JVM: plan without
query checks, validate, and runs whose selection holds push-only roots (``RecordingHolder`` proves no Spark).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from odfproj.cli import options as options_cmd
from odfproj.cli import run as run_cmd
from odfproj.errors import ManifestError
from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import WORKSPACE_ENV, load_project
from odfproj.run.run import Status, run_project
from odfproj.storage.workspace import Workspace
from tests.cli_inprocess import run_main, run_main_split
from tests.run.test_run import PUSH_ROOT  # the same push-source root
from tests.spark_helpers import RecordingHolder

FIXTURES = Path(__file__).parent / "fixtures" / "kamu-contrib-ethereum"

MINTED = "net.rocketpool.reth.tokens-minted"
BURNED = "net.rocketpool.reth.tokens-burned"
MINT_BURN = "net.rocketpool.reth.mint-burn"
PEAQ = "xyz.peaq.did.add-attribute"

#: Where each EthereumLogs root sits in the project, and the dataset it defines.
ETHEREUM = {
    "datasets/net.rocketpool/reth.tokens-minted.yaml": MINTED,
    "datasets/net.rocketpool/reth.tokens-burned.yaml": BURNED,
    "datasets/xyz.peaq/did.add-attribute.yaml": PEAQ,
}

REFUSAL = "the fetch step EthereumLogs (ODF 0.36) is not one odfproj runs"

DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {input}
      transform:
        kind: Sql
        engine: spark
        query: SELECT * FROM `{input}`
"""

#: A schema violation: ``NdJsonn`` is no ReadStep.
TYPO_ROOT = PUSH_ROOT.replace("kind: NdJson", "kind: NdJsonn")

#: Exclude every EthereumLogs root and what reads one.
EXCLUDE_ETHEREUM = f"{MINTED}+ {BURNED}+ {PEAQ}"


def make_project(root: Path, *, derivatives: bool = True, extra: dict[str, str] | None = None) -> Path:
    """kamu-contrib's EthereumLogs roots and their reader, beside a push root (and its reader)."""
    files = {
        "odfproj.yaml": "name: contrib\n",
        "datasets/shop/orders.yaml": PUSH_ROOT.format(name="com.example.orders"),
        **(extra or {}),
    }
    if derivatives:
        files["datasets/shop/orders-daily.yaml"] = DERIVATIVE.format(
            name="com.example.orders-daily", input="com.example.orders"
        )
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel in [*ETHEREUM, *(["datasets/net.rocketpool/reth.mint-burn.yaml"] if derivatives else [])]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / Path(rel).name, root / rel)
    return root


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    return make_project(tmp_path / "contrib")


def plan_of(root: Path, **request):
    return plan_project(load_project(root), PlanRequest(**request))[0]


def cli(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """``odfproj --cold ARGS`` in ``root``: (exit code, stdout, stderr); no Spark session can start."""
    monkeypatch.chdir(root)
    for module in (run_cmd, options_cmd):
        monkeypatch.setattr(module, "SparkSessionHolder", lambda *a, **k: RecordingHolder(None))
    return run_main_split("--cold", *args)


# ------------------------------------------------------------------------------------------------
# The refusal: one line naming EthereumLogs as a fetch step odfproj does not run


def test_each_ethereum_logs_root_is_refused_in_one_line_naming_the_step(project, monkeypatch) -> None:
    code, _, err = cli(project, monkeypatch, "validate")
    assert code == 1
    for rel, name in ETHEREUM.items():
        [line] = [line for line in err.splitlines() if line.startswith(f"{rel}:")]
        assert line.startswith(f"{rel}:10:15: {name}: {REFUSAL}: ")
        assert "Ethereum node" in line
    # validate reports every problem of the project, as before; kamu-contrib's reader has its own: its
    # DataFusion query names a column `from`, which does not translate to Spark SQL.
    assert "4 problem(s) in 4 of 6 manifest(s)" in err


def test_the_refusal_is_the_same_outside_any_project(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = run_main("validate", str(FIXTURES / "reth.tokens-minted.yaml"))
    assert code == 1
    assert f"reth.tokens-minted.yaml:10:15: {MINTED}: {REFUSAL}: " in output


# ------------------------------------------------------------------------------------------------
# plan


def test_plan_excluding_them_plans_the_rest_and_warns_once_per_file(project, monkeypatch) -> None:
    code, out, err = cli(project, monkeypatch, "plan", "--no-validate-queries", "--exclude", EXCLUDE_ETHEREUM)
    assert code == 0, err
    assert "+ com.example.orders [Root]" in out and "+ com.example.orders-daily [Derivative]" in out
    assert MINT_BURN not in out  # the reader is left out with them, and nothing to say about it
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 3
    for (rel, name), line in zip(sorted(ETHEREUM.items()), warnings, strict=True):
        assert line.startswith(f"warning: {rel}:10:15: {name}: {REFUSAL}")
        assert line.endswith("(not selected: skipped)")
    assert "Plan: 2 to create" in out


def test_plan_selecting_one_dataset_sets_the_others_problems_aside_as_warnings(project) -> None:
    plan = plan_of(project, select=("com.example.orders",))
    assert [s.dataset for s in plan.definitions] == ["com.example.orders"]
    assert len(plan.warnings) == 3 and all("(not selected: skipped)" in w for w in plan.warnings)


def test_plan_selecting_a_reader_of_a_refused_root_fails_naming_both(project, monkeypatch) -> None:
    code, out, err = cli(project, monkeypatch, "plan", "--no-validate-queries", "--select", MINT_BURN)
    assert code == 1 and out == ""
    [minted] = [line for line in err.splitlines() if f"reads {MINTED}" in line]
    assert minted.startswith(
        f"datasets/net.rocketpool/reth.mint-burn.yaml:10:23: {MINT_BURN} reads {MINTED}, "
    )
    assert f"datasets/net.rocketpool/reth.tokens-minted.yaml:10:15: {MINTED}: {REFUSAL}" in minted
    assert f"--exclude '{MINTED}+'" in minted
    assert any(f"{MINT_BURN} reads {BURNED}, " in line for line in err.splitlines())
    assert PEAQ not in err  # neither selected nor read: not this command's business


def test_excluding_only_the_refused_root_still_fails_for_its_selected_reader(project) -> None:
    with pytest.raises(ManifestError) as raised:
        plan_of(project, exclude=(MINTED, BURNED, PEAQ))
    assert len(raised.value.problems) == 2
    assert all(p.startswith("datasets/net.rocketpool/reth.mint-burn.yaml:") for p in raised.value.problems)


def test_plan_upstream_of_the_reader_fails_on_the_refused_roots_themselves(project) -> None:
    with pytest.raises(ManifestError) as raised:
        plan_of(project, select=(f"+{MINT_BURN}",))
    assert [p.split(":")[0] for p in raised.value.problems] == [
        "datasets/net.rocketpool/reth.tokens-burned.yaml",
        "datasets/net.rocketpool/reth.tokens-minted.yaml",
    ]
    assert all(REFUSAL in p and "cannot be loaded" not in p for p in raised.value.problems)


def test_plan_without_a_selector_stops_on_every_refused_manifest_as_before(project, monkeypatch) -> None:
    code, out, err = cli(project, monkeypatch, "plan", "--no-validate-queries")
    assert code == 1 and out == ""
    assert err.startswith("error: 3 problems:")
    for rel, name in ETHEREUM.items():
        assert f"{rel}:10:15: {name}: {REFUSAL}" in err
    assert "not selected" not in err


def test_kamu_contribs_four_are_left_out_by_name_with_their_reader(tmp_path: Path) -> None:
    """As in kamu-contrib's folder: a fourth EthereumLogs root, reth.mint-burn-2in1.yaml, is a second file
    defining net.rocketpool.reth.mint-burn, the name of the derivative that reads two of the others."""
    root = make_project(tmp_path / "p")
    shutil.copy(
        FIXTURES / "reth.mint-burn-2in1.yaml", root / "datasets/net.rocketpool/reth.mint-burn-2in1.yaml"
    )
    for exclude in (
        f"{MINTED} {BURNED} {PEAQ} {MINT_BURN}",
        EXCLUDE_ETHEREUM,
    ):  # by name, or the roots and `+`
        plan = plan_of(root, exclude=(exclude,))
        assert {s.dataset for s in plan.definitions} == {"com.example.orders", "com.example.orders-daily"}
        assert [w.split(":")[0] for w in plan.warnings] == [
            "datasets/net.rocketpool/reth.mint-burn-2in1.yaml",
            "datasets/net.rocketpool/reth.mint-burn.yaml",
            "datasets/net.rocketpool/reth.tokens-burned.yaml",
            "datasets/net.rocketpool/reth.tokens-minted.yaml",
            "datasets/xyz.peaq/did.add-attribute.yaml",
        ]
    [twice] = [w for w in plan.warnings if w.startswith("datasets/net.rocketpool/reth.mint-burn.yaml")]
    assert f"dataset '{MINT_BURN}' is defined twice" in twice


# ------------------------------------------------------------------------------------------------
# Any other manifest that cannot be loaded


def test_a_schema_violation_outside_the_selection_is_a_warning(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "p", extra={"datasets/shop/typo.yaml": TYPO_ROOT.format(name="com.example.typo")}
    )
    plan = plan_of(root, select=("com.example.orders+",))
    assert [s.dataset for s in plan.definitions] == ["com.example.orders", "com.example.orders-daily"]
    [typo] = [w for w in plan.warnings if "typo" in w]
    assert typo.startswith("datasets/shop/typo.yaml:10:15: com.example.typo: unknown kind 'NdJsonn'")
    assert typo.endswith("(not selected: skipped)")
    with pytest.raises(ManifestError, match="unknown kind 'NdJsonn'"):
        plan_of(root, select=("path:datasets/shop",))
    with pytest.raises(ManifestError) as raised:
        plan_of(root)
    assert len(raised.value.problems) == 4  # the three EthereumLogs roots and the typo: as before


def test_a_selected_derivative_reading_a_schema_invalid_root_fails_naming_both(tmp_path: Path) -> None:
    extra = {
        "datasets/shop/typo.yaml": TYPO_ROOT.format(name="com.example.typo"),
        "datasets/shop/typo-view.yaml": DERIVATIVE.format(
            name="com.example.typo-view", input="com.example.typo"
        ),
    }
    root = make_project(tmp_path / "p", extra=extra)
    with pytest.raises(ManifestError) as raised:
        plan_of(root, select=("com.example.typo-view",))
    [line] = raised.value.problems
    assert line.startswith(
        "datasets/shop/typo-view.yaml:9:23: com.example.typo-view reads com.example.typo, "
    )
    assert "(datasets/shop/typo.yaml:10:15: com.example.typo: unknown kind 'NdJsonn'" in line
    # Left out with what reads it, the rest plans.
    plan = plan_of(root, exclude=("com.example.typo+", EXCLUDE_ETHEREUM))
    assert {s.dataset for s in plan.definitions} == {"com.example.orders", "com.example.orders-daily"}


def test_a_manifest_without_a_readable_name_is_matched_by_its_path_only(tmp_path: Path) -> None:
    bad_yaml = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: [unclosed\n"
    root = make_project(tmp_path / "p", extra={"datasets/shop/broken.yaml": bad_yaml})
    with pytest.raises(ManifestError, match=r"^datasets/shop/broken\.yaml:"):
        plan_of(root, exclude=(EXCLUDE_ETHEREUM,))  # everything else is selected: the nameless file too
    with pytest.raises(ManifestError, match=r"^datasets/shop/broken\.yaml:"):
        plan_of(root, select=("path:datasets/shop/broken.yaml",))
    plan = plan_of(root, exclude=(EXCLUDE_ETHEREUM, "path:datasets/shop/broken.yaml"))
    assert {s.dataset for s in plan.definitions} == {"com.example.orders", "com.example.orders-daily"}
    [broken] = [w for w in plan.warnings if "broken" in w]
    assert broken.startswith("datasets/shop/broken.yaml:5:1: YAML syntax error") and broken.endswith(
        "(not selected: skipped)"
    )
    plan = plan_of(root, select=("com.example.orders",))
    assert any(w.startswith("datasets/shop/broken.yaml:5:1: YAML") for w in plan.warnings)


def test_a_refused_manifest_is_reported_the_same_in_json(project, monkeypatch) -> None:
    code, out, err = cli(
        project, monkeypatch, "plan", "--no-validate-queries", "--format", "json", "-s", "com.example.orders"
    )
    assert code == 0, err
    assert out.count("(not selected: skipped)") == 3


# ------------------------------------------------------------------------------------------------
# run's planning stage


def test_run_excluding_them_runs_the_rest(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    root = make_project(
        tmp_path / "p",
        derivatives=False,
        extra={"datasets/shop/more.yaml": PUSH_ROOT.format(name="com.example.more")},
    )
    holder = RecordingHolder(None)
    result = run_project(load_project(root), PlanRequest(exclude=(EXCLUDE_ETHEREUM,)), holder=holder)  # type: ignore[arg-type]
    assert result.ok and not holder.created
    assert {r.dataset: r.status for r in result.results} == {
        "com.example.more": Status.SKIPPED,
        "com.example.orders": Status.SKIPPED,
    }
    assert sorted(Workspace(root / ".odf").list_datasets()) == ["com.example.more", "com.example.orders"]
    assert len(result.plan.warnings) == 3 and result.warnings == result.plan.warnings
    assert all(s.action is Action.CREATE for s in result.plan.definitions)


def test_run_selecting_a_reader_or_nothing_stops_before_any_work(project, monkeypatch) -> None:
    code, out, err = cli(project, monkeypatch, "run", "--select", MINT_BURN)
    assert code == 1
    assert f"{MINT_BURN} reads {MINTED}, which cannot be loaded" in out + err
    code, out, err = cli(project, monkeypatch, "run")
    assert code == 1 and f"{REFUSAL}" in out + err and "not selected" not in out + err
    assert not (project / ".odf").exists() or not Workspace(project / ".odf").list_datasets()


def test_run_on_the_command_line_excluding_them_exits_0(tmp_path: Path, monkeypatch) -> None:
    root = make_project(tmp_path / "p", derivatives=False)
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    code, out, err = cli(root, monkeypatch, "run", "--exclude", EXCLUDE_ETHEREUM)
    assert code == 0, out + err
    assert "com.example.orders" in out and "0 failed, 1 skipped" in out
    # What was set aside is said, as plan says it: one warning per refused manifest.
    assert out.count("(not selected: skipped)") == 3, out
    assert all(line.startswith("warning: ") for line in out.splitlines() if "(not selected: skipped)" in line)
