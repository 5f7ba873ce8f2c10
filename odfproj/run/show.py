"""What ``odfproj show DATASET`` tells about one dataset, read from the workspace alone (no JVM).

The definition comes from the chain (what was applied, not what the manifest says now: ``plan``
shows the difference), the numbers from the chain and the state index, and the last run from
``run_results.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from odfproj.odf import model
from odfproj.odf.vocab import Vocab
from odfproj.plan.sources import load_workspace_state
from odfproj.run.run import RUN_RESULTS_FILE
from odfproj.state.dataset_index import open_state_index
from odfproj.state.read import read_changelog, read_state
from odfproj.state.summary import ChainSummary
from odfproj.storage.workspace import Workspace

__all__ = ["DatasetSummary", "describe_dataset"]


@dataclass(frozen=True)
class DatasetSummary:
    name: str
    kind: str
    #: Input names (their ``did:odf`` where the workspace does not know them), derivatives only.
    inputs: tuple[str, ...]
    #: The transform's queries (derivatives) or a description of each source (roots).
    definition: tuple[str, ...]
    schema: tuple[str, ...]
    chain: ChainSummary
    #: Rows valid now (datasets with a primary key; None for the others).
    current_rows: int | None
    #: The first rows of the current state (keyed) or of the changelog.
    sample: pa.Table
    #: The operation type column of the changelog (``SetVocab`` may rename it).
    op_column: str
    #: This dataset's entry of the last ``run_results.json``, with its ``run_started_at``.
    last_run: dict[str, Any] | None


def describe_dataset(workspace: Workspace, name: str, *, rows: int = 5) -> DatasetSummary:
    """Everything ``show`` prints; raises the workspace's error for an unknown dataset."""
    dataset = workspace.open(name, recover=False)
    projection = dataset.projection()
    chain = ChainSummary.of(projection)
    index = None
    if chain.primary_key and projection.arrow_schema is not None:
        index = open_state_index(dataset, chain.primary_key)
    # The count is the index's; only the files holding the first rows are read.
    if index is not None:
        sample = read_state(dataset, index=index, limit=rows)
    else:
        sample = read_changelog(dataset, limit=rows)
    known = load_workspace_state(workspace.root).known_ids()
    return DatasetSummary(
        name=dataset.name,
        kind=projection.kind.name,
        inputs=_inputs(projection.set_transform, known),
        definition=_definition(projection),
        schema=tuple(projection.schema_ddl() or ()),
        chain=chain,
        current_rows=len(index.current) if index is not None else None,
        sample=sample,
        op_column=Vocab.of(projection.set_vocab).op,
        last_run=_last_run(workspace, dataset.name),
    )


def _inputs(transform: model.SetTransform | None, names: dict[str, str]) -> tuple[str, ...]:
    if transform is None:
        return ()
    return tuple(names.get(i.dataset_ref, i.dataset_ref) for i in transform.inputs)


def _definition(projection: Any) -> tuple[str, ...]:
    if projection.set_transform is not None:
        transform = projection.set_transform.transform
        steps = getattr(transform, "queries", None) or ()
        queries = [f"{s.alias}: {s.query.strip()}" if s.alias else s.query.strip() for s in steps]
        if not queries and getattr(transform, "query", None):
            queries = [transform.query.strip()]
        return tuple(queries)
    sources = []
    if projection.set_polling_source is not None:
        fetch = projection.set_polling_source.fetch
        where = getattr(fetch, "path", None) or getattr(fetch, "url", None) or ""
        sources.append(f"polling: {type(fetch).__name__} {where}".rstrip())
    sources.extend(f"push: {name}" for name in projection.push_sources)
    return tuple(sources)


def _last_run(workspace: Workspace, name: str) -> dict[str, Any] | None:
    try:
        data = json.loads((workspace.root / RUN_RESULTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for entry in data.get("results") or ():
        if isinstance(entry, dict) and str(entry.get("unique_id", "")).lower() == name.lower():
            return {**entry, "run_started_at": data.get("started_at")}
    return None
