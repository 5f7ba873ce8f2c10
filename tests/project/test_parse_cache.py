"""The parse cache (project.parse_cache): an unchanged manifest is not rendered, validated and parsed again.

Each test loads a real project twice or more and counts the manifests that were really built (rendered,
validated, parsed) by wrapping ``build_manifest``; what a load returns must be the same whether it came
from the cache or not. The cache's threshold is lowered so that a handful of files is enough.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import odfproj
from odfproj.project import manifests as manifests_module
from odfproj.project import parse_cache, user_cache
from odfproj.project.config import ProjectConfig, load_project
from odfproj.project.graph import DatasetGraph
from odfproj.project.manifests import ProjectManifests, load_manifests
from tests import manifests

FILES = {
    "datasets/a.yaml": manifests.root("org.cache.a", path="data/a/*.csv", schema=("id BIGINT", "v STRING")),
    "datasets/b.yaml": manifests.root(
        "org.cache.b",
        path="data/b/*.csv",
        schema=("id BIGINT",),
        extra=[manifests.set_info("suffix {{ var('suffix') }}")],
    ),
    "datasets/c.yaml": manifests.derivative("org.cache.c", ["org.cache.a"], "SELECT * FROM `org.cache.a`"),
    "datasets/d.yaml": manifests.derivative(
        "org.cache.d",
        ["org.cache.a"],
        "SELECT * FROM `org.cache.a`",
        extra=[manifests.set_info("region {{ env_var('REGION') }}")],
    ),
}
CONFIG = "name: cache\nvars:\n  suffix: v1\nenv: [REGION]\n"
ENVIRON = {"REGION": "eu"}


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(user_cache.CACHE_ENV, raising=False)
    monkeypatch.setattr(parse_cache, "MIN_MANIFESTS", 1)
    return home


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The manifests really built since the list was last cleared (the real ``build_manifest`` runs)."""
    seen: list[str] = []
    real = manifests_module.build_manifest

    def counting(path: Path, rel_path: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(rel_path)
        return real(path, rel_path, *args, **kwargs)

    monkeypatch.setattr(manifests_module, "build_manifest", counting)
    return seen


@pytest.fixture
def project(tmp_path: Path) -> ProjectConfig:
    root = tmp_path / "project"
    for rel, text in {"odfproj.yaml": CONFIG, **FILES}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return load_project(root)


def _load(config: ProjectConfig, **kwargs: Any) -> ProjectManifests:
    kwargs.setdefault("environ", ENVIRON)
    return load_manifests(config, **kwargs)


def _twice(
    config: ProjectConfig, built: list[str], change: Callable[[], Mapping[str, Any]]
) -> tuple[ProjectManifests, list[str]]:
    """Load (filling the cache), apply ``change`` (it returns the next load's arguments), load again."""
    _load(config)
    arguments = change()
    built.clear()
    return _load(config, **arguments), sorted(built)


def _same(a: ProjectManifests, b: ProjectManifests) -> None:
    assert a.manifests == b.manifests
    assert [m.source_text for m in a.manifests] == [m.source_text for m in b.manifests]
    assert [str(p) for p in a.problems] == [str(p) for p in b.problems]


def test_an_unchanged_project_is_loaded_from_the_cache_as_it_was_parsed(project, built, cache_home):
    first = _load(project)
    assert sorted(built) == sorted(FILES)
    built.clear()
    second = _load(project)
    assert built == []
    _same(first, second)
    assert second.get("org.cache.b").snapshot.metadata[-1].description == "suffix v1"
    assert list((cache_home / "odfproj" / "parse").glob("*.json"))
    assert not (project.root / ".odf").exists(), "the cache is kept outside the project and its workspace"


def test_a_changed_file_is_parsed_again_and_only_it(project, built):
    def edit() -> dict[str, Any]:
        path = project.root / "datasets/c.yaml"
        path.write_text(path.read_text().replace("SELECT *", "SELECT id"))
        return {}

    loaded, rebuilt = _twice(project, built, edit)
    assert rebuilt == ["datasets/c.yaml"]
    assert "SELECT id" in loaded.get("org.cache.c").snapshot.metadata[0].transform.query


def test_a_new_var_renders_the_templates_that_may_read_it_again(project, built):
    loaded, rebuilt = _twice(project, built, lambda: {"vars_override": {"suffix": "v2"}})
    assert rebuilt == ["datasets/b.yaml", "datasets/d.yaml"]  # the templates; a and c have no Jinja
    assert loaded.get("org.cache.b").snapshot.metadata[-1].description == "suffix v2"


def test_a_declared_environment_variable_is_a_render_input(project, built):
    loaded, rebuilt = _twice(project, built, lambda: {"environ": {"REGION": "us"}})
    assert rebuilt == ["datasets/b.yaml", "datasets/d.yaml"]
    assert loaded.get("org.cache.d").snapshot.metadata[-1].description == "region us"


def test_a_macro_file_is_a_render_input(project, built):
    def add_macro() -> dict[str, Any]:
        (project.root / "macros").mkdir()
        (project.root / "macros" / "m.j2").write_text("{% macro shout(x) %}{{ x | upper }}{% endmacro %}\n")
        return {}

    _, rebuilt = _twice(project, built, add_macro)
    assert rebuilt == ["datasets/b.yaml", "datasets/d.yaml"]


def test_another_odfproj_version_drops_the_whole_cache(project, built, monkeypatch):
    _, rebuilt = _twice(project, built, lambda: monkeypatch.setattr(odfproj, "__version__", "99.0") or {})
    assert rebuilt == sorted(FILES)


def _cache_file(cache_home: Path) -> Path:
    (found,) = (cache_home / "odfproj" / "parse").glob("*.json")
    return found


def _forge(cache_home: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the cache with a valid digest: what a stale or hostile writer could leave."""
    path = _cache_file(cache_home)
    document = json.loads(path.read_bytes().partition(b"\n")[2])
    edit(document)
    assert user_cache.write_checked(path, json.dumps(document).encode())


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "truncated": lambda home: _cache_file(home).write_bytes(_cache_file(home).read_bytes()[:200]),
    "garbage": lambda home: _cache_file(home).write_bytes(b"\x00\xff not json at all"),
    "a flipped byte": lambda home: _cache_file(home).write_bytes(
        _cache_file(home).read_bytes().replace(b"org.cache.a", b"org.cache.x", 1)
    ),
    "empty": lambda home: _cache_file(home).write_bytes(b""),
    "an entry that is not a snapshot": lambda home: _forge(
        home, lambda d: d["manifests"]["datasets/a.yaml"].update(snapshot={"name": 5})
    ),
    "entries of the wrong type": lambda home: _forge(home, lambda d: d.update(manifests=[1, 2])),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupt_cache_is_ignored_and_replaced(project, built, cache_home, corruption):
    first = _load(project)
    CORRUPTIONS[corruption](cache_home)
    built.clear()
    second = _load(project)
    _same(first, second)
    assert built, "nothing was parsed again"
    built.clear()
    _same(first, _load(project))
    assert built == [], "the corrupt file was not replaced"


def test_manifests_with_problems_are_parsed_every_time_and_report_the_same_positions(project, built):
    (project.root / "datasets" / "bad.yaml").write_text(
        FILES["datasets/a.yaml"].replace("BIGINT", "NOTATYPE")
    )
    (project.root / "datasets" / "e.yaml").write_text(
        manifests.derivative("org.cache.e", ["org.cache.missing"], "SELECT * FROM `org.cache.missing`")
    )
    first = _load(project)
    first_graph = [str(p) for p in DatasetGraph.build(first).problems]
    built.clear()
    second = _load(project)
    assert built == ["datasets/bad.yaml"]
    _same(first, second)
    # e.yaml is clean on its own, so it came from the cache: its unknown input is still found at its line
    assert [str(p) for p in DatasetGraph.build(second).problems] == first_graph
    assert any(p.startswith("datasets/e.yaml:") and ":1:1:" not in p for p in first_graph), first_graph


def test_the_cache_can_be_turned_off(project, built, cache_home, monkeypatch):
    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    _, rebuilt = _twice(project, built, dict)
    assert rebuilt == sorted(FILES)
    assert not (cache_home / "odfproj" / "parse").exists()


def test_a_small_project_is_not_cached(project, built, cache_home, monkeypatch):
    monkeypatch.setattr(parse_cache, "MIN_MANIFESTS", len(FILES) + 1)
    _, rebuilt = _twice(project, built, dict)
    assert rebuilt == sorted(FILES)
    assert not (cache_home / "odfproj" / "parse").exists()


def test_an_unwritable_cache_folder_only_costs_time(project, built, cache_home):
    shutil.rmtree(cache_home, ignore_errors=True)  # what loading the project's configuration kept there
    cache_home.write_text("a file where the cache folder should be")
    first, rebuilt = _twice(project, built, dict)
    assert rebuilt == sorted(FILES)
    _same(first, _load(project))


class _NoPool:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a process pool was started")


def test_no_process_pool_when_few_manifests_need_parsing(project, built, monkeypatch):
    """A pool costs more to start than a few manifests cost to parse; cached ones are not parsed at all."""
    monkeypatch.setattr(manifests_module, "PARALLEL_MIN_MANIFESTS", len(FILES))
    _load(project)  # every file is parsed: a pool may be used
    monkeypatch.setattr(manifests_module, "ProcessPoolExecutor", _NoPool)
    path = project.root / "datasets/c.yaml"
    path.write_text(path.read_text().replace("SELECT *", "SELECT id"))
    built.clear()
    loaded = _load(project)
    assert built == ["datasets/c.yaml"] and loaded.ok
    monkeypatch.setattr(
        parse_cache, "MIN_MANIFESTS", len(FILES) + 1
    )  # no cache: still below the pool's size?
    monkeypatch.setattr(manifests_module, "PARALLEL_MIN_MANIFESTS", len(FILES) + 1)
    assert load_manifests(project, environ=ENVIRON).ok


def test_validate_finds_an_untranslatable_query_at_the_same_place_from_the_cache(project, built, monkeypatch):
    """validate reads queries from the (cached) snapshot, where validate_files re-reads the document."""
    from odfproj.project.validate import validate_files, validate_project
    from tests.transform.test_dialects import ROOT

    monkeypatch.setenv("REGION", "eu")
    path = project.root / "datasets" / "readings.yaml"
    path.write_text(ROOT)
    alone = [str(p) for p in validate_files([path], display_root=project.root / "datasets").problems]
    assert len(alone) == 1 and "json_get_json" in alone[0]
    first = validate_project(project)
    built.clear()
    second = validate_project(project)
    assert built == []
    assert [str(p) for p in first.problems] == [str(p) for p in second.problems] == [f"datasets/{alone[0]}"]
