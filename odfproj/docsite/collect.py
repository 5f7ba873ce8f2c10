"""Gather the docs site's :class:`~odfproj.docsite.model.Site` from the project, its workspace and the last run.

Reads only, and runs nothing a manifest names, so building the docs is as safe as ``plan``: manifests
are rendered in the sandbox, chains and state indexes are read (the index is not persisted), and SQL
is translated by sqlglot, never executed. A workspace that has never run gives definitions only.

Definitions come from the manifest when the project defines the dataset (that is what the project
says it should be) and from the chain for datasets the project only reads. ``run_results.json`` is
read defensively: it is written by other versions of odfproj too, and data-test entries may or may
not be there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from odfproj.docsite.layout import layout_graph
from odfproj.docsite.model import (
    Block,
    Column,
    DatasetDoc,
    DataState,
    LastRun,
    License,
    Query,
    Site,
    SqlStep,
    TestResult,
)
from odfproj.engine.dialects import translated_queries
from odfproj.errors import OdfprojError
from odfproj.odf import model
from odfproj.odf.timestamps import format_rfc3339
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph
from odfproj.project.lineage import build_lineage
from odfproj.project.manifests import load_manifests
from odfproj.run.run import RUN_RESULTS_FILE
from odfproj.state.dataset_index import open_state_index
from odfproj.state.summary import ChainSummary
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import ChainProjection, event_kind
from odfproj.storage.update_record import UpdateRecord, read_update_record
from odfproj.storage.workspace import Workspace

__all__ = ["LAST_BLOCKS", "collect_site"]

#: How many of a dataset's newest blocks the page lists.
LAST_BLOCKS = 5


def collect_site(config: ProjectConfig, target: str | None = None) -> Site:
    """Everything the docs site shows for ``config`` rendered for ``target``."""
    manifests = load_manifests(config, target=target)
    workspace_root = config.workspace(target)
    chains = _open_chains(workspace_root)
    known_ids = {p.dataset_id.as_did_str(): d.name for d, p in chains.values()}
    graph = DatasetGraph.build(manifests, known_ids=known_ids)
    lineage = build_lineage(graph, config.name)
    run_results = _read_run_results(workspace_root / RUN_RESULTS_FILE)
    runs = _runs_by_dataset(run_results)
    tests = _tests_by_dataset(run_results)
    outputs: dict[str, list[str]] = {}
    inputs: dict[str, list[tuple[str, str | None]]] = {}
    for edge in lineage.edges:
        outputs.setdefault(edge.source, []).append(edge.target)
        inputs.setdefault(edge.target, []).append((edge.source, edge.alias))
    docs = []
    for node in lineage.nodes:
        manifest = graph.manifest_of(node.name)
        snapshot = manifest.snapshot if manifest is not None else None
        chain = chains.get(node.name.lower())
        projection = chain[1] if chain is not None else None
        definition = _Definition.of_snapshot(snapshot) if snapshot is not None else None
        if definition is None and projection is not None:
            definition = _Definition.of_projection(projection)
        problems = tuple(str(p) for p in manifest.errors) if manifest is not None else ()
        docs.append(
            DatasetDoc(
                name=node.name,
                kind=node.kind.value,
                manifest=node.manifest,
                description=definition.info.description if definition and definition.info else None,
                keywords=tuple(definition.info.keywords or ()) if definition and definition.info else (),
                license=_license(definition.license if definition else None),
                schema=_schema(projection, definition),
                schema_source=_schema_source(projection, definition),
                inputs=tuple(inputs.get(node.name, ())),
                outputs=tuple(outputs.get(node.name, ())),
                queries=definition.queries() if definition else (),
                problems=problems,
                state=_state(*chain) if chain is not None else None,
                last_run=runs.get(node.name.lower()),
                tests=tests.get(node.name.lower(), ()),
                last_update=_last_update(*chain) if chain is not None else None,
            )
        )
    warnings = (*lineage.problems, *_orphan_warnings(chains, graph))
    return Site(
        project=config.name,
        target=target,
        generated_at=format_rfc3339(datetime.now(UTC).replace(microsecond=0)),
        workspace=str(workspace_root),
        datasets=tuple(docs),
        layout=layout_graph([(d.name, d.kind) for d in docs], [(e.source, e.target) for e in lineage.edges]),
        run_started_at=_text(run_results.get("started_at")) if run_results else None,
        warnings=tuple(warnings),
    )


# --- definitions ---------------------------------------------------------------------------------


class _Definition:
    """The latest of each definition event, from a manifest's metadata or a chain's projection."""

    def __init__(
        self,
        info: model.SetInfo | None,
        license: model.SetLicense | None,
        polling: model.SetPollingSource | None,
        push: Iterable[model.AddPushSource],
        transform: model.SetTransform | None,
        data_schema: model.SetDataSchema | None = None,
    ) -> None:
        self.info = info
        self.license = license
        self.polling = polling
        self.push = tuple(push)
        self.transform = transform
        self.data_schema = data_schema

    @classmethod
    def of_snapshot(cls, snapshot: model.DatasetSnapshot) -> _Definition:
        latest: dict[type, Any] = {}
        push = []
        for event in snapshot.metadata:
            latest[type(event)] = event
            if isinstance(event, model.AddPushSource):
                push.append(event)
        return cls(
            latest.get(model.SetInfo),
            latest.get(model.SetLicense),
            latest.get(model.SetPollingSource),
            push,
            latest.get(model.SetTransform),
            latest.get(model.SetDataSchema),
        )

    @classmethod
    def of_projection(cls, projection: ChainProjection) -> _Definition:
        return cls(
            projection.set_info,
            projection.set_license,
            projection.set_polling_source,
            projection.push_sources.values(),
            projection.set_transform,
        )

    def declared_schema(self) -> tuple[Column, ...]:
        """The columns a root's read step declares (DDL entries), as the manifest writes them."""
        for source in (self.polling, *self.push):
            entries = getattr(getattr(source, "read", None), "schema", None)
            if entries:
                return tuple(_column(entry) for entry in entries)
        return ()

    def queries(self) -> tuple[Query, ...]:
        found: list[tuple[str, model.TransformSql]] = []
        if self.transform is not None:
            found.append(("transform", self.transform.transform))
        for source in (self.polling, *self.push):
            preprocess = getattr(source, "preprocess", None)
            if preprocess is not None:
                found.append(("preprocess", preprocess))
        return tuple(_query(role, transform) for role, transform in found)


