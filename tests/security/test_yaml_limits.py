"""Hostile YAML: nesting that crashed libyaml, alias bombs that hung fmt, huge documents and Python tags.

Every YAML reader is covered: manifests (validate, plan, fmt), odfproj.yaml, and ``--vars``-style
values. The crash and hang vectors run the CLI in a subprocess (a segfault must not take pytest with
it); the rest run in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from odfproj.odf import yaml_source
from odfproj.odf.yaml_codec import load_yaml
from odfproj.odf.yaml_source import MAX_YAML_BYTES, MAX_YAML_DEPTH, YamlLimitError, load_yaml_document
from odfproj.project.config import ProjectError, parse_config
from odfproj.project.fmt import FormatError, format_text
from tests.security.project_helpers import ROOT_MANIFEST, assert_clean_failure, make_project, run_cli

DEEP_FLOW = "content: " + "[" * 30_000 + "]" * 30_000 + "\n"
DEEP_MAP = "content: " + "{a: " * 30_000 + "1" + "}" * 30_000 + "\n"
DEEP_BLOCK = "".join("  " * i + "a:\n" for i in range(200)) + "  " * 200 + "b: 1\n"


def billion_laughs(levels: int = 10) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + f"\ncontent: *a{levels - 1}\n"


def one_problem(text: str) -> str:
    result = load_yaml_document(text.encode(), "datasets/m.yaml")
    assert result.document is None
    assert len(result.problems) == 1, result.problems
    return str(result.problems[0])


# ------------------------------------------------------------------------------------------------
# The manifest loader (validate, plan, watch)


@pytest.mark.parametrize("text", [DEEP_FLOW, DEEP_MAP, DEEP_BLOCK])
def test_deep_nesting_is_refused_at_its_position(text: str) -> None:
    message = one_problem(text)
    assert f"refused: the document is nested more than {MAX_YAML_DEPTH} levels deep" in message
    assert message.startswith("datasets/m.yaml:")


def test_alias_bomb_is_refused_without_expanding() -> None:
    assert "refused: the document expands to more than 1000000 values (too many aliases)" in one_problem(
        billion_laughs()
    )


def test_merge_key_bomb_is_refused() -> None:
    lines = ["a0: &a0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8, k8: 9}"]
    for i in range(1, 12):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    lines.append("b: {<<: *a0, c: *a11}")
    assert "too many aliases" in one_problem("\n".join(lines) + "\n")


def test_oversized_document_is_refused_before_parsing() -> None:
    text = "content: '" + "x" * (MAX_YAML_BYTES + 1) + "'\n"
    assert f"over the limit of {MAX_YAML_BYTES} characters" in one_problem(text)


def test_limits_leave_ordinary_anchors_and_depth_alone() -> None:
    text = (
        "base: &b {x: 1}\nitems: [*b, *b]\n"
        + "deep: "
        + "[" * (MAX_YAML_DEPTH - 2)
        + "]" * (MAX_YAML_DEPTH - 2)
    )
    result = load_yaml_document(text.encode(), "m.yaml")
    assert result.problems == () and result.document["items"] == [{"x": 1}, {"x": 1}]


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
        "!!python/name:os.system",
        "!!python/module:os",
        "!!python/object:os._wrap_close {{}}",
    ],
)
def test_python_tags_construct_nothing(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "pwned"
    text = "kind: DatasetSnapshot\nversion: 1\ncontent: " + tag.format(marker=marker) + "\n"
    result = load_yaml_document(text.encode(), "m.yaml")
    assert any("unsupported YAML tag" in p.message for p in result.problems), result.problems
    with pytest.raises(yaml.YAMLError):
        load_yaml(text)
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------
# The other readers: fmt (ruamel), odfproj.yaml


@pytest.mark.parametrize("text", [DEEP_FLOW, billion_laughs()])
def test_fmt_refuses_deep_and_exploding_documents(text: str) -> None:
    with pytest.raises(FormatError, match=r"invalid YAML: the document"):
        format_text(text)


@pytest.mark.parametrize("text", [DEEP_FLOW, DEEP_MAP, billion_laughs(), "vars: !!python/name:os.system\n"])
def test_odfproj_yaml_over_the_limits_is_a_one_line_project_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(ProjectError) as caught:
        parse_config(tmp_path, text)
    assert str(caught.value).startswith(f"{tmp_path / 'odfproj.yaml'}:")
    assert "\n" not in str(caught.value)


def test_limit_check_is_iterative_whatever_the_depth() -> None:
    """The check itself must not recurse: a million levels is refused, not a crash."""
    with pytest.raises(YamlLimitError):
        yaml_source.check_yaml_limits("[" * 1_000_000)


# ------------------------------------------------------------------------------------------------
# End to end, as CI runs it


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "pr", {"ok.yaml": ROOT_MANIFEST.format(name="com.example.ok")})


@pytest.mark.parametrize("command", [("validate",), ("plan", "--no-validate-queries")])
def test_deeply_nested_manifest_no_longer_crashes_the_cli(project: Path, command: tuple[str, ...]) -> None:
    (project / "datasets" / "deep.yaml").write_text(DEEP_FLOW)
    run = run_cli(project, *command)
    assert_clean_failure(run, file="datasets/deep.yaml:1:")
    assert "nested more than" in run.stderr


def test_fmt_check_on_an_alias_bomb_returns_at_once(project: Path) -> None:
    (project / "datasets" / "bomb.yaml").write_text(billion_laughs())
    run = run_cli(project, "fmt", "--check", timeout=300)
    assert run.returncode == 1, run.output
    assert "error: datasets/bomb.yaml: 7:10: invalid YAML: the document expands" in run.stderr
    assert "Traceback" not in run.output


def test_deep_odfproj_yaml_is_a_one_line_error(project: Path) -> None:
    (project / "odfproj.yaml").write_text("name: pr\nvars: " + "[" * 30_000 + "]" * 30_000 + "\n")
    run = run_cli(project, "validate")
    assert_clean_failure(run, file="odfproj.yaml:2:")
    assert len(run.stderr.strip().splitlines()) == 1


def test_deeply_nested_plan_file_is_a_one_line_error(tmp_path: Path) -> None:
    from odfproj.errors import PlanError
    from odfproj.plan.planfile import read_plan_file

    path = tmp_path / "plan.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(PlanError, match=r"plan.json: not a plan file \(JSON nested too deeply\)"):
        read_plan_file(path)
