"""The JSON Schema of odfproj.yaml shipped in the package: it accepts the repository's projects, refuses
wrong types in one line, and the scaffold's files point at the copies it writes."""

from __future__ import annotations

import json

import pytest
import yaml

from odfproj.project import config as config_module
from odfproj.project import user_cache as cache_files
from odfproj.project.config import ProjectError, _config_validator, parse_config
from odfproj.project.scaffold import scaffold_project
from tests.conftest import REPO_DIR


@pytest.mark.parametrize(
    "path", ["example_project/odfproj.yaml", "odfproj/resources/templates/project/odfproj.yaml"]
)
def test_the_schema_accepts_every_odfproj_yaml_of_the_repository(path):
    text = (REPO_DIR / path).read_text().replace("%%PROJECT_NAME%%", "x")
    assert list(_config_validator().iter_errors(yaml.safe_load(text))) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("workspace: [a]\n", "odfproj.yaml: workspace: ['a'] is not of type 'string'"),
        (
            "targets:\n  dev:\n    storage_root: 3\n",
            "odfproj.yaml: targets.dev.storage_root: 3 is not of type 'string'",
        ),
        ("target: 1\ntargets: {'1': {}}\n", "odfproj.yaml: target: 1 is not of type 'string'"),
    ],
)
def test_a_value_of_the_wrong_type_is_one_line_naming_the_key(tmp_path, text, expected):
    with pytest.raises(ProjectError) as raised:
        parse_config(tmp_path, text)
    assert expected in str(raised.value) and "\n" not in str(raised.value)


def test_the_loaders_own_messages_come_first(tmp_path):
    with pytest.raises(ProjectError, match="unknown key"):
        parse_config(tmp_path, "colour: blue\n")


def test_the_scaffold_writes_the_schemas_its_files_point_at(tmp_path):
    result = scaffold_project(tmp_path / "new", "new")
    pointers = {}
    for rel in result.files:
        if rel.suffix == ".yaml" and rel.name != ".pre-commit-config.yaml":
            first = (result.root / rel).read_text().splitlines()[0]
            assert first.startswith("# yaml-language-server: $schema="), rel
            pointers[rel] = first.split("=", 1)[1]
    assert set(pointers) >= {p for p in result.files if p.parts[0] == "datasets"} | {
        p for p in result.files if p.name == "odfproj.yaml"
    }
    for rel, pointer in pointers.items():
        schema = (result.root / rel).parent / pointer
        assert "http" not in pointer and schema.is_file(), (rel, pointer)
        assert json.loads(schema.read_text())["$schema"].startswith("https://json-schema.org/")
    packaged = REPO_DIR / "odfproj" / "resources" / "schemas" / "odfproj.schema.json"
    assert (result.root / "schemas" / "odfproj.schema.json").read_bytes() == packaged.read_bytes()
    assert parse_config(result.root, (result.root / "odfproj.yaml").read_text()).name == "new"


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(cache_files.CACHE_ENV, raising=False)
    return tmp_path / "cache"


def test_a_configuration_that_passed_is_not_validated_again(tmp_path, user_cache, monkeypatch):
    """What spares every command the jsonschema import: the same data passes from the cache, other
    data is validated (and refused) as ever, and ODFPROJ_CACHE=off validates every time."""
    good = "targets:\n  dev:\n    storage_root: .odf\n"
    parse_config(tmp_path, good)
    assert list((user_cache / "odfproj" / "config").iterdir())

    def refuse():
        raise AssertionError("validated again")

    monkeypatch.setattr(config_module, "_config_validator", refuse)
    parse_config(tmp_path, good)  # from the cache: no validator
    with pytest.raises(AssertionError, match="validated again"):
        parse_config(tmp_path, "targets:\n  dev:\n    storage_root: other\n")
    monkeypatch.setenv(cache_files.CACHE_ENV, "off")
    with pytest.raises(AssertionError, match="validated again"):
        parse_config(tmp_path, good)


def test_a_cached_pass_never_lets_a_wrong_value_through(tmp_path, user_cache):
    parse_config(tmp_path, "targets:\n  dev:\n    storage_root: .odf\n")
    with pytest.raises(ProjectError, match="storage_root: 3 is not of type 'string'"):
        parse_config(tmp_path, "targets:\n  dev:\n    storage_root: 3\n")
