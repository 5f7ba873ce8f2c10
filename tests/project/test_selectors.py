"""Selectors: the grammar, every method, graph operators, --exclude and --changed-since on real repos."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import git
import pytest

from odfproj.project.config import ProjectConfig, load_project
from odfproj.project.git import GitError
from odfproj.project.graph import DatasetGraph, GraphError
from odfproj.project.manifests import ProjectManifests, load_manifests
from odfproj.project.selectors import (
    Selection,
    SelectorError,
    SelectorSpec,
    parse_selector,
    parse_selectors,
    select,
)
from tests.project.conftest import ALL_DATASETS, commit_all, derivative_manifest, root_manifest

ORDERS = "com.example.orders"
ENRICHED = "com.example.orders-enriched"
REVENUE = "com.example.revenue"
DAILY = "com.example.revenue-daily"
FX = "com.example.fx-rates"
CUSTOMERS = "com.example.customers"
WEATHER = "org.other.weather"


def load(config: ProjectConfig) -> tuple[DatasetGraph, ProjectManifests]:
    manifests = load_manifests(config)
    assert manifests.ok, [str(p) for p in manifests.problems]
    return DatasetGraph.build(manifests), manifests


def run(
    config: ProjectConfig,
    select_: Sequence[str] = (),
    exclude: Sequence[str] = (),
    changed_since: str | None = None,
) -> Selection:
    graph, manifests = load(config)
    return select(graph, manifests, select_, exclude, changed_since)


def names(config: ProjectConfig, *items: str, exclude: Sequence[str] = ()) -> tuple[str, ...]:
    result = run(config, items, exclude)
    assert not result.warnings, result.warnings
    return result.names


# ------------------------------------------------------------------------------------------------
# Grammar


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("com.example.orders", SelectorSpec("com.example.orders", "name", "com.example.orders")),
        ("+a", SelectorSpec("+a", "name", "a", upstream=True)),
        ("a+", SelectorSpec("a+", "name", "a", downstream=True)),
        ("+com.*+", SelectorSpec("+com.*+", "name", "com.*", upstream=True, downstream=True)),
        ("path:datasets/*.yaml", SelectorSpec("path:datasets/*.yaml", "path", "datasets/*.yaml")),
        ("+tag:finance", SelectorSpec("+tag:finance", "tag", "finance", upstream=True)),
        ("TAG:x+", SelectorSpec("TAG:x+", "tag", "x", downstream=True)),
    ],
)
def test_parse_selector(item: str, expected: SelectorSpec) -> None:
    assert parse_selector(item) == expected


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("+", "expected \\[\\+\\]NAME\\[\\+\\], path:GLOB or tag:KEYWORD"),
        ("tag:", "expected"),
        ("fqn:a", "unknown method 'fqn'"),
        ("a,b", "intersections with ',' are not supported"),
        ("a+b", "'\\+' may only start or end a selector"),
        ("++a", "'\\+' may only start or end a selector"),
        ("bad_name", "a dataset name has letters, digits"),
    ],
)
def test_bad_selectors_are_clear_errors(item: str, message: str) -> None:
    with pytest.raises(SelectorError, match=f"^invalid selector {re.escape(repr(item))}: .*{message}"):
        parse_selector(item)


def test_items_split_on_spaces_and_repeat() -> None:
    assert [s.raw for s in parse_selectors(["a  +b", "tag:x"])] == ["a", "+b", "tag:x"]
    assert parse_selectors(["  "]) == ()


# ------------------------------------------------------------------------------------------------
# Methods and operators


def test_no_select_means_everything_in_topological_order(project: ProjectConfig) -> None:
    graph, _ = load(project)
    assert run(project) == Selection(graph.topological_order(), ())
    assert set(run(project).names) == set(ALL_DATASETS)


def test_exact_name_is_case_insensitive(project: ProjectConfig) -> None:
    assert names(project, "COM.Example.Revenue") == (REVENUE,)


def test_wildcards(project: ProjectConfig) -> None:
    assert names(project, "com.example.revenue*") == (REVENUE, DAILY)
    assert names(project, "*.weather") == (WEATHER,)
    assert names(project, "com.example.[fo]*") == (FX, ORDERS, ENRICHED)
    assert names(project, "com.example.orders?enriched") == (ENRICHED,)


def test_upstream_downstream_and_both(project: ProjectConfig) -> None:
    assert names(project, f"+{REVENUE}") == (CUSTOMERS, FX, ORDERS, ENRICHED, REVENUE)
    assert names(project, f"{ENRICHED}+") == (ENRICHED, REVENUE, DAILY)
    assert names(project, f"+{ENRICHED}+") == (CUSTOMERS, ORDERS, ENRICHED, REVENUE, DAILY)


def test_path_globs(project: ProjectConfig) -> None:
    assert names(project, "path:datasets/finance/*") == (FX, REVENUE, DAILY)
    assert names(project, "path:datasets/finance") == (FX, REVENUE, DAILY)
    assert names(project, "path:./datasets/sales/") == (CUSTOMERS, ORDERS, ENRICHED)
    assert names(project, "path:**/revenue*.yaml") == (REVENUE, DAILY)
    assert names(project, "path:datasets/[o-z]*/*") == (CUSTOMERS, ORDERS, ENRICHED, WEATHER)
    assert names(project, "path:datasets/[!f]*") == (CUSTOMERS, ORDERS, ENRICHED, WEATHER)
    assert names(project, "path:datasets/?inance/fx-rates.yaml") == (FX,)
    assert names(project, f"path:{project.root}/datasets/other/weather.yaml") == (WEATHER,)
    assert names(project, "path:datasets/sales/orders.yaml+") == (ORDERS, ENRICHED, REVENUE, DAILY)


def test_single_star_stays_in_its_folder(project: ProjectConfig) -> None:
    result = run(project, ["path:datasets/*.yaml"])
    assert result.names == ()
    assert result.warnings == ("--select 'path:datasets/*.yaml' matched no datasets",)


def test_tags_are_case_insensitive_and_rendered(project: ProjectConfig) -> None:
    assert names(project, "tag:FINANCE") == (FX, ORDERS, REVENUE)
    assert names(project, "tag:eur") == (FX,)  # the keyword is {{ var('currency') }}
    assert names(project, "tag:report*") == (REVENUE, DAILY)
    assert names(project, "+tag:crm+") == (CUSTOMERS, ENRICHED, REVENUE, DAILY)


def test_union_of_items_and_flags(project: ProjectConfig) -> None:
    assert names(project, f"{WEATHER} tag:crm", FX) == (CUSTOMERS, FX, WEATHER)


def test_exclude_is_subtracted(project: ProjectConfig) -> None:
    assert names(project, f"+{DAILY}", exclude=["tag:finance"]) == (CUSTOMERS, ENRICHED, DAILY)
    assert names(project, exclude=["com.example.*"]) == (WEATHER,)
    assert names(project, f"{ORDERS}+", exclude=[f"{REVENUE}+"]) == (ORDERS, ENRICHED)


def test_empty_selection_is_allowed(project: ProjectConfig) -> None:
    assert names(project, WEATHER, exclude=[WEATHER]) == ()


def test_selectors_matching_nothing_are_warnings(project: ProjectConfig) -> None:
    result = run(project, ["nothing.here tag:nope", ORDERS], exclude=["path:nowhere/*"])
    assert result.names == (ORDERS,)
    assert result.warnings == (
        "--select 'nothing.here' matched no datasets",
        "--select 'tag:nope' matched no datasets",
        "--exclude 'path:nowhere/*' matched no datasets",
    )


def test_bad_syntax_raises_before_anything_else(project: ProjectConfig) -> None:
    with pytest.raises(SelectorError, match="unknown method 'model'"):
        run(project, ["model:orders"])


def test_a_cycle_makes_selection_impossible(
    make_project: Callable[[Mapping[str, str]], ProjectConfig],
) -> None:
    config = make_project(
        {
            "datasets/a.yaml": derivative_manifest("a", ["b"]),
            "datasets/b.yaml": derivative_manifest("b", ["a"]),
        }
    )
    manifests = load_manifests(config)
    with pytest.raises(
        GraphError, match=r"dependency cycle: a -> b -> a \(datasets/a.yaml, datasets/b.yaml\)"
    ):
        select(DatasetGraph.build(manifests), manifests, ["a"])


# ------------------------------------------------------------------------------------------------
# --changed-since


def edit(config: ProjectConfig, rel: str, old: str, new: str) -> None:
    path = config.root / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new))


def test_changed_manifest_and_its_downstream_are_selected(
    git_project: tuple[git.Repo, ProjectConfig],
) -> None:
    repo, config = git_project
    edit(config, "datasets/sales/orders.yaml", "- id\n", "- id\n          - value\n")
    result = run(config, changed_since="HEAD")
    assert result == Selection((ORDERS, ENRICHED, REVENUE, DAILY), ())
    commit_all(repo, "orders: wider key")
    assert run(config, changed_since="HEAD~1").names == (ORDERS, ENRICHED, REVENUE, DAILY)
    assert run(config, changed_since="HEAD") == Selection((), ("no manifest changed since 'HEAD'",))


def test_template_change_that_renders_the_same_is_not_selected(
    git_project: tuple[git.Repo, ProjectConfig],
) -> None:
    _, config = git_project
    edit(config, "datasets/finance/fx-rates.yaml", "/data/fx/{{ target }}/*.csv", "/data/fx/dev/*.csv")
    edit(config, "datasets/finance/fx-rates.yaml", "- {{ var('currency') }}", "- {{ 'EU' ~ 'R' }}")
    assert run(config, changed_since="HEAD").names == ()


def test_same_template_rendering_differently_is_selected(git_project: tuple[git.Repo, ProjectConfig]) -> None:
    """A macro edit changes what the manifests using it render to, though the manifests are unchanged."""
    _, config = git_project
    (config.root / "macros/sql.sql").write_text(
        '{% macro select_all(table) -%}\n"SELECT *, 1 AS v FROM `{{ table }}`"\n{%- endmacro %}\n'
    )
    assert run(config, changed_since="HEAD").names == (REVENUE, DAILY)


def test_macro_refactoring_that_renders_the_same_is_not_selected(
    git_project: tuple[git.Repo, ProjectConfig],
) -> None:
    _, config = git_project
    (config.root / "macros/sql.sql").write_text(
        "{%- macro select_all(table) -%}\n{{ '\"SELECT * FROM `' ~ table ~ '`\"' }}\n{%- endmacro -%}\n"
    )
    (config.root / "macros/unused.j2").write_text("{% macro unused() %}{% endmacro %}\n")
    assert run(config, changed_since="HEAD").names == ()


def test_new_manifest_counts_as_changed(git_project: tuple[git.Repo, ProjectConfig]) -> None:
    _, config = git_project
    (config.root / "datasets/other/new.yaml").write_text(root_manifest("org.other.new"))
    assert run(config, changed_since="HEAD").names == ("org.other.new",)


def test_changed_since_narrows_select_then_exclude_applies(
    git_project: tuple[git.Repo, ProjectConfig],
) -> None:
    _, config = git_project
    edit(config, "datasets/sales/customers.yaml", "description: An example dataset", "description: Customers")
    edit(config, "datasets/other/weather.yaml", "description: An example dataset", "description: Weather")
    assert run(config, changed_since="HEAD").names == (CUSTOMERS, ENRICHED, REVENUE, DAILY, WEATHER)
    assert run(config, ["tag:reporting", WEATHER], changed_since="HEAD").names == (REVENUE, DAILY, WEATHER)
    assert run(config, exclude=[DAILY], changed_since="HEAD").names == (CUSTOMERS, ENRICHED, REVENUE, WEATHER)


def test_project_in_a_subfolder_and_vars_override(git_project: tuple[git.Repo, ProjectConfig]) -> None:
    """Old text is rendered with the same vars as the new: an override alone changes nothing."""
    _, config = git_project
    assert config.root != Path(git_project[0].working_tree_dir or "")
    manifests = load_manifests(config, vars_override={"landing": "s3://elsewhere"})
    graph = DatasetGraph.build(manifests)
    assert select(graph, manifests, changed_since="HEAD").names == ()


def test_unknown_revision_is_an_error(git_project: tuple[git.Repo, ProjectConfig]) -> None:
    _, config = git_project
    with pytest.raises(GitError, match=r"^unknown git revision 'no-such-branch'$"):
        run(config, changed_since="no-such-branch")


def test_changed_since_needs_a_repository(project: ProjectConfig) -> None:
    with pytest.raises(SelectorError, match="needs a git repository"):
        run(project, changed_since="HEAD")


def test_repo_root_can_be_given(git_project: tuple[git.Repo, ProjectConfig], tmp_path: Path) -> None:
    repo, config = git_project
    edit(config, "datasets/other/weather.yaml", "/data/in/", "/data/weather/")
    graph, manifests = load(load_project(config.root))
    result = select(graph, manifests, changed_since="HEAD", repo_root=Path(repo.working_tree_dir or ""))
    assert result.names == (WEATHER,)
