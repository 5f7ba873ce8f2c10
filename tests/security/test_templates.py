"""Hostile templates: sandbox escapes, environment leaks, huge outputs and endless loops.

Rendering vectors run in-process through the project's own ``Renderer`` (a marker file proves
nothing ran); the environment-leak vectors run the CLI as CI does and search every output and the
saved plan for the secret's value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.project import render_budget
from odfproj.project.config import ProjectError, parse_config
from odfproj.project.env import REDACTED, EnvPolicy, Redactor, parse_env_section
from odfproj.project.render import RenderContext, Renderer, render_manifest
from tests.security.project_helpers import (
    SECRET_VALUE,
    assert_clean_failure,
    assert_no_secret,
    cli_env,
    info_manifest,
    make_project,
    run_cli,
)


def render_problem(text: str, **context: object) -> str:
    result = render_manifest(text, "datasets/m.yaml", RenderContext(**context))  # type: ignore[arg-type]
    assert result.text is None, "the hostile template rendered"
    assert len(result.problems) == 1, result.problems
    return str(result.problems[0])


# ------------------------------------------------------------------------------------------------
# Sandbox escapes: each would create the marker file if it reached Python


@pytest.mark.parametrize(
    "expression",
    [
        "cycler.__init__.__globals__.os.system('touch {marker}')",
        "joiner.__init__.__globals__.os.popen('touch {marker}').read()",
        "lipsum.__globals__['os'].system('touch {marker}')",
        "''.__class__.__mro__[1].__subclasses__()",
        "namespace.__init__.__globals__['__builtins__']['open']('{marker}', 'w')",
        "self._TemplateReference__context",
        "'{{0.__class__.__init__.__globals__}}'.format(var)",
        "var.__globals__['os'].system('touch {marker}')",
        "raise_error.__closure__",
        "range.__self__.open('{marker}', 'w')",
    ],
)
def test_sandbox_escape_runs_nothing(tmp_path: Path, expression: str) -> None:
    marker = tmp_path / "pwned"
    text = "description: {{ " + expression.format(marker=marker) + " }}\n"
    message = render_problem(text)
    assert message.startswith("datasets/m.yaml:1:1: "), message
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------
# Size and time budgets


@pytest.mark.parametrize(
    "template",
    [
        "{{ 'x' * 10**9 }}",
        "{{ 10**9 * 'x' }}",
        "{{ [1] * 10**9 }}",
        "{{ 'x' | center(10**9) }}",
        "{{ 'x' | indent(10**9, true) }}",
        "{{ 'x'.ljust(10**9) }}",
        "{{ 'x'.zfill(10**9) }}",
        "{{ '%0999999999d' % 1 }}",
        "{{ 7 ** 123456789 }}",
        "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        "{% for i in range(100000) %}{% for j in range(100) %}0123456789{% endfor %}{% endfor %}",
        "{% set ns = namespace(s='x' * 1000000) %}{{ ns.s | replace('x', ns.s) }}",
        "{% set s = 'x' * 3000 %}{{ s | replace('x', s) }}",
        "{% set s = 'x' * 3000 %}{{ s.replace('x', s) }}",
        "{% set s = 'x' * 3000 %}{{ s.replace('', s) }}",
    ],
)
def test_huge_output_is_refused_with_one_line(template: str) -> None:
    message = render_problem("description: " + template + "\n")
    assert "render budget exceeded" in message, message
    assert "\n" not in message


def test_endless_loop_without_output_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render_budget, "MAX_RENDER_SECONDS", 0.5)
    loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    assert "render budget exceeded: rendering took over 0.5 s" in render_problem("a: " + loop + "\n")


def test_memory_hungry_loop_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render_budget, "MAX_RENDER_MEMORY", 32 * 2**20)
    hog = "{% set ns = namespace(items=[]) %}{% for i in range(100000) %}{% set ns.items = ns.items + ['x' * 100000] %}{% endfor %}"
    assert "render budget exceeded: rendering used over 32 MB" in render_problem("a: " + hog + "\n")


def test_endless_loop_in_a_macro_file_body_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render_budget, "MAX_RENDER_SECONDS", 0.5)
    slow = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    renderer = Renderer(RenderContext(macros={"macros/slow.j2": slow}))
    assert [str(p) for p in renderer.problems] == [
        "macros/slow.j2:1:1: render budget exceeded: rendering took over 0.5 s"
    ]


def test_budgets_leave_ordinary_templates_alone() -> None:
    text = "{% for i in range(3) %}- {{ 'c' ~ i }} {{ 'x' * 3 }} {{ '%03d' % i }}\n{% endfor %}"
    assert render_manifest(text, "m.yaml").text == "- c0 xxx 000\n- c1 xxx 001\n- c2 xxx 002\n"


# ------------------------------------------------------------------------------------------------
# The environment: only declared variables, never secret ones


@pytest.mark.parametrize(
    ("config_env", "name"),
    [
        ([], "HOME"),  # undeclared
        (["GITHUB_TOKEN"], "GITHUB_TOKEN"),  # a PR declares a credential by its well-known name
        (["ODFPROJ_SECRET_WAREHOUSE"], "ODFPROJ_SECRET_WAREHOUSE"),  # the secret prefix
        (["DBT_ENV_SECRET_PASSWORD"], "DBT_ENV_SECRET_PASSWORD"),  # dbt's prefix
        ([{"name": "PLAIN_LOOKING", "secret": True}], "PLAIN_LOOKING"),  # declared secret
    ],
)
def test_env_var_refuses_undeclared_and_secret_variables(config_env: list, name: str) -> None:
    environ = {name: SECRET_VALUE}
    message = render_problem(
        f"a: {{{{ env_var('{name}') }}}}\n", environ=environ, env=parse_env_section(config_env)
    )
    assert SECRET_VALUE not in message
    assert name in message
    assert ("secret" in message) if config_env else ("not declared" in message)


def test_declared_plain_variable_is_read() -> None:
    env = parse_env_section(["REGION", {"name": "TOKENISED", "secret": False}])
    assert (
        render_manifest(
            "{{ env_var('REGION') }}", "m.yaml", RenderContext(environ={"REGION": "eu"}, env=env)
        ).text
        == "eu"
    )
    assert env.is_secret("TOKENISED"), "a name that says TOKEN is secret whatever the project declares"


@pytest.mark.parametrize(
    "env",
    ["env: HOME", "env: [{name: X, secret: maybe}]", "env: ['not a name']", "env: [{name: X, extra: 1}]"],
)
def test_malformed_env_section_is_a_one_line_project_error(tmp_path: Path, env: str) -> None:
    with pytest.raises(ProjectError, match=r"odfproj.yaml: 'env'"):
        parse_config(tmp_path, f"name: p\n{env}\n")


def test_redactor_replaces_the_longest_secret_first() -> None:
    redactor = Redactor([SECRET_VALUE, SECRET_VALUE[:8], "ab"])
    assert redactor.redact(f"a {SECRET_VALUE} b {SECRET_VALUE[:8]} ab") == f"a {REDACTED} b {REDACTED} ab"
    assert EnvPolicy().secret_values({"GITHUB_TOKEN": SECRET_VALUE, "HOME": "/root"}) == {SECRET_VALUE}


@pytest.fixture()
def leaky_project(tmp_path: Path) -> Path:
    """A PR that tries to print CI secrets into the plan comment through env_var()."""
    config = "name: pr\nenv:\n  - GITHUB_TOKEN\n  - ODFPROJ_SECRET_WAREHOUSE\n  - PLAIN_LOOKING\n"
    manifests = {
        "a.yaml": info_manifest("com.example.a", "{{ env_var('GITHUB_TOKEN') }}"),
        "b.yaml": info_manifest("com.example.b", "{{ env_var('ODFPROJ_SECRET_WAREHOUSE') }}"),
        "c.yaml": info_manifest("com.example.c", "{{ env_var('DBT_ENV_SECRET_PASSWORD', 'x') }}"),
        "d.yaml": info_manifest("com.example.d", "{{ env_var('AWS_SECRET_ACCESS_KEY', 'x') }}"),
    }
    return make_project(tmp_path / "pr", manifests, config)


@pytest.mark.parametrize("output_format", ["text", "json", "markdown"])
def test_plan_never_prints_a_ci_secret(leaky_project: Path, output_format: str) -> None:
    saved = leaky_project.parent / "plan.json"
    run = run_cli(
        leaky_project, "plan", "--format", output_format, "--out", str(saved), "--no-validate-queries"
    )
    assert_clean_failure(run, file="datasets/a.yaml")
    assert "environment variable 'GITHUB_TOKEN' is secret" in run.stderr
    assert_no_secret(run, saved)


def test_validate_never_prints_a_ci_secret(leaky_project: Path) -> None:
    run = run_cli(leaky_project, "validate")
    assert_clean_failure(run, file="datasets/b.yaml")
    assert_no_secret(run)


def test_secret_values_are_redacted_from_every_output_and_the_saved_plan(tmp_path: Path) -> None:
    """Whatever way a secret value reaches output (here a manifest that spells it out), it is hidden."""
    config = "name: pr\nenv:\n  - {name: PLAIN_LOOKING, secret: true}\n"
    root = make_project(
        tmp_path / "pr", {"a.yaml": info_manifest("com.example.a", f"key {SECRET_VALUE}")}, config
    )
    saved = tmp_path / "plan.json"
    for output_format in ("text", "json", "markdown"):
        run = run_cli(root, "plan", "--format", output_format, "--out", str(saved), "--no-validate-queries")
        assert run.returncode == 0, run.output
        assert REDACTED in run.stdout
        assert_no_secret(run, saved)
    # errors too: the value in a place the schema refuses
    (root / "datasets" / "b.yaml").write_text(f"kind: DatasetSnapshot\nversion: 1\ncontent: {SECRET_VALUE}\n")
    run = run_cli(root, "validate")
    assert_clean_failure(run, file="datasets/b.yaml")
    assert_no_secret(run)


def test_run_env_only_from_declared_names_end_to_end(tmp_path: Path) -> None:
    """A declared, non-secret variable renders into the plan; an undeclared one with a default is refused."""
    config = "name: pr\nenv: [REGION]\n"
    root = make_project(
        tmp_path / "pr", {"a.yaml": info_manifest("com.example.a", "in {{ env_var('REGION') }}")}, config
    )
    run = run_cli(root, "plan", "--no-validate-queries", env=cli_env(tmp_path, REGION="eu-west"))
    assert run.returncode == 0, run.output
    assert "in eu-west" in run.stdout
    (root / "datasets" / "a.yaml").write_text(info_manifest("com.example.a", "{{ env_var('HOME', '/') }}"))
    run = run_cli(root, "validate", env=cli_env(tmp_path))
    assert_clean_failure(run, file="environment variable 'HOME' is not declared under 'env:'")
