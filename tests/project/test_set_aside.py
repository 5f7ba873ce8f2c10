"""The loader sets aside a manifest with errors outside a narrowed selection, and stops for the rest.

The shop project of conftest (orders, customers -> orders-enriched -> revenue -> revenue-daily, fx-rates,
weather) with one manifest broken in each way a manifest can be: its own errors, a second file with its
name, an unknown input, no readable name; and the project-wide problems (a macro file, a cycle) that stop
every request.
"""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from odfproj.errors import ManifestError
from odfproj.project.config import ProjectConfig, load_project
from odfproj.project.loader import LoadedProject, PlanRequest, load_manifests_of, load_selected
from tests.project.conftest import commit_all, derivative_manifest, root_manifest, write_files

ORDERS = "com.example.orders"
ENRICHED = "com.example.orders-enriched"
REVENUE = "com.example.revenue"
DAILY = "com.example.revenue-daily"
WEATHER = "org.other.weather"

#: A root whose read step is no ReadStep, with keywords: a schema violation at line 12.
BROKEN_ROOT = root_manifest("com.example.raw", keywords=["raw"]).replace("kind: Csv", "kind: Cvs")


def load(config: ProjectConfig, **request) -> LoadedProject:
    wanted = PlanRequest(**request)
    return load_selected(config, wanted, load_manifests_of(config, wanted), known_ids={})


def problems_of(config: ProjectConfig, **request) -> list[str]:
    with pytest.raises(ManifestError) as raised:
        load(config, **request)
    return raised.value.problems


def broken(project_dir: Path, files: dict[str, str]) -> ProjectConfig:
    write_files(project_dir, files)
    return load_project(project_dir)


def test_outside_the_selection_a_broken_manifest_is_one_warning(project_dir: Path) -> None:
    config = broken(project_dir, {"datasets/raw.yaml": BROKEN_ROOT})
    loaded = load(config, select=(f"{ORDERS}+",))
    assert loaded.selection.names == (ORDERS, ENRICHED, "com.example.revenue", DAILY)
    [warning] = loaded.selection.warnings
    assert warning.startswith("datasets/raw.yaml:12:15:")
    assert "com.example.raw: unknown kind 'Cvs'" in warning and warning.endswith("(not selected: skipped)")
    # Without a selector, everything is selected: the broken manifest stops the request, as before.
    [problem] = problems_of(config)
    assert problem.startswith("datasets/raw.yaml:12:15:") and "not selected" not in problem


def test_a_broken_manifest_is_found_by_the_keywords_and_inputs_it_declares(project_dir: Path) -> None:
    view = derivative_manifest("com.example.orders-view", [ORDERS]).replace("kind: Sql", "kind: Sqll")
    config = broken(project_dir, {"datasets/raw.yaml": BROKEN_ROOT, "datasets/view.yaml": view})
    [problem] = problems_of(config, select=("tag:raw",))
    assert problem.startswith("datasets/raw.yaml:12:15:")
    downstream = problems_of(config, select=(f"{ORDERS}+",))  # reads orders, though it does not load
    assert [p.split(":")[0] for p in downstream] == ["datasets/view.yaml"]
    loaded = load(config, select=(ORDERS,))
    assert loaded.selection.names == (ORDERS,) and len(loaded.selection.warnings) == 2


def test_a_selected_reader_of_a_broken_manifest_fails_naming_both(project_dir: Path) -> None:
    config = broken(
        project_dir, {"datasets/sales/orders.yaml": BROKEN_ROOT.replace("com.example.raw", ORDERS)}
    )
    [problem] = problems_of(config, select=(ENRICHED,))
    assert problem.startswith(f"datasets/sales/orders-enriched.yaml:9:23: {ENRICHED} reads {ORDERS}, ")
    assert f"(datasets/sales/orders.yaml:12:15: {ORDERS}: unknown kind 'Cvs'" in problem
    assert problem.endswith(f"--exclude '{ORDERS}+'")
    # Through the selection: revenue is selected, its input enriched too, and enriched reads orders.
    [problem] = problems_of(config, select=(f"+{DAILY}",), exclude=(ORDERS,))
    assert f"{ENRICHED} reads {ORDERS}" in problem
    # Only what the selection reads directly counts: revenue alone reads enriched, which loads.
    assert load(config, select=(REVENUE,)).selection.names == (REVENUE,)
    assert load(config, exclude=(f"{ORDERS}+",)).selection.warnings[0].endswith("(not selected: skipped)")


