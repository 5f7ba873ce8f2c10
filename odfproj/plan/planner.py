"""Make a ``Plan`` from the project's manifests and the workspace's chains. Reads only; executes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from odfproj.odf import model
from odfproj.plan.diff import ChainView, diff_dataset, fold
from odfproj.plan.model import Action, AppendDefinitions, DataStep, InputName, Plan, Transform
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
    known_ids: Mapping[str, str] | None = None,
    downstream_of: Callable[[str], Iterable[str]] | None = None,
) -> Plan:
    """``desired`` in topological order; ``views`` keyed by lower-case dataset name.

    The plan lists one ``AppendDefinitions`` per dataset, then the data steps of the datasets that are
    not refused (see ``plan.work``; ``project_root`` lets it list the files a FilesGlob root will read).

    ``query_checker`` validates created and changed queries (see ``plan.queries``); without one they
    are marked as not validated. ``orphan_readers`` names, for an orphan, the project's datasets that
    still read it (its manifest was deleted under them).

    ``known_ids`` (``did:odf`` -> name, the workspace's) names the inputs a step's changes give by
    id; ``downstream_of`` (the dataset graph's ``downstream``) finds, for a dataset run recomputes,
    the datasets it recomputes after it.
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
        if step.has_changes or (name in needed and (own is None or own.schema_bytes is None)):
            checked = check_queries(
                step, d.snapshot, own, views, query_checker, planned, needed=name in needed
            )
            if checked.planned_schema is not None and checked.step.action is not Action.REFUSED:
                planned[name] = checked.planned_schema
            if step.has_changes:
                step = checked.step
        if step.action is not Action.REFUSED:
            data = data_step(d.snapshot.name, d.manifest, d.snapshot, views, project_root)
            if data is not None:
                work.append(data)
        steps.append(step)
    steps = _with_input_names(steps, {**_spelled_ids(desired, views), **(known_ids or {})})
    if downstream_of is not None:
        steps = _with_downstream(steps, work, downstream_of)
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


def _spelled_ids(desired: Sequence[DesiredDataset], views: Mapping[str, ChainView]) -> dict[str, str]:
    """``did:odf`` -> name for every dataset in ``views``, spelled as its manifest spells it."""
    spelled = {d.snapshot.name.lower(): d.snapshot.name for d in desired}
    return {view.dataset_id: spelled.get(key, key) for key, view in views.items()}


def _with_input_names(steps: list[AppendDefinitions], names: Mapping[str, str]) -> list[AppendDefinitions]:
    """Each step with the names of the input ids its SetTransform changes mention."""
    out = []
    for step in steps:
        ids = {
            inp.get("datasetRef")
            for change in step.changes
            for side in (change.before, change.after)
            if change.kind == "SetTransform" and side is not None
            for inp in side.get("inputs") or ()
        }
        found = tuple(InputName(i, names[i]) for i in sorted(i for i in ids if i in names))
        out.append(replace(step, input_names=found) if found else step)
    return out


def _with_downstream(
    steps: list[AppendDefinitions], work: Sequence[DataStep], downstream_of: Callable[[str], Iterable[str]]
) -> list[AppendDefinitions]:
    """Each step that makes run recompute its dataset, with the datasets run recomputes after it.

    Only datasets with a transform step in this plan count: a narrowed plan's run leaves the others.
    """
    order = {s.dataset.lower(): i for i, s in enumerate(work) if isinstance(s, Transform)}
    out = []
    for step in steps:
        if step.recomputes:
            below = {n.lower(): n for n in downstream_of(step.dataset) if n.lower() in order}
            step = replace(step, downstream=tuple(below[k] for k in sorted(below, key=order.__getitem__)))
        out.append(step)
    return out
