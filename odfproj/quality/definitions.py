"""Data test files: what a project declares about its datasets' data, read and checked without data.

A test file (matched by ``tests:`` in odfproj.yaml, default ``tests/**/*.yaml``) maps dataset names
to lists of tests; each test is a mapping with one kind key, and optionally ``name`` and ``severity``::

    org.example.weather.daily:
      - not_null: [location, event_time]
      - unique: [location, event_time]
      - accepted_values: {column: location, values: [Seattle, New York]}
      - relationships: {column: location, to: org.example.cities, field: name}
      - row_count: {min: 1, max: 100000}
      - freshness: {max_age: 30d, of: watermark}
      - sql: SELECT * FROM `org.example.weather.daily` WHERE temp_min > temp_max
        name: min_below_max
        severity: warn

Tests live in the project, not in the chain: they describe what we expect of the data, which may
change without the data changing, and a chain is append-only. Loading never raises on bad files:
every problem is returned at once, as ``validate`` reports manifests.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odfproj.errors import InvalidValueError, ManifestError
from odfproj.odf import model
from odfproj.odf.vocab import Vocab
from odfproj.odf.yaml_source import Path as DocPath
from odfproj.odf.yaml_source import Problem, SourceMap, load_yaml_document
from odfproj.project.config import ProjectConfig
from odfproj.project.manifests import ManifestsByName, load_manifests

__all__ = [
    "KINDS",
    "DataTest",
    "Severity",
    "TestSuite",
    "known_columns",
    "load_suite",
    "parse_duration",
    "validate_tests",
]


class Severity(StrEnum):
    #: A failure fails ``odfproj test`` and, in ``odfproj run``, stops the dataset's downstream.
    ERROR = "error"
    #: A failure is reported and nothing else happens.
    WARN = "warn"


#: Every test kind, with what it checks (for messages and docs).
KINDS = MappingProxyType(
    {
        "not_null": "the columns hold no null",
        "unique": "no two rows share the columns' values",
        "accepted_values": "the column holds only the listed values (nulls pass)",
        "relationships": "every value of the column is a key of another dataset",
        "row_count": "the number of rows is within min..max",
        "freshness": "the watermark or the last ingest is at most max_age old",
        "sql": "a query over the datasets returns no row (its rows are the failures)",
    }
)

_OPTIONS = ("name", "severity")
_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_FRESHNESS_OF = ("watermark", "ingest")


@dataclass(frozen=True)
class DataTest:
    """One declared test of one dataset; ``args`` are normalised (see ``_ARGUMENTS``)."""

    dataset: str
    kind: str
    args: Mapping[str, Any]
    name: str
    severity: Severity = Severity.ERROR
    file: str = ""
    line: int = 1
    col: int = 1

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @property
    def columns(self) -> tuple[str, ...]:
        """The dataset's columns the test names (none for row_count, freshness and sql)."""
        if "columns" in self.args:
            return tuple(self.args["columns"])
        return (self.args["column"],) if "column" in self.args else ()


@dataclass(frozen=True)
class TestSuite:
    """Every data test of a project and every problem of its test files."""

    __test__ = False  # not a pytest test class, despite the name

    tests: tuple[DataTest, ...] = ()
    problems: tuple[Problem, ...] = ()
    files: tuple[Path, ...] = field(default=(), compare=False)

    def of(self, dataset: str) -> tuple[DataTest, ...]:
        """The tests of one dataset (names are case-insensitive)."""
        return tuple(t for t in self.tests if t.dataset.lower() == dataset.lower())

    def selected(self, names: Iterable[str]) -> tuple[DataTest, ...]:
        wanted = {n.lower() for n in names}
        return tuple(t for t in self.tests if t.dataset.lower() in wanted)

    def raise_for_problems(self) -> None:
        """Refuse to run tests while any test file is wrong: every problem, one per line."""
        errors = [str(p) for p in self.problems if p.severity == "error"]
        if errors:
            raise ManifestError(errors)


