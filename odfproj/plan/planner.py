"""Make a ``Plan`` from the project's manifests and the workspace's chains. Reads only; executes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from odfproj.odf import model
from odfproj.plan.diff import ChainView, diff_dataset, fold
from odfproj.plan.model import Action, AppendDefinitions, DataStep, Plan
from odfproj.plan.queries import QueryChecker, check_queries
from odfproj.plan.work import data_step


@dataclass(frozen=True)
class DesiredDataset:
    manifest: str
    snapshot: model.DatasetSnapshot


def make_plan(
    *,
    project: str,
    workspace: str,
    desired: Sequence[DesiredDataset],
    views: Mapping[str, ChainView],
    orphans: Sequence[str] = (),
    warnings: Sequence[str] = (),
    query_checker: QueryChecker | None = None,
    orphan_readers: Mapping[str, Sequence[str]] | None = None,
    project_root: Path | None = None,
) -> Plan:
    """``desired`` in topological order; ``views`` keyed by lower-case dataset name.

    The plan lists one ``AppendDefinitions`` per dataset, then the data steps of the datasets that are
    not refused (see ``plan.work``; ``project_root`` lets it list the files a FilesGlob root will read).

    ``query_checker`` validates created and changed queries (see ``plan.queries``); without one they
    are marked as not validated. ``orphan_readers`` names, for an orphan, the project's datasets that
    still read it (its manifest was deleted under them).
    """
    planned_ids = {name: view.dataset_id for name, view in views.items()}

    def resolve(ref: str) -> str | None:
        return planned_ids.get(ref.lower())

    diffs = [
        diff_dataset(d.snapshot, d.manifest, views.get(d.snapshot.name.lower()), resolve) for d in desired
    ]
    needed = _inputs_of_changed(desired, diffs)
    planned: dict[str, pa.Schema] = {}
    steps: list[AppendDefinitions] = []
    work: list[DataStep] = []
    for d, step in zip(desired, diffs, strict=True):
        own = views.get(d.snapshot.name.lower())
        name = d.snapshot.name.lower()
        mode = None
        if step.has_changes or (name in needed and (own is None or own.schema_bytes is None)):
            checked = check_queries(
                step, d.snapshot, own, views, query_checker, planned, needed=name in needed
            )
            if checked.planned_schema is not None and checked.step.action is not Action.REFUSED:
                planned[name] = checked.planned_schema
            if step.has_changes:
                step = checked.step
            mode = checked.mode
        if step.action is not Action.REFUSED:
            data = data_step(d.snapshot.name, d.manifest, d.snapshot, views, project_root, mode)
            if data is not None:
                work.append(data)
        steps.append(step)
    for name in sorted(orphans):
        view = views.get(name.lower())
        steps.append(
            AppendDefinitions(
                name,
                Action.ORPHAN,
                None,
                view.kind.name if view else None,
                reasons=_orphan_reasons(name, (orphan_readers or {}).get(name, ())),
                expected_head=view.head if view else None,
            )
        )
    return Plan(
        project=project,
        workspace=workspace,
        steps=(*steps, *work),
        warnings=tuple(warnings),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def _orphan_reasons(name: str, readers: Sequence[str]) -> tuple[str, ...]:
    reasons = [
        "no manifest defines this dataset (was its manifest deleted?); it is kept, as plan and apply never delete "
        f"a dataset: restore its manifest, or delete it with `odfproj destroy {name}`"
    ]
    if readers:
        reasons.append(f"still an input of {', '.join(sorted(readers, key=str.lower))}: restore its manifest")
    return tuple(reasons)


def _inputs_of_changed(desired: Sequence[DesiredDataset], diffs: Sequence[AppendDefinitions]) -> set[str]:
    """Lower-case names of the inputs of derivatives whose definition changes: their schemas are needed."""
    names: set[str] = set()
    for d, step in zip(desired, diffs, strict=True):
        transform = fold(d.snapshot.metadata).get("SetTransform")
        if step.has_changes and isinstance(transform, model.SetTransform):
            names.update(i.dataset_ref.lower() for i in transform.inputs)
    return names
