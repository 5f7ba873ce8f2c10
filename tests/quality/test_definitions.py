"""Data test files read and checked without data or a JVM: kinds, arguments, datasets, columns, durations."""

from __future__ import annotations

import contextlib
import io
import sys
from datetime import timedelta

import pytest

from odfproj.cli.main import main
from odfproj.errors import InvalidValueError
from odfproj.project.config import WORKSPACE_ENV, load_project
from odfproj.project.manifests import load_manifests
from odfproj.quality.checks import failing_rows_query, quote_literal
from odfproj.quality.definitions import Severity, load_suite, parse_duration
from tests.quality.project import TESTS, make_project


def suite_of(tmp_path, tests: str):
    config = load_project(make_project(tmp_path / "p", tests))
    return load_suite(config, load_manifests(config).by_name)


def odfproj(monkeypatch, cwd, *args: str) -> tuple[int, str]:
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["odfproj", *args])
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            main()
        except SystemExit as e:
            return (e.code if isinstance(e.code, int) else 0), output.getvalue()
    return 0, output.getvalue()


def test_the_example_file_loads_with_positions_defaults_and_severities(tmp_path):
    suite = suite_of(tmp_path, TESTS)
    assert suite.problems == ()
    assert [(t.dataset, t.kind) for t in suite.tests][:4] == [
        ("cities", "not_null"),
        ("cities", "unique"),
        ("cities", "row_count"),
        ("cities", "freshness"),
    ]
    first = suite.tests[0]
    assert first.where == "tests/data.yaml:2:5" and first.name == "not_null(name)"
    assert first.severity is Severity.ERROR and first.columns == ("name",)
    warn = next(t for t in suite.tests if t.kind == "sql")
    assert warn.name == "no_negative_amounts" and warn.severity is Severity.WARN
    assert [t.kind for t in suite.of("VISITS")] == ["not_null", "accepted_values", "relationships", "sql"]


def test_test_files_are_not_manifests_even_under_a_catch_all_glob(tmp_path):
    root = make_project(tmp_path / "p")
    (root / "odfproj.yaml").write_text("name: q\nmanifests: '**/*.yaml'\n")
    config = load_project(root)
    assert root / "tests" / "data.yaml" in config.test_files()
    assert all("tests" not in p.parts[-2:-1] for p in config.manifest_files())
    assert len(config.manifest_files()) == 3


@pytest.mark.parametrize(
    ("tests", "expected"),
    [
        (
            "cities:\n  - not_nul: name\n",
            "tests/data.yaml:2:5: dataset cities: unknown test kind 'not_nul' (did you mean not_null?)",
        ),
        (
            "cities:\n  - not_null: nmae\n",
            "tests/data.yaml:2:5: dataset cities: not_null(nmae): unknown column 'nmae'",
        ),
        (
            "citys:\n  - not_null: name\n",
            "dataset citys: not_null(name): no manifest defines this dataset (did you mean cities?)",
        ),
        (
            "cities:\n  - freshness: {max_age: 3 days}\n",
            "dataset cities: freshness: max_age: bad duration '3 days'",
        ),
        ("cities:\n  - row_count: {min: 5, max: 1}\n", "dataset cities: row_count: min 5 is above max 1"),
        (
            "cities:\n  - unique: name\n    severity: fatal\n",
            "dataset cities: unique: severity must be error or warn",
        ),
        (
            "visits:\n  - relationships: {column: city, to: cities, field: town}\n",
            "dataset cities has no column 'town'",
        ),
        ("visits:\n  - accepted_values: {column: city}\n", "accepted_values: missing values"),
        ("visits:\n  - sql: ''\n", "sql: expected a query whose rows are the failures"),
        ("- not_null: x\n", "tests/data.yaml:1:1: expected a mapping of dataset names to lists of tests"),
        ("cities: [\n", "tests/data.yaml:"),
    ],
)
def test_a_wrong_test_is_one_line_naming_file_dataset_and_cause(tmp_path, tests, expected):
    suite = suite_of(tmp_path, tests)
    assert len(suite.problems) == 1, suite.problems
    assert expected in str(suite.problems[0])
    assert "\n" not in str(suite.problems[0])


def test_columns_of_a_derivative_are_not_guessed(tmp_path):
    suite = suite_of(tmp_path, "visits.copy:\n  - not_null: anything\n")
    assert suite.problems == ()


def test_validate_reports_test_file_problems_with_the_manifests(tmp_path, monkeypatch):
    root = make_project(tmp_path / "p", "cities:\n  - not_null: nmae\n  - freshness: {max_age: soon}\n")
    code, out = odfproj(monkeypatch, root, "validate")
    assert code == 1, out
    assert "tests/data.yaml:2:5: dataset cities: not_null(nmae): unknown column 'nmae'" in out
    assert "dataset cities: freshness: max_age: bad duration 'soon'" in out
    assert "2 problem(s) in 1 of 3 manifest(s) and 1 test file(s)" in out
    assert "Traceback" not in out
    (root / "tests" / "data.yaml").write_text(TESTS)
    assert odfproj(monkeypatch, root, "validate") == (0, "3 manifest(s) and 1 test file(s) valid\n")


def test_test_refuses_a_wrong_test_file_before_starting_spark(tmp_path, monkeypatch):
    root = make_project(tmp_path / "p", "cities:\n  - uniq: name\n")
    code, out = odfproj(monkeypatch, root, "test")
    assert code == 1 and "tests/data.yaml:2:5: dataset cities: unknown test kind 'uniq'" in out
    assert "Traceback" not in out


def test_durations():
    assert parse_duration("36h") == timedelta(hours=36)
    assert parse_duration(" 2w ") == timedelta(weeks=2)
    for bad in ("", "3", "1.5d", "-1d", True, "1y"):
        with pytest.raises(InvalidValueError):
            parse_duration(bad)


def test_generated_queries_quote_names_and_values(tmp_path):
    suite = suite_of(
        tmp_path, "cities:\n  - accepted_values: {column: name, values: [\"O'Hare\", 'a\\b', 3]}\n"
    )
    assert suite.problems == ()
    query = failing_rows_query(suite.tests[0])
    assert query == (
        "SELECT * FROM `cities` WHERE `name` IS NOT NULL AND `name` NOT IN ('O\\'Hare', 'a\\\\b', 3)"
    )
    assert quote_literal("x`y") == "'x`y'"