def test_a_second_file_with_a_name_and_an_unknown_input_are_the_manifest_s_problems(
    project_dir: Path,
) -> None:
    files = {
        "datasets/z-orders-again.yaml": root_manifest(ORDERS),
        "datasets/typo.yaml": derivative_manifest("com.example.typo", ["com.example.ordres"]),
    }
    config = broken(project_dir, files)
    loaded = load(config, select=(WEATHER,))
    assert loaded.selection.names == (WEATHER,)
    typo, again = loaded.selection.warnings
    assert typo.startswith("datasets/typo.yaml:") and "unknown input dataset 'com.example.ordres'" in typo
    assert (
        again.startswith("datasets/z-orders-again.yaml:") and f"dataset {ORDERS!r} is defined twice" in again
    )
    [problem] = problems_of(config, select=(ORDERS,))
    assert "is defined twice" in problem
    [problem] = problems_of(
        config, select=("path:datasets/z-orders-again.yaml",)
    )  # the second file: its name
    assert "is defined twice" in problem
    assert len(problems_of(config, select=(ENRICHED,))) == 1  # reads orders, whose definition is ambiguous


def test_every_file_with_a_name_adds_what_it_reads_to_the_graph(project_dir: Path) -> None:
    config = broken(project_dir, {"datasets/z-weather.yaml": derivative_manifest(WEATHER, [ORDERS])})
    loaded = load(config, exclude=(f"{ORDERS}+",))  # the second weather reads orders: weather is left out
    assert WEATHER not in loaded.selection.names
    [warning] = loaded.selection.warnings
    assert warning.startswith("datasets/z-weather.yaml:") and "is defined twice" in warning
    assert loaded.graph.input_refs(WEATHER) == ()  # its inputs are the first file's


def test_a_manifest_without_a_name_is_covered_by_path_or_by_selecting_everything(project_dir: Path) -> None:
    config = broken(project_dir, {"datasets/bad.yaml": "kind: DatasetSnapshot\n\tversion: 1\n"})
    loaded = load(config, select=(WEATHER,))
    [warning] = loaded.selection.warnings
    assert warning.startswith("datasets/bad.yaml:2:") and warning.endswith("(not selected: skipped)")
    assert load(config, exclude=("path:datasets/bad.yaml",)).selection.warnings == (warning,)
    assert problems_of(config, exclude=(WEATHER,))[0].startswith("datasets/bad.yaml:2:")
    [problem] = problems_of(config, select=("path:datasets",))
    assert problem.startswith("datasets/bad.yaml:2:")
    problems_of(config, select=("path:datasets/bad.yaml",))  # and it did match something: no warning to say


def test_changed_since_stops_for_a_broken_manifest_only_if_it_changed(
    git_project: tuple[git.Repo, ProjectConfig],
) -> None:
    repo, config = git_project
    write_files(config.root, {"datasets/raw.yaml": BROKEN_ROOT, "datasets/bad.yaml": "a: [\n"})
    commit_all(repo, "two broken manifests")
    (config.root / "datasets/other/weather.yaml").write_text(root_manifest(WEATHER, path="/data/w/*.csv"))
    loaded = load(config, changed_since="HEAD")
    assert loaded.selection.names == (WEATHER,) and len(loaded.selection.warnings) == 2
    write_files(config.root, {"datasets/bad.yaml": "a: [\n\n"})
    [problem] = problems_of(config, changed_since="HEAD")
    assert problem.startswith("datasets/bad.yaml:")


def test_a_macro_problem_or_a_cycle_stops_every_request(project_dir: Path) -> None:
    config = broken(project_dir, {"macros/broken.j2": "{% macro x( %}\n"})
    assert [p.split(":")[0] for p in problems_of(config, select=(WEATHER,))] == ["macros/broken.j2"]
    (project_dir / "macros/broken.j2").unlink()
    config = broken(
        project_dir,
        {
            "datasets/a.yaml": derivative_manifest("a", ["b"]),
            "datasets/b.yaml": derivative_manifest("b", ["a"]),
        },
    )
    [problem] = problems_of(config, select=(WEATHER,))
    assert "dependency cycle: a -> b -> a" in problem