def _query(role: str, transform: model.TransformSql) -> Query:
    try:
        steps = tuple(SqlStep(s.alias, s.source, s.spark) for s in translated_queries(transform))
        return Query(role, transform.engine, steps)
    except OdfprojError as e:
        written = (
            [(None, transform.query)]
            if transform.query is not None
            else [(q.alias, q.query) for q in transform.queries or ()]
        )
        return Query(role, transform.engine, tuple(SqlStep(a, q, q) for a, q in written), error=str(e))


def _column(entry: str) -> Column:
    name, _, spelled = entry.strip().partition(" ")
    return Column(name, spelled.strip())


def _license(event: model.SetLicense | None) -> License | None:
    if event is None:
        return None
    return License(event.short_name, event.name, event.website_url, event.spdx_id)


def _schema(projection: ChainProjection | None, definition: _Definition | None) -> tuple[Column, ...]:
    if projection is not None and projection.schema is not None:
        return tuple(_column(entry) for entry in projection.schema_ddl() or ())
    return definition.declared_schema() if definition is not None else ()


def _schema_source(projection: ChainProjection | None, definition: _Definition | None) -> str | None:
    if projection is not None and projection.schema is not None:
        return "chain"
    if definition is not None and definition.declared_schema():
        return "manifest"
    return None


# --- the workspace ---------------------------------------------------------------------------------


def _open_chains(root: Path) -> dict[str, tuple[Dataset, ChainProjection]]:
    """Every dataset of the workspace with its projection, by lower-case name; none if it never ran."""
    if not (root / "datasets").is_dir():
        return {}
    workspace = Workspace(root)
    chains = {}
    for name in workspace.list_datasets():
        dataset = workspace.open(name, recover=False)
        chains[name.lower()] = (dataset, dataset.projection())
    return chains


