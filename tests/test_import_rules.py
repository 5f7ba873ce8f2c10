"""The layers of docs/design/architecture.md, checked on the source: no import runs up, sideways or in a circle.

Parses every module of ``odfproj/`` (no import is executed, no JVM) and collects every ``odfproj``
import, including those inside functions and under ``TYPE_CHECKING``: a lazy import hides a
dependency from the reader, not from the design.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

import odfproj

PACKAGE = Path(odfproj.__file__).parent

#: The layers, lowest first; a package may import its own layer's package and the layers below.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"odf"}),
    frozenset({"storage"}),
    frozenset({"remote"}),
    frozenset({"engine"}),
    frozenset({"ingest", "transform", "state"}),
    frozenset({"project"}),
    frozenset({"plan"}),
    frozenset({"quality"}),
    frozenset({"run"}),
    frozenset({"docsite"}),
    frozenset({"cli"}),
)
#: Modules every layer may use: the package itself, the error hierarchy, and where environments live.
BASE = frozenset({"odfproj", "odfproj.errors", "odfproj.workspace_paths"})
#: Imports between packages of one layer that architecture.md allows ("A dataset's data").
SIDEWAYS = frozenset({("ingest", "state"), ("transform", "state")})
#: Lower layers a package may not import although the order would allow it, with the reason in
#: architecture.md: reading a project writes nothing, so ``project`` never reaches the workspace's files.
SKIPPED = frozenset({("project", "storage")})


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the ``odfproj`` modules it imports (``from a.b import c`` counts as ``a.b.c`` if c is one)."""
    paths = sorted(package.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
        graph[module_name(path)] = {t for t in targets if t in modules and t != module_name(path)}
    return graph


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else None


def _layer(package: str) -> int:
    found = [i for i, layer in enumerate(LAYERS) if package in layer]
    assert found, (
        f"odfproj/{package}/ is in no layer: add it to LAYERS where docs/design/architecture.md puts it"
    )
    return found[0]


def forbidden_edges(graph: Mapping[str, set[str]]) -> list[str]:
    problems = []
    for source, targets in sorted(graph.items()):
        here = _package(source)
        for target in sorted(targets):
            there = _package(target)
            if target in BASE or here == there:
                continue
            if here is None:  # odfproj/__main__.py and friends: the entry point may import anything
                continue
            if there is None:
                problems.append(f"{source} -> {target} (a base module may not be imported upwards)")
            elif (here, there) in SKIPPED:
                problems.append(f"{source} -> {target} ({here} may not import {there})")
            elif _layer(there) > _layer(here):
                problems.append(f"{source} -> {target} ({there} is a higher layer than {here})")
            elif _layer(there) == _layer(here) and (here, there) not in SIDEWAYS:
                problems.append(f"{source} -> {target} ({here} may not import {there}, its own layer)")
    return problems


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_no_import_runs_up_or_sideways_except_as_the_architecture_note_says(graph) -> None:
    assert forbidden_edges(graph) == []


def test_no_import_cycle(graph) -> None:
    assert cycles(graph) == []


def test_the_checks_catch_what_they_are_for() -> None:
    """The rules on a made-up graph: a cycle, an upward and a sideways import are all reported."""
    graph = {
        "odfproj.state.a": {"odfproj.state.b"},
        "odfproj.state.b": {"odfproj.state.a"},
        "odfproj.storage.x": {"odfproj.plan.y"},
        "odfproj.state.c": {"odfproj.transform.d"},
        "odfproj.ingest.e": {"odfproj.state.a", "odfproj.errors"},
    }
    assert cycles(graph) == [["odfproj.state.a", "odfproj.state.b"]]
    assert forbidden_edges(graph) == [
        "odfproj.state.c -> odfproj.transform.d (state may not import transform, its own layer)",
        "odfproj.storage.x -> odfproj.plan.y (plan is a higher layer than storage)",
    ]
