"""Rendering: the template helpers, macros, errors pinned to file and line, the sandbox, and ``${{``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odfproj.project.config import ProjectConfig, ProjectError
from odfproj.project.env import EnvPolicy, parse_env_section
from odfproj.project.render import (
    RenderContext,
    Renderer,
    has_jinja,
    render_manifest,
)
from tests.conftest import REFERENCE_MANIFESTS_DIR

REFERENCE_MANIFESTS = sorted(REFERENCE_MANIFESTS_DIR.glob("*.yaml"))
STARGAZERS = REFERENCE_MANIFESTS_DIR / "com.github.kamu-data.stargazers.yaml"


def declared(*names: str) -> EnvPolicy:
    return parse_env_section(list(names))


def render(text: str, **context: object) -> str:
    result = render_manifest(text, "m.yaml", RenderContext(**context))  # type: ignore[arg-type]
    assert result.ok, [str(p) for p in result.problems]
    assert result.text is not None
    return result.text


def problem(text: str, filename: str = "datasets/m.yaml", **context: object) -> str:
    result = render_manifest(text, filename, RenderContext(**context))  # type: ignore[arg-type]
    assert result.text is None
    assert len(result.problems) == 1, result.problems
    return str(result.problems[0])


# ------------------------------------------------------------------------------------------------
# Helpers a template sees


def test_var_reads_project_vars_and_defaults() -> None:
    text = "a: {{ var('region') }}\nb: {{ var('days', 7) }}\nc: {{ var('tables')[1] }}\n"
    assert render(text, vars={"region": "eu", "tables": ["x", "y"]}) == "a: eu\nb: 7\nc: y\n"


def test_vars_override_replaces_project_vars(project: ProjectConfig) -> None:
    context = RenderContext.for_project(project, vars_override={"currency": "CHF"})
    assert context.vars["currency"] == "CHF"
    assert context.vars["landing"] == "/data/landing"
    assert render_manifest("{{ var('currency') }}", "m.yaml", context).text == "CHF"


def test_missing_var_is_a_problem_at_its_line() -> None:
    assert problem("a: 1\nb: {{ var('region') }}\n") == (
        "datasets/m.yaml:2:1: var 'region' is not defined (set it under 'vars:' in odfproj.yaml or pass --var NAME=VALUE)"
    )


def test_env_var_reads_the_environment_with_defaults() -> None:
    environ = {"BUCKET": "s3://b"}
    text = "{{ env_var('BUCKET') }} {{ env_var('MISSING', 'fallback') }}"
    assert render(text, environ=environ, env=declared("BUCKET", "MISSING")) == "s3://b fallback"


def test_env_var_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ODFPROJ_TEST_RENDER", "from-os")
    assert render("{{ env_var('ODFPROJ_TEST_RENDER') }}", env=declared("ODFPROJ_TEST_RENDER")) == "from-os"


def test_missing_env_var_without_default_is_a_problem() -> None:
    assert problem(
        "x: 1\n\nkey: {{ env_var('NOT_SET_ANYWHERE') }}", environ={}, env=declared("NOT_SET_ANYWHERE")
    ) == (
        "datasets/m.yaml:3:1: environment variable 'NOT_SET_ANYWHERE' is not set and env_var() has no default"
    )


def test_target_is_the_active_target_name(project: ProjectConfig) -> None:
    assert RenderContext.for_project(project).target == "dev"
    context = RenderContext.for_project(project, target="prod")
    assert render_manifest("{{ target }}", "m.yaml", context).text == "prod"


def test_unknown_target_is_refused(project: ProjectConfig) -> None:
    with pytest.raises(ProjectError, match="unknown target 'staging'"):
        RenderContext.for_project(project, target="staging")


# ------------------------------------------------------------------------------------------------
# Macros


def test_project_macros_are_globals(project: ProjectConfig) -> None:
    context = RenderContext.for_project(project)
    assert sorted(context.macros) == ["macros/sources.j2", "macros/sql.sql"]
    text = "path: {{ landing('orders') }}\nquery: {{ select_all('t') }}\n"
    assert render_manifest(text, "m.yaml", context).text == (
        'path: /data/landing/orders/*.csv\nquery: "SELECT * FROM `t`"\n'
    )


def test_macros_call_macros_of_other_files_whatever_the_order() -> None:
    macros = {
        "macros/a.j2": "{% macro outer(x) %}[{{ inner(x) }}]{% endmacro %}",
        "macros/z.j2": "{% macro inner(x) %}{{ x | upper }}-{{ var('suffix') }}{% endmacro %}",
    }
    assert render("{{ outer('ab') }}", macros=macros, vars={"suffix": "s"}) == "[AB-s]"


def test_private_macros_stay_in_their_file_and_filters_work() -> None:
    macros = {
        "macros/sub/util.jinja": "{% macro _helper() %}h{% endmacro %}{% macro pub() %}{{ _helper() }}{% endmacro %}"
    }
    assert render("{{ pub() }} {{ var('tags') | tojson }}", macros=macros, vars={"tags": ["a", "b"]}) == (
        'h ["a", "b"]'
    )
    assert "'_helper' is undefined" in problem("{{ _helper() }}", macros=macros)


def test_macro_files_can_be_imported_explicitly() -> None:
    macros = {"macros/util.j2": "{% macro twice(x) %}{{ x }}{{ x }}{% endmacro %}"}
    assert render("{% import 'macros/util.j2' as util %}{{ util.twice('z') }}", macros=macros) == "zz"


def test_a_macro_raising_is_reported_at_the_call_line_and_the_macro_line() -> None:
    macros = {
        "macros/check.j2": (
            "{% macro positive(n) %}\n"
            "{% if n <= 0 %}{{ raise_error('n must be positive, got ' ~ n) }}{% endif %}{{ n }}\n"
            "{% endmacro %}\n"
        )
    }
    assert problem("a: 1\nb: {{ positive(-2) }}\n", macros=macros) == (
        "datasets/m.yaml:2:1: n must be positive, got -2 (in macros/check.j2:2)"
    )


def test_broken_macro_files_are_problems_of_the_macro_file() -> None:
    renderer = Renderer(
        RenderContext(
            macros={
                "macros/a.j2": "{% macro one() %}1{% endmacro %}",
                "macros/b.j2": "{% macro one() %}2{% endmacro %}\n{% macro var() %}{% endmacro %}",
                "macros/c.j2": "\n\n{% macro broken( %}",
            }
        )
    )
    assert [str(p) for p in renderer.problems] == [
        "macros/b.j2:1:1: macro 'one' is also defined in macros/a.j2: macro names must be unique",
        "macros/b.j2:2:1: macro 'var' shadows the built-in 'var': rename it",
        "macros/c.j2:3:1: template syntax error: expected token 'name', got '%'",
    ]
    assert renderer.render("{{ one() }}", "m.yaml").text == "1"


# ------------------------------------------------------------------------------------------------
# Errors


def test_strict_undefined_names_file_and_line() -> None:
    assert problem("kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {{ dataset_name }}\n") == (
        "datasets/m.yaml:4:1: template error: 'dataset_name' is undefined"
    )


def test_undefined_attribute_of_a_var_is_an_error_too() -> None:
    assert problem("\n{{ var('cfg').missing }}", vars={"cfg": {"present": 1}}) == (
        "datasets/m.yaml:2:1: template error: 'dict object' has no attribute 'missing'"
    )


def test_syntax_error_names_its_line() -> None:
    assert problem("a: 1\nb: 2\n{% if x %}\nc: 3\n") == (
        "datasets/m.yaml:3:1: template syntax error: Unexpected end of template. Jinja was looking for "
        "the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."
    )


def test_syntax_error_in_an_expression() -> None:
    assert (
        problem("a: 1\nb: {{ 1 + }}\n")
        == "datasets/m.yaml:2:1: template syntax error: unexpected 'end of print statement'"
    )


def test_python_errors_in_expressions_are_problems() -> None:
    assert (
        problem("\n\n{{ 1 / 0 }}")
        == "datasets/m.yaml:3:1: template error: ZeroDivisionError: division by zero"
    )


def test_runaway_recursion_is_a_problem() -> None:
    macros = {"macros/loop.j2": "{% macro loop() %}{{ loop() }}{% endmacro %}"}
    assert "too deeply nested" in problem("{{ loop() }}", macros=macros)


# ------------------------------------------------------------------------------------------------
# The sandbox


@pytest.mark.parametrize(
    "payload",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ cycler.__init__.__globals__.os.system('touch /tmp/odfproj-pwned') }}",
        "{{ lipsum.__globals__['os'].popen('id').read() }}",
        "{{ var.__globals__ }}",
        "{{ env_var.__code__ }}",
        "{{ '{0.__class__}'.format(1) }}",
        "{% set xs = [1] %}{{ xs.append(2) }}",
        "{{ var('cfg').update({'a': 1}) }}",
        "{{ namespace.__init__ }}",
    ],
)
def test_sandbox_escapes_are_refused(payload: str) -> None:
    message = problem(f"a: 1\nb: {payload}\n", vars={"cfg": {}})
    assert message.startswith("datasets/m.yaml:2:1: unsafe template: "), message
    assert not os.path.exists("/tmp/odfproj-pwned")


# ------------------------------------------------------------------------------------------------
# ``${{ }}`` and the fast path


def test_stargazers_reference_manifest_renders_unchanged() -> None:
    data = STARGAZERS.read_bytes()
    text = data.decode("utf-8")
    assert "${{ env.GH_TOKEN }}" in text
    assert not has_jinja(text)
    assert render(text).encode("utf-8") == data


def test_engine_expressions_pass_through_jinja_unchanged() -> None:
    # A comment forces the Jinja path; it renders to nothing.
    text = STARGAZERS.read_text(encoding="utf-8")
    assert render("{# templated #}" + text) == text


def test_engine_expressions_mixed_with_jinja() -> None:
    text = (
        "args:\n"
        "  - ${{ env.GH_TOKEN }}\n"
        "  - {{ var('owner') }}-${{ env.SUFFIX }}\n"
        "  - {% raw %}${{ raw }} {{ also raw }}{% endraw %}\n"
        "  - {{ '${{ inside a jinja string }}' }}\n"
        "  - {# a comment with ${{ x }} #}done\n"
    )
    assert render(text, vars={"owner": "kamu"}) == (
        "args:\n"
        "  - ${{ env.GH_TOKEN }}\n"
        "  - kamu-${{ env.SUFFIX }}\n"
        "  - ${{ raw }} {{ also raw }}\n"
        "  - ${{ inside a jinja string }}\n"
        "  - done\n"
    )


@pytest.mark.parametrize(
    "text", ["{${{ a }}", "${{{ a }}}", "$${{ a }}", "${{ a }}}", "${{${{ a }} }}", "${{#"]
)
def test_engine_expression_edge_cases(text: str) -> None:
    assert render("{{ 'x' }}" + text) == "x" + text


def test_engine_expressions_do_not_shift_error_lines() -> None:
    assert problem("a: ${{ env.A }}\nb: ${{ env.B }}\nc: {{ missing }}\n").startswith("datasets/m.yaml:3:1:")


@pytest.mark.parametrize("path", REFERENCE_MANIFESTS, ids=lambda p: p.name)
def test_reference_manifests_render_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    assert render(data.decode("utf-8")).encode("utf-8") == data


def test_text_without_jinja_is_returned_as_is() -> None:
    text = "a: 1\r\nb: '}} %} #}'\r\n\tc: {not: jinja}\n\n"
    assert not has_jinja(text)
    assert render(text) == text


def test_trailing_newline_is_kept_when_rendering() -> None:
    assert render("a: {{ 1 }}\n\n") == "a: 1\n\n"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="${}#%-+ ab\n'\"", max_size=60))
def test_plain_text_and_engine_expressions_survive_jinja(text: str) -> None:
    """Any text whose only Jinja-looking syntax is ``${{`` renders to itself through Jinja."""
    if has_jinja(text):
        return
    assert render("{# force the Jinja path #}" + text) == text