def _state(dataset: Dataset, projection: ChainProjection) -> DataState:
    blocks = []
    for block_hash, block in dataset.iter_blocks():  # newest first
        blocks.append(
            Block(
                block.sequence_number,
                block_hash.to_multibase(),
                event_kind(block.event),
                format_rfc3339(block.system_time),
            )
        )
        if len(blocks) == LAST_BLOCKS:
            break
    chain = ChainSummary.of(projection)
    return DataState(
        chain=chain,
        last_blocks=tuple(blocks),
        current_rows=_current_rows(dataset, projection, chain.primary_key),
    )


def _last_update(dataset: Dataset, projection: ChainProjection) -> UpdateRecord | None:
    """A derivative's record of its last update, if it is of the query the chain holds now."""
    if projection.set_transform is None:
        return None
    return read_update_record(dataset, projection)


def _current_rows(dataset: Dataset, projection: ChainProjection, key: tuple[str, ...]) -> int | None:
    """Rows valid at the head, counted in the state index's bitmap (no data file is read)."""
    if not key or not projection.has_data:
        return None
    try:
        return len(open_state_index(dataset, key, persist=False).current_offsets())
    except OdfprojError:  # a damaged index or data file: the page says "unknown", verify says why
        return None


def _orphan_warnings(chains: Mapping[str, tuple[Dataset, ChainProjection]], graph: DatasetGraph) -> list[str]:
    return [
        f"dataset {dataset.name} is in the workspace but no manifest defines it"
        for key, (dataset, _) in sorted(chains.items())
        if key not in graph
    ]


# --- run_results.json ------------------------------------------------------------------------------


def _read_run_results(path: Path) -> dict[str, Any]:
    """The last run's results; an absent or unreadable file is no run (the page says so)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _entries(run_results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    results = run_results.get("results")
    return [r for r in results if isinstance(r, Mapping)] if isinstance(results, list) else []


def _is_test(entry: Mapping[str, Any]) -> bool:
    return entry.get("resource_type") == "test" or isinstance(entry.get("test"), str)


def _runs_by_dataset(run_results: Mapping[str, Any]) -> dict[str, LastRun]:
    runs = {}
    for entry in _entries(run_results):
        name = entry.get("unique_id")
        if isinstance(name, str) and not _is_test(entry):
            runs[name.lower()] = LastRun(
                status=_text(entry.get("status")),
                work=_text(entry.get("work")),
                message=_text(entry.get("message")),
                records_added=_number(entry.get("records_added"), int),
                seconds=_number(entry.get("execution_time"), float),
            )
    return runs


def _tests_by_dataset(run_results: Mapping[str, Any]) -> dict[str, tuple[TestResult, ...]]:
    """Data-test outcomes: nested under a dataset's entry (``tests: [...]``) or entries of their own
    (``resource_type: test`` or a ``test`` name, with the ``dataset`` they check)."""
    found: dict[str, list[TestResult]] = {}
    for entry in _entries(run_results):
        if _is_test(entry):
            dataset = entry.get("dataset") or entry.get("model")
            if isinstance(dataset, str):
                found.setdefault(dataset.lower(), []).append(_test(entry))
            continue
        nested = entry.get("tests")
        name = entry.get("unique_id")
        if isinstance(nested, list) and isinstance(name, str):
            found.setdefault(name.lower(), []).extend(_test(t) for t in nested if isinstance(t, Mapping))
    return {k: tuple(v) for k, v in found.items()}


def _test(entry: Mapping[str, Any]) -> TestResult:
    name = entry.get("test") or entry.get("name") or entry.get("unique_id") or "test"
    message = entry.get("message")
    failures = entry.get("failures")
    if not message and isinstance(failures, int) and failures:
        message = f"{failures} failing row(s)"
    return TestResult(_text(name), _text(entry.get("status")) or "unknown", _text(message))


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _number(value: Any, kind: type) -> Any:
    return kind(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
