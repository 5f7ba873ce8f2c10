"""What the docs site shows, as plain values: collected once, rendered by :mod:`odfproj.docsite.html`."""

from __future__ import annotations

from dataclasses import dataclass

from odfproj.state.summary import ChainSummary
from odfproj.storage.update_record import UpdateRecord


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True)
class License:
    short_name: str
    name: str
    website_url: str
    spdx_id: str | None = None


@dataclass(frozen=True)
class SqlStep:
    """One query step as written and as Spark runs it (the same text for ``engine: spark``)."""

    alias: str | None
    source: str
    spark: str


@dataclass(frozen=True)
class Query:
    """A derivative's transform or a root's preprocess query."""

    role: str
    """``transform`` or ``preprocess``."""
    engine: str
    steps: tuple[SqlStep, ...]
    error: str | None = None
    """Why the query cannot be shown as Spark SQL (an untranslatable construct); steps are then as written."""


@dataclass(frozen=True)
class Block:
    sequence_number: int
    block_hash: str
    event: str
    system_time: str


@dataclass(frozen=True)
class TestResult:
    """One data test outcome from ``run_results.json``; every field is shown as text."""

    name: str
    status: str
    message: str = ""


@dataclass(frozen=True)
class LastRun:
    status: str
    work: str
    message: str
    records_added: int | None
    seconds: float | None


@dataclass(frozen=True)
class DataState:
    """What the chain says: absent for a dataset the workspace does not hold yet."""

    chain: ChainSummary
    last_blocks: tuple[Block, ...]
    """Newest first."""
    current_rows: int | None
    """Rows valid now (datasets with a primary key, from the state index); None when unknown."""


@dataclass(frozen=True)
class DatasetDoc:
    name: str
    kind: str
    """``root``, ``derivative``, ``external`` (read, not defined by the project) or ``invalid``."""
    manifest: str | None
    description: str | None
    keywords: tuple[str, ...]
    license: License | None
    schema: tuple[Column, ...]
    schema_source: str | None
    """``chain`` (the data schema written by the last run) or ``manifest`` (the read step's declared schema)."""
    inputs: tuple[tuple[str, str | None], ...]
    """``(dataset, alias)``; the alias only when it differs from the name."""
    outputs: tuple[str, ...]
    queries: tuple[Query, ...]
    problems: tuple[str, ...]
    state: DataState | None
    last_run: LastRun | None
    tests: tuple[TestResult, ...]
    last_update: UpdateRecord | None = None
    """A derivative's last update that ran its current query: the path it took, why full, the hint
    (the dataset's ``info/`` record, kept across runs that did not select it)."""


@dataclass(frozen=True)
class NodePosition:
    name: str
    kind: str
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class EdgePath:
    source: str
    target: str
    d: str
    """SVG path data."""


@dataclass(frozen=True)
class GraphLayout:
    width: float
    height: float
    nodes: tuple[NodePosition, ...]
    edges: tuple[EdgePath, ...]


@dataclass(frozen=True)
class Site:
    project: str
    target: str | None
    generated_at: str
    workspace: str
    datasets: tuple[DatasetDoc, ...]
    """In lineage order: inputs before the datasets that read them."""
    layout: GraphLayout
    run_started_at: str | None
    warnings: tuple[str, ...]