def parse_duration(text: object) -> timedelta:
    """``30s``, ``15m``, ``12h``, ``7d`` or ``2w``; raises ``InvalidValueError`` otherwise."""
    match = _DURATION.match(str(text)) if isinstance(text, str | int) else None
    if match is None or isinstance(text, bool):
        raise InvalidValueError(
            f"bad duration {text!r}: expected a whole number and a unit s, m, h, d or w (e.g. 36h, 7d)"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def load_suite(config: ProjectConfig, manifests: ManifestsByName) -> TestSuite:
    """Read every test file of the project and check it against the project's manifests.

    Checked without data: known kinds and arguments, known datasets, durations, severities, and
    column names wherever a manifest fixes the dataset's columns (see :func:`known_columns`).
    """
    tests: list[DataTest] = []
    problems: list[Problem] = []
    files = tuple(config.test_files())
    for path in files:
        shown = _relative(path, config.root)
        refused = config.refusal(path)
        if refused:
            problems.append(Problem(shown, 1, 1, refused))
            continue
        try:
            data = path.read_bytes()
        except OSError as e:
            problems.append(Problem(shown, 1, 1, f"cannot read: {e.strerror}"))
            continue
        found, wrong = _parse_file(data, shown)
        tests.extend(found)
        problems.extend(wrong)
    for test in tests:
        problems.extend(_check_against(test, manifests))
    return TestSuite(tuple(tests), tuple(sorted(problems, key=lambda p: (p.file, p.line, p.col))), files)


def known_columns(snapshot: model.DatasetSnapshot | None) -> frozenset[str] | None:
    """The lower-cased columns of a dataset as its manifest fixes them, or None when it cannot tell.

    Known only for a root whose every source reads with a declared schema and has no preprocess
    step (a query may rename or drop anything); a derivative's columns are its query's business.
    """
    if snapshot is None or snapshot.kind is not model.DatasetKind.Root:
        return None
    sources = [
        e for e in snapshot.metadata or () if isinstance(e, model.SetPollingSource | model.AddPushSource)
    ]
    vocab = Vocab.of(next((e for e in snapshot.metadata or () if isinstance(e, model.SetVocab)), None))
    if not sources:
        return None
    columns = {vocab.event_time.lower()}
    from odfproj.odf.ddl import parse_ddl_schema  # pyarrow (0.1 s): only when a test names a root's columns

    for source in sources:
        schema = getattr(source.read, "schema", None)
        if source.preprocess is not None or not schema:
            return None
        try:
            columns |= {name.lower() for name in parse_ddl_schema(list(schema)).names}
        except InvalidValueError:
            return None  # the manifest's own validation reports it
    return frozenset(columns)


# --- one file --------------------------------------------------------------------------------------


def _parse_file(data: bytes, shown: str) -> tuple[list[DataTest], list[Problem]]:
    loaded = load_yaml_document(data, shown)
    problems = [
        Problem(p.file, p.line, p.col, p.message.replace("empty manifest", "empty test file"), p.severity)
        for p in loaded.problems
    ]
    document = loaded.document
    if document is None:
        return [], problems
    where = _Locator(shown, loaded.source_map)
    if not isinstance(document, dict):
        return [], [*problems, where.problem((), "expected a mapping of dataset names to lists of tests")]
    tests: list[DataTest] = []
    for dataset, items in document.items():
        if not isinstance(dataset, str) or not dataset.strip():
            problems.append(where.problem((dataset,), f"{dataset!r} is not a dataset name"))
            continue
        if not isinstance(items, list):
            problems.append(where.problem((dataset,), f"dataset {dataset}: expected a list of tests"))
            continue
        for index, item in enumerate(items):
            try:
                tests.append(_parse_test(dataset, item, where, (dataset, index)))
            except _Bad as bad:
                problems.append(where.problem(bad.path or (dataset, index), f"dataset {dataset}: {bad}"))
    return tests, problems


class _Bad(Exception):
    def __init__(self, message: str, path: DocPath = ()) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class _Locator:
    file: str
    source_map: SourceMap

    def problem(self, path: DocPath, message: str) -> Problem:
        line, col = self.source_map.locate(path)
        return Problem(self.file, line, col, message)

    def position(self, path: DocPath) -> tuple[int, int]:
        return self.source_map.locate(path)


def _parse_test(dataset: str, item: Any, where: _Locator, path: DocPath) -> DataTest:
    if isinstance(item, str):
        item = {item: None}
    if not isinstance(item, dict):
        raise _Bad(f"a test is a kind name or a mapping with one kind key, not {item!r}", path)
    kinds = [k for k in item if k not in _OPTIONS]
    if len(kinds) != 1:
        raise _Bad(
            f"a test has exactly one kind key ({', '.join(KINDS)}); found {', '.join(map(str, kinds)) or 'none'}",
            path,
        )
    kind = str(kinds[0])
    if kind not in KINDS:
        suggestion = difflib.get_close_matches(kind, KINDS, n=1)
        hint = f" (did you mean {suggestion[0]}?)" if suggestion else f" (known: {', '.join(KINDS)})"
        raise _Bad(f"unknown test kind {kind!r}{hint}", (*path, kind))
    args = _ARGUMENTS[kind](item[kind], (*path, kind))
    severity = item.get("severity", Severity.ERROR.value)
    if severity not in {s.value for s in Severity}:
        raise _Bad(f"{kind}: severity must be error or warn, not {severity!r}", (*path, "severity"))
    name = item.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise _Bad(f"{kind}: name must be a non-empty string", (*path, "name"))
    line, col = where.position(path)
    return DataTest(
        dataset=dataset,
        kind=kind,
        args=MappingProxyType(args),
        name=name or _default_name(kind, args),
        severity=Severity(severity),
        file=where.file,
        line=line,
        col=col,
    )


def _default_name(kind: str, args: Mapping[str, Any]) -> str:
    if kind in ("not_null", "unique"):
        return f"{kind}({', '.join(args['columns'])})"
    if kind == "accepted_values":
        return f"accepted_values({args['column']})"
    if kind == "relationships":
        return f"relationships({args['column']} -> {args['to']}.{args['field']})"
    if kind == "row_count":
        return f"row_count({args.get('min', '')}..{args.get('max', '')})"
    if kind == "freshness":
        return f"freshness({args['of']} within {args['max_age']})"
    return "sql"


# --- arguments of each kind -----------------------------------------------------------------------


def _mapping(value: Any, path: DocPath, kind: str, required: Sequence[str], optional: Sequence[str]) -> dict:
    if not isinstance(value, dict):
        raise _Bad(f"{kind}: expected a mapping with {', '.join(required)}", path)
    unknown = sorted(set(map(str, value)) - set(required) - set(optional))
    if unknown:
        raise _Bad(
            f"{kind}: unknown argument(s) {', '.join(unknown)} (known: {', '.join((*required, *optional))})",
            path,
        )
    missing = [k for k in required if value.get(k) in (None, "")]
    if missing:
        raise _Bad(f"{kind}: missing {', '.join(missing)}", path)
    return dict(value)


def _name(value: Any, path: DocPath, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f"{what} must be a column name, not {value!r}", path)
    return value


def _columns(value: Any, path: DocPath, kind: str) -> dict[str, Any]:
    if isinstance(value, dict):
        value = _mapping(value, path, kind, ("columns",), ())["columns"]
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names:
        raise _Bad(f"{kind}: expected a column name or a list of column names", path)
    return {"columns": tuple(_name(n, (*path, i), f"{kind}: a column") for i, n in enumerate(names))}


def _accepted_values(value: Any, path: DocPath) -> dict[str, Any]:
    args = _mapping(value, path, "accepted_values", ("column", "values"), ())
    values = args["values"]
    if not isinstance(values, list) or not values:
        raise _Bad("accepted_values: values must be a non-empty list", (*path, "values"))
    for i, v in enumerate(values):
        if not isinstance(v, str | int | float) or isinstance(v, bool):
            raise _Bad(f"accepted_values: {v!r} is not a string or a number", (*path, "values", i))
    return {
        "column": _name(args["column"], (*path, "column"), "accepted_values: column"),
        "values": tuple(values),
    }


def _relationships(value: Any, path: DocPath) -> dict[str, Any]:
    args = _mapping(value, path, "relationships", ("column", "to"), ("field",))
    column = _name(args["column"], (*path, "column"), "relationships: column")
    to = args["to"]
    if not isinstance(to, str) or not to.strip():
        raise _Bad(f"relationships: to must be a dataset name, not {to!r}", (*path, "to"))
    field_name = _name(args.get("field") or column, (*path, "field"), "relationships: field")
    return {"column": column, "to": to, "field": field_name}


def _row_count(value: Any, path: DocPath) -> dict[str, Any]:
    args = _mapping(value, path, "row_count", (), ("min", "max"))
    bounds = {k: v for k, v in args.items() if v is not None}
    if not bounds:
        raise _Bad("row_count: give min, max or both", path)
    for key, bound in bounds.items():
        if not isinstance(bound, int) or isinstance(bound, bool) or bound < 0:
            raise _Bad(f"row_count: {key} must be a whole number >= 0, not {bound!r}", (*path, key))
    if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
        raise _Bad(f"row_count: min {bounds['min']} is above max {bounds['max']}", path)
    return bounds


def _freshness(value: Any, path: DocPath) -> dict[str, Any]:
    args = _mapping(value, path, "freshness", ("max_age",), ("of",))
    try:
        max_age = parse_duration(args["max_age"])
    except InvalidValueError as e:
        raise _Bad(f"freshness: max_age: {e}", (*path, "max_age")) from None
    of = args.get("of") or "watermark"
    if of not in _FRESHNESS_OF:
        raise _Bad(f"freshness: of must be watermark or ingest, not {of!r}", (*path, "of"))
    return {"max_age": str(args["max_age"]).strip(), "seconds": max_age.total_seconds(), "of": of}


def _sql(value: Any, path: DocPath) -> dict[str, Any]:
    if not isinstance(value, str) or not value.strip():
        raise _Bad("sql: expected a query whose rows are the failures", path)
    return {"query": value.strip().rstrip(";").strip()}


_ARGUMENTS = {
    "not_null": lambda v, p: _columns(v, p, "not_null"),
    "unique": lambda v, p: _columns(v, p, "unique"),
    "accepted_values": _accepted_values,
    "relationships": _relationships,
    "row_count": _row_count,
    "freshness": _freshness,
    "sql": _sql,
}


# --- against the project -------------------------------------------------------------------------


def _check_against(test: DataTest, manifests: ManifestsByName) -> list[Problem]:
    problems: list[Problem] = []

    def wrong(message: str) -> None:
        problems.append(
            Problem(test.file, test.line, test.col, f"dataset {test.dataset}: {test.name}: {message}")
        )

    if test.dataset not in manifests:
        wrong(f"no manifest defines this dataset{_did_you_mean(test.dataset, manifests)}")
        return problems
    columns = known_columns(manifests[test.dataset].snapshot)
    if columns is not None:
        for column in test.columns:
            if column.lower() not in columns:
                wrong(f"unknown column {column!r} (the manifest declares {', '.join(sorted(columns))})")
    if test.kind == "relationships":
        to = test.args["to"]
        if to not in manifests:
            wrong(f"relationships: no manifest defines dataset {to}{_did_you_mean(to, manifests)}")
        else:
            target = known_columns(manifests[to].snapshot)
            if target is not None and test.args["field"].lower() not in target:
                wrong(f"relationships: dataset {to} has no column {test.args['field']!r}")
    return problems


def _did_you_mean(name: str, manifests: ManifestsByName) -> str:
    close = difflib.get_close_matches(name, list(manifests), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def validate_tests(
    config: ProjectConfig, *, vars_override: Mapping[str, Any] | None = None, target: str | None = None
) -> TestSuite:
    """The project's test files checked against its manifests, rendered as ``validate`` renders them.

    The manifests are loaded only when there is a test file, so a project without tests pays nothing.
    """
    if not config.test_files():
        return TestSuite()
    manifests = load_manifests(config, vars_override=vars_override, target=target)
    return load_suite(config, manifests.by_name)
