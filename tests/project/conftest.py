"""A small but realistic project on disk: seven manifests (roots and derivatives), vars and macros.

Graph (input -> derivative)::

    com.example.orders ----+--> com.example.orders-enriched --+--> com.example.revenue --> com.example.revenue-daily
    com.example.customers -+                                  |
    com.example.fx-rates -------------------------------------+
    org.other.weather (alone)
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import git
import pytest

from odfproj.project.config import ProjectConfig, load_project

ROOT_TEMPLATE = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: {path}
      read:
        kind: Csv
        header: true
        schema:
          - id BIGINT
          - value DOUBLE
          - event_time TIMESTAMP
      merge:
        kind: Ledger
        primaryKey:
          - id
    - kind: SetVocab
      eventTimeColumn: event_time
{info}"""

DERIVATIVE_TEMPLATE = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
{inputs}
      transform:
        kind: Sql
        engine: spark
        query: {query}
{info}"""


def info_event(keywords: Sequence[str] = (), description: str = "An example dataset") -> str:
    lines = ["    - kind: SetInfo", f"      description: {description}"]
    if keywords:
        lines.append("      keywords:")
        lines.extend(f"        - {k}" for k in keywords)
    return "\n".join(lines) + "\n"


def root_manifest(name: str, *, path: str = "/data/in/*.csv", keywords: Sequence[str] = ()) -> str:
    return ROOT_TEMPLATE.format(name=name, path=path, info=info_event(keywords))


def derivative_manifest(
    name: str,
    inputs: Sequence[str | tuple[str, str]],
    *,
    keywords: Sequence[str] = (),
    query: str | None = None,
) -> str:
    lines = []
    for item in inputs:
        ref, alias = item if isinstance(item, tuple) else (item, None)
        lines.append(f"        - datasetRef: {ref}")
        if alias:
            lines.append(f"          alias: {alias}")
    first = inputs[0] if isinstance(inputs[0], str) else inputs[0][1]
    return DERIVATIVE_TEMPLATE.format(
        name=name,
        inputs="\n".join(lines),
        query=query or f'"SELECT * FROM `{first}`"',
        info=info_event(keywords),
    )


PROJECT_FILES: Mapping[str, str] = {
    "odfproj.yaml": textwrap.dedent(
        """\
        name: shop
        vars:
          landing: /data/landing
          currency: EUR
        targets:
          dev: {}
          prod: {}
        """
    ),
    "macros/sources.j2": textwrap.dedent(
        """\
        {% macro landing(folder) -%}
        {{ var('landing') }}/{{ folder }}/*.csv
        {%- endmacro %}
        """
    ),
    "macros/sql.sql": textwrap.dedent(
        """\
        {% macro select_all(table) -%}
        "SELECT * FROM `{{ table }}`"
        {%- endmacro %}
        """
    ),
    "datasets/sales/orders.yaml": root_manifest(
        "com.example.orders", path="{{ landing('orders') }}", keywords=["Finance", "sales"]
    ),
    "datasets/sales/customers.yaml": root_manifest("com.example.customers", keywords=["crm"]),
    "datasets/sales/orders-enriched.yaml": derivative_manifest(
        "com.example.orders-enriched", ["com.example.orders", ("com.example.customers", "customers")]
    ),
    "datasets/finance/fx-rates.yaml": root_manifest(
        "com.example.fx-rates",
        path="/data/fx/{{ target }}/*.csv",
        keywords=["finance", "{{ var('currency') }}"],
    ),
    "datasets/finance/revenue.yaml": derivative_manifest(
        "com.example.revenue",
        ["com.example.orders-enriched", "com.example.fx-rates"],
        keywords=["finance", "reporting"],
        query="{{ select_all('com.example.orders-enriched') }}",
    ),
    "datasets/finance/revenue-daily.yaml": derivative_manifest(
        "com.example.revenue-daily", ["com.example.revenue"], keywords=["reporting"]
    ),
    "datasets/other/weather.yaml": root_manifest("org.other.weather"),
}

ALL_DATASETS = (
    "com.example.customers",
    "com.example.fx-rates",
    "com.example.orders",
    "com.example.orders-enriched",
    "com.example.revenue",
    "com.example.revenue-daily",
    "org.other.weather",
)


def write_files(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    write_files(root, PROJECT_FILES)
    return root


@pytest.fixture
def project(project_dir: Path) -> ProjectConfig:
    return load_project(project_dir)


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[[Mapping[str, str]], ProjectConfig]:
    """A project made of exactly ``files`` (an odfproj.yaml is added when missing)."""

    def make(files: Mapping[str, str]) -> ProjectConfig:
        root = tmp_path / "custom"
        write_files(root, {"odfproj.yaml": "name: custom\n", **files})
        return load_project(root)

    return make


def commit_all(repo: git.Repo, message: str) -> str:
    """Stage every file of the working tree and commit; returns the commit hash."""
    repo.git.add(all=True)
    actor = git.Actor("Test", "test@example.com")
    return repo.index.commit(message, author=actor, committer=actor).hexsha


@pytest.fixture
def git_project(project_dir: Path) -> Iterator[tuple[git.Repo, ProjectConfig]]:
    """The project committed to a fresh repository whose root is the project's parent folder."""
    repo = git.Repo.init(project_dir.parent)
    commit_all(repo, "initial project")
    yield repo, load_project(project_dir)
    repo.close()
