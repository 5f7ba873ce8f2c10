"""``odfproj.yaml``: where a project's manifests are, where its workspace lives, its vars and targets.

Discovery walks up from the working directory like git does, so every command works from any
sub-folder of a project; ``--project DIR`` overrides it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from odfproj.engine.session import SparkSettings
from odfproj.engine.settings import check_spark_conf, check_spark_master, target_settings
from odfproj.errors import OdfprojError
from odfproj.odf.odf_versions import DEFAULT_ODF_VERSION
from odfproj.odf.yaml_source import check_yaml_limits
from odfproj.project.boundary import FolderResolver, glob_refusal, path_refusal
from odfproj.project.env import EnvPolicy, parse_env_section
from odfproj.project.moves import Move, parse_moves
from odfproj.project.user_cache import (
    cache_enabled,
    code_fingerprint,
    read_checked,
    user_cache_file,
    write_checked,
)
from odfproj.remote.location import is_remote_workspace, remote_cache_dir
from odfproj.workspace_paths import check_environment_name, environment_root

CONFIG_FILE = "odfproj.yaml"
#: The JSON Schema of odfproj.yaml shipped in the package (``odfproj/resources/schemas``).
CONFIG_SCHEMA = "odfproj.schema.json"
DEFAULT_MANIFEST_GLOBS = ("datasets/**/*.yaml",)
#: Where data test files are (``tests:`` in odfproj.yaml); see :mod:`odfproj.quality`.
DEFAULT_TEST_GLOBS = ("tests/**/*.yaml",)
DEFAULT_WORKSPACE = ".odf"
#: Overrides the workspace location of every project (e.g. for CI scratch space).
WORKSPACE_ENV = "ODFPROJ_WORKSPACE"
#: How long a preview environment may go unrefreshed before ``odfproj env list`` calls it stale.
DEFAULT_ENVIRONMENT_TTL = timedelta(days=7)
#: Folder (under the project root) whose files hold Jinja macros shared by every manifest.
MACRO_DIR = "macros"
MACRO_SUFFIXES = (".sql", ".j2", ".jinja", ".yaml")

_TOP_KEYS = {
    "name",
    "manifests",
    "tests",
    "workspace",
    "vars",
    "env",
    "targets",
    "target",
    "moved",
    "odf_version",
    "environments",
}
_TARGET_KEYS = {"spark_master", "storage_root", "spark_conf"}


class ProjectError(OdfprojError):
    """odfproj.yaml is missing or malformed."""


@dataclass(frozen=True)
class Target:
    """Where and how data work runs: the Spark master, the storage root and extra Spark conf."""

    name: str
    spark_master: str = "local[*]"
    storage_root: Path | None = None
    spark_conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def spark_settings(self, *, verbose: bool = False, data_at: str | None = None) -> SparkSettings:
        """This target's master and ``spark_conf``: for commands that run trusted code only.

        ``data_at``: where the workspace is (a remote workspace's URL: a session of data on S3 reads it
        in place, ``engine.s3a.with_data_at``). ``validate``/``plan``/``watch`` analyse queries with
        ``engine.settings.analysis_settings``.
        """
        return target_settings(self.spark_master, self.spark_conf, verbose=verbose, data_at=data_at)


@dataclass(frozen=True)
class ProjectConfig:
    root: Path
    name: str
    manifest_globs: tuple[str, ...] = DEFAULT_MANIFEST_GLOBS
    test_globs: tuple[str, ...] = DEFAULT_TEST_GLOBS
    """Data test files (``tests:``): kept out of the manifests even when a manifest glob matches them."""
    workspace_setting: str = DEFAULT_WORKSPACE
    vars: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    targets: Mapping[str, Target] = field(default_factory=lambda: MappingProxyType({"dev": Target("dev")}))
    default_target: str = "dev"
    env: EnvPolicy = field(default_factory=EnvPolicy)
    """The environment variables templates may read, and which ones are secret (``env:``)."""
    moves: tuple[Move, ...] = ()
    """Declared renames (``moved:``), see :mod:`odfproj.project.moves`."""
    odf_version: str = DEFAULT_ODF_VERSION
    """The ODF version new chains are written in (``odf_version:``, "0.35" or "0.39"), see
    :mod:`odfproj.odf.odf_versions`; an existing chain keeps its own."""
    environment_ttl: timedelta = DEFAULT_ENVIRONMENT_TTL
    """How long a preview environment may go unrefreshed before ``env list`` calls it stale
    (``environments: {ttl: 7d}``)."""
    environment: str | None = None
    """The preview environment commands work in (``--env``), see :mod:`odfproj.storage.environment`:
    never read from odfproj.yaml, only given on the command line."""

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE

    def remote_workspace(self) -> str | None:
        """The URL of a workspace kept in an object store (``s3://``, ``file://``), or ``None``."""
        setting = os.environ.get(WORKSPACE_ENV) or self.workspace_setting
        return setting if is_remote_workspace(setting) else None

    def workspace(self, target: str | None = None) -> Path:
        """The workspace commands work in: production's, or with ``--env`` that environment's folder in it."""
        production = self.production_workspace(target)
        if self.environment is None:
            return production
        return environment_root(production, self.environment)

    def in_environment(self, name: str | None) -> ProjectConfig:
        """This project with its commands working in environment ``name`` (``None``: production)."""
        if name is not None:
            check_environment_name(name)
        return replace(self, environment=name)

    def production_workspace(self, target: str | None = None) -> Path:
        """The workspace folder: $ODFPROJ_WORKSPACE, else the target's storage root, else the setting.

        For a remote workspace, the folder of its local cache (under ``.odf/``, which is gitignored).
        """
        remote = self.remote_workspace()
        if remote is not None:
            return remote_cache_dir(self.root, remote)
        env = os.environ.get(WORKSPACE_ENV)
        if env:
            return Path(env).expanduser().resolve()
        chosen = self.target(target)
        if chosen.storage_root is not None:
            return chosen.storage_root
        return (self.root / self.workspace_setting).resolve()

    def target(self, name: str | None = None) -> Target:
        name = name or self.default_target
        try:
            return self.targets[name]
        except KeyError:
            known = ", ".join(sorted(self.targets)) or "none"
            raise ProjectError(f"{self.config_path}: unknown target {name!r} (defined: {known})") from None

    def refusal(self, path: Path) -> str | None:
        """Why ``path`` may not be read as a project file (outside the root after symlinks, in .git)."""
        return path_refusal(path, self.root.resolve())

    def manifest_files(self) -> list[Path]:
        """Every manifest matched by the project's globs, sorted.

        The workspace, ``macros/``, data test files and odfproj.yaml itself are excluded: a
        ``**/*.yaml`` glob would otherwise pick them up. Files that resolve outside the project are listed: readers
        refuse them with ``refusal`` so the user learns about them.
        """
        # Folder prefixes, compared as text: ten thousand manifests would build ten Paths each otherwise.
        excluded_dirs = tuple(f"{d}{os.sep}" for d in (self.workspace(), self.macro_dir.resolve()))
        config_file = self.config_path.resolve()
        tests = set(self._matching(self.test_globs))
        resolve = FolderResolver()
        found: set[Path] = set()
        for pattern in self.manifest_globs:
            for path in self.root.glob(pattern):
                if not path.is_file() and not path.is_symlink():  # broken links and loops get reported
                    continue
                try:
                    resolved = resolve(path)
                except (OSError, RuntimeError):  # a symlink loop: readers refuse it by name
                    found.add(path)
                    continue
                if (
                    resolved != config_file
                    and path not in tests
                    and not str(resolved).startswith(excluded_dirs)
                ):
                    found.add(path)
        return sorted(found)

    def test_files(self) -> list[Path]:
        """Every data test file matched by the ``tests:`` globs, sorted (readers check ``refusal``)."""
        return sorted(self._matching(self.test_globs))

    def _matching(self, globs: tuple[str, ...]) -> set[Path]:
        return {p for pattern in globs for p in self.root.glob(pattern) if p.is_file() or p.is_symlink()}

    @property
    def macro_dir(self) -> Path:
        return self.root / MACRO_DIR

    def macro_files(self) -> list[Path]:
        """Every macro file under ``macros/`` (sub-folders included), sorted; none if the folder is absent."""
        if not self.macro_dir.is_dir():
            return []
        return sorted(
            p for p in self.macro_dir.rglob("*") if p.is_file() and p.suffix.lower() in MACRO_SUFFIXES
        )


def find_project_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` holding odfproj.yaml."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    raise ProjectError(
        f"no {CONFIG_FILE} found in {here} or any parent folder (use --project DIR or odfproj init)"
    )


def load_project(project_dir: Path | None = None) -> ProjectConfig:
    """Load the project at ``project_dir`` (exactly there) or discovered from the working directory."""
    if project_dir is not None:
        root = project_dir.resolve()
        if not (root / CONFIG_FILE).is_file():
            raise ProjectError(f"{root}: no {CONFIG_FILE} in this folder")
    else:
        root = find_project_root()
    refused = path_refusal(root / CONFIG_FILE, root)
    if refused:
        raise ProjectError(f"{root / CONFIG_FILE}: {refused}")
    try:
        text = (root / CONFIG_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProjectError(f"{root / CONFIG_FILE}: cannot read: {e}") from None
    return parse_config(root, text)


def parse_config(root: Path, text: str) -> ProjectConfig:
    path = root / CONFIG_FILE
    try:
        check_yaml_limits(text)
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise ProjectError(f"{path}{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, dict):
        raise ProjectError(f"{path}: expected a mapping at the top level")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ProjectError(
            f"{path}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(_TOP_KEYS))})"
        )
    name = data.get("name") or root.name
    globs = _globs(path, data, "manifests", DEFAULT_MANIFEST_GLOBS)
    test_globs = _globs(path, data, "tests", DEFAULT_TEST_GLOBS)
    variables = data.get("vars") or {}
    if not isinstance(variables, dict):
        raise ProjectError(f"{path}: 'vars' must be a mapping")
    try:
        env = parse_env_section(data.get("env"))
    except ValueError as e:
        raise ProjectError(f"{path}: {e}") from None
    check_config_schema(path, data)  # before the targets: they turn values into paths
    moves = parse_moves(path, data.get("moved"))
    targets = _parse_targets(path, root, data.get("targets") or {"dev": {}})
    default_target = data.get("target") or ("dev" if "dev" in targets else next(iter(targets)))
    if default_target not in targets:
        raise ProjectError(f"{path}: default target {default_target!r} is not defined under 'targets'")
    return ProjectConfig(
        root=root,
        name=str(name),
        manifest_globs=globs,
        test_globs=test_globs,
        workspace_setting=str(data.get("workspace") or DEFAULT_WORKSPACE),
        vars=MappingProxyType(dict(variables)),
        targets=MappingProxyType(targets),
        default_target=default_target,
        env=env,
        moves=moves,
        # str(): ``odf_version: 0.39`` unquoted is a YAML float, and its text is the setting.
        odf_version=str(data.get("odf_version") or DEFAULT_ODF_VERSION),
        environment_ttl=_environment_ttl(path, data.get("environments")),
    )


_DURATION = re.compile(r"^\s*(\d+)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def _environment_ttl(path: Path, section: Any) -> timedelta:
    """``environments: {ttl: 7d}``: how long an environment may go unrefreshed (d, h or m)."""
    if section is None or section.get("ttl") is None:
        return DEFAULT_ENVIRONMENT_TTL
    match = _DURATION.match(str(section["ttl"]))
    if match is None or int(match.group(1)) == 0:
        raise ProjectError(
            f"{path}: environments.ttl {section['ttl']!r}: expected a duration such as 7d, 12h or 90m"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def check_config_schema(path: Path, data: Mapping[str, Any]) -> None:
    """The shipped JSON Schema (``resources/schemas/odfproj.schema.json``), the one editors use too.

    Run after the loader's own checks, which say more precisely what is wrong; this catches the
    rest (a value of the wrong type), one line naming the key. A configuration that passed is
    remembered (by its data and the schema's and jsonschema's files) in this user's cache, so an
    unchanged ``odfproj.yaml`` costs no jsonschema import (about 0.07 s) on every command;
    ``ODFPROJ_CACHE=off`` validates every time.
    """
    passed = _PassedConfigs.open()
    key = passed.key(data)
    if key is not None and key in passed.keys:
        return
    errors = sorted(_config_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ProjectError(f"{path}: {where}: {error.message} (schema odfproj.schema.json)")
    passed.remember(key)


@dataclass(frozen=True)
class _PassedConfigs:
    """Keys of the newest configurations that passed the schema, one file for every project (a key is
    made of the configuration's data itself, so where it was read does not matter)."""

    file: Path | None
    keys: tuple[str, ...]

    _KEEP = 64

    @classmethod
    def open(cls) -> _PassedConfigs:
        if not cache_enabled(1, 1):
            return cls(None, ())
        try:
            file = user_cache_file("config", Path("/"), ".keys")
        except (RuntimeError, KeyError):
            return cls(None, ())
        body = read_checked(file)
        return cls(file, tuple(body.decode("ascii", "replace").split()) if body else ())

    def key(self, data: Mapping[str, Any]) -> str | None:
        if self.file is None:
            return None
        try:
            text = json.dumps(data, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            return None  # keys of mixed types: validated every time
        code = code_fingerprint(("resources/schemas",), ("jsonschema",))
        return hashlib.blake2b(f"{code}\n{text}".encode(), digest_size=20).hexdigest()

    def remember(self, key: str | None) -> None:
        if self.file is None or key is None or key in self.keys:
            return
        keys = (*self.keys[-(self._KEEP - 1) :], key)
        write_checked(self.file, " ".join(keys).encode("ascii"))


@cache
def _config_validator() -> Any:
    # Imported here: a configuration already known to pass needs no jsonschema (about 0.07 s).
    import jsonschema

    text = resources.files("odfproj").joinpath("resources", "schemas", CONFIG_SCHEMA).read_text("utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def _globs(path: Path, data: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A glob or a list of globs inside the project (``manifests:``, ``tests:``)."""
    globs = data.get(key, list(default))
    if isinstance(globs, str):
        globs = [globs]
    if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
        raise ProjectError(f"{path}: '{key}' must be a glob or a list of globs")
    for glob in globs:
        refused = glob_refusal(glob)
        if refused:
            raise ProjectError(f"{path}: {refused}")
    return tuple(globs)


def _parse_targets(path: Path, root: Path, raw: Any) -> dict[str, Target]:
    if not isinstance(raw, dict) or not raw:
        raise ProjectError(f"{path}: 'targets' must be a non-empty mapping of target names")
    targets = {}
    for name, spec in raw.items():
        spec = spec or {}
        if not isinstance(spec, dict):
            raise ProjectError(f"{path}: target {name!r} must be a mapping")
        unknown = set(spec) - _TARGET_KEYS
        if unknown:
            raise ProjectError(f"{path}: target {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
        conf = spec.get("spark_conf") or {}
        if not isinstance(conf, dict):
            raise ProjectError(f"{path}: target {name!r}: 'spark_conf' must be a mapping")
        spark_conf = {str(k): _conf_value(v) for k, v in conf.items()}
        master = str(spec.get("spark_master") or "local[*]").strip()
        refusal = check_spark_master(master) or next(iter(check_spark_conf(spark_conf)), None)
        if refusal is not None:
            section = "" if refusal.setting == "spark_master" else "spark_conf: "
            raise ProjectError(f"{path}: target {name!r}: {section}{refusal}")
        storage = spec.get("storage_root")
        targets[str(name)] = Target(
            name=str(name),
            spark_master=master,
            storage_root=(root / Path(storage).expanduser()).resolve() if storage else None,
            spark_conf=MappingProxyType(spark_conf),
        )
    return targets


def _conf_value(value: Any) -> str:
    """A conf value as Spark reads it: YAML's ``true`` is Spark's ``true``, not Python's ``True``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def spark_settings(
    config: ProjectConfig | None, target: str | None, *, verbose: bool = False
) -> SparkSettings:
    """The Spark settings of ``target`` for trusted work (run, watch --apply, ingest, sql, verify --reproduce).

    Without a project (a bare ``--workspace``), odfproj's defaults.
    """
    if config is None:
        return SparkSettings(verbose=verbose)
    return config.target(target).spark_settings(verbose=verbose, data_at=config.remote_workspace())
