"""The workspace side of a plan: each dataset's chain as the planner sees it (a ``ChainView``).

Reads only, and without recovery: planning never writes to the workspace.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odfproj.odf import model
from odfproj.plan.apply_record import APPLY_RECORD, applied_sequence_number
from odfproj.plan.diff import WRITTEN_BY_DATA, Agreement, ChainView
from odfproj.plan.view_cache import Agreements, ViewCache
from odfproj.storage.dataset import Dataset
from odfproj.storage.projection import ChainProjection, event_kind
from odfproj.storage.update_record import read_update_record

__all__ = ["WorkspaceState", "load_workspace_state"]


@dataclass(frozen=True)
class WorkspaceState:
    """Every dataset of the workspace as the planner sees it, keyed by lower-case name."""

    views: Mapping[str, ChainView]
    names: tuple[str, ...]
    #: How many datasets the workspace holds, read or not (a narrowed plan reads only some).
    total: int = 0
    #: The agreements kept with the views read from the view cache (``plan.diff.Agreement``).
    agreed: Mapping[str, Agreement] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    #: The view cache the views came from, to keep the agreements a plan finds (None: not cached).
    cache: ViewCache | None = field(default=None, compare=False, repr=False)

    def known_ids(self) -> dict[str, str]:
        """``did:odf`` -> dataset name, for resolving inputs given by id."""
        return {self.views[name.lower()].dataset_id: name for name in self.names}

    def agreements(self) -> Agreements:
        """What a plan of these views may skip diffing, and where it notes what it finds."""
        return Agreements(self.agreed)

    def keep(self, agreements: Agreements) -> None:
        """Remember the agreements a plan found with their views (writes the cache only if one is new)."""
        if self.cache is not None and agreements.found:
            self.cache.agree(agreements.found)
            self.cache.save()


def load_workspace_state(root: Path, names: Collection[str] | None = None) -> WorkspaceState:
    """Chain projections of the workspace's datasets (only ``names``, matched case-insensitively, when
    given); an absent workspace is an empty one."""
    if not (root / "datasets").is_dir():
        return WorkspaceState({}, ())
    from odfproj.storage.workspace import Workspace

    wanted = None if names is None else {n.lower() for n in names}
    handles = Workspace(root).read_handles()
    listed = [dataset.name for dataset in handles]
    read = tuple(d for d in handles if wanted is None or d.name.lower() in wanted)
    views: dict[str, ChainView] = {}
    agreed: dict[str, Agreement] = {}
    cache = ViewCache.open(root, len(listed))
    for dataset in read:
        key = dataset.name.lower()
        stamp = cache.stamp(dataset)
        view = cache.get(key, stamp)
        if view is None:
            view = _view_of(dataset)
            cache.put(key, stamp, view)
        elif (agreement := cache.agreement(key)) is not None:
            agreed[key] = agreement
        views[key] = view
    cache.save(keep=[n.lower() for n in listed] if names is None else None)
    return WorkspaceState(
        MappingProxyType(views),
        tuple(d.name for d in read),
        len(listed),
        MappingProxyType(agreed),
        cache if cache.enabled else None,
    )


def _view_of(dataset: Dataset) -> ChainView:
    """The dataset's chain as the planner sees it, read from its projection and ``info/`` records."""
    projection = dataset.projection()
    applied = applied_sequence_number(dataset.read_info(APPLY_RECORD))
    foreign = ()
    if applied is not None:
        foreign = tuple(
            f"{event_kind(d.event)} (block {d.sequence_number})"
            for d in projection.definition_events
            if d.sequence_number > applied and event_kind(d.event) not in WRITTEN_BY_DATA
        )
    return ChainView(
        dataset_id=projection.dataset_id.as_did_str(),
        kind=projection.kind,
        head=projection.head.to_multibase(),
        has_data=projection.has_data,
        definition_events=tuple(d.event for d in projection.definition_events),
        foreign_events=foreign,
        last_offset=projection.last_offset,
        input_offsets=tuple((did.as_did_str(), pos.new_offset) for did, pos in projection.inputs.items()),
        schema_bytes=projection.schema,
        last_update=read_update_record(dataset, projection) if projection.set_transform else None,
        block_version=dataset.block_version(projection.head),
        **_files_glob_progress(dataset, projection),
    )


def _files_glob_progress(dataset: Dataset, projection: ChainProjection) -> dict[str, Any]:
    """A ``FilesGlob`` root's source state and ingested files (a walk of its blocks: such roots only)."""
    source = projection.set_polling_source
    if (
        source is None
        or not isinstance(source.fetch, model.FetchStepFilesGlob)
        or not projection.source_states
    ):
        return {}  # never ingested: nothing to resume from, nothing to walk
    # Imported here: only ingested FilesGlob roots need the ingest package; plan starts faster without it.
    from odfproj.ingest.fetch import POLLING_SOURCE_NAME, glob_history

    state = projection.source_states.get(POLLING_SOURCE_NAME)
    return {} if state is None else {"polling_state": state, "ingested_files": glob_history(dataset)}
