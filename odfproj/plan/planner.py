"""Make a ``Plan`` from the project's manifests and the workspace's chains. Reads only; executes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pyarrow as pa

from odfproj.odf import model
from odfproj.plan.diff import ChainView, diff_dataset, fold
from odfproj.plan.model import Action, Plan, PlanStep
from odfproj.plan.queries import QueryChecker, check_queries


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
) -> Plan:
    """``desired`` in topological order; ``views`` keyed by lower-case dataset name.

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
    steps: list[PlanStep] = []
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
            step = replace(step, data_work=data_work(d.snapshot, views))
        steps.append(step)
    for name in sorted(orphans):
        view = views.get(name.lower())
        steps.append(
            PlanStep(
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
        steps=tuple(steps),
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


def _inputs_of_changed(desired: Sequence[DesiredDataset], diffs: Sequence[PlanStep]) -> set[str]:
    """Lower-case names of the inputs of derivatives whose definition changes: their schemas are needed."""
    names: set[str] = set()
    for d, step in zip(desired, diffs, strict=True):
        transform = fold(d.snapshot.metadata).get("SetTransform")
        if step.has_changes and isinstance(transform, model.SetTransform):
            names.update(i.dataset_ref.lower() for i in transform.inputs)
    return names


def data_work(snapshot: model.DatasetSnapshot, views: Mapping[str, ChainView]) -> tuple[str, ...]:
    """What ``run`` would do for the dataset's data, judged from metadata alone (nothing is fetched)."""
    definition = fold(snapshot.metadata)
    source = definition.get("SetPollingSource")
    if isinstance(source, model.SetPollingSource):
        return (f"poll the {type(source.fetch).__name__.removeprefix('FetchStep')} source",)
    transform = definition.get("SetTransform")
    if not isinstance(transform, model.SetTransform):
        return ()
    own = views.get(snapshot.name.lower())
    consumed = own.input_offsets if own is not None else {}
    work = []
    for inp in transform.inputs:
        ref = inp.dataset_ref
        view = views.get(ref.lower()) or next((v for v in views.values() if v.dataset_id == ref), None)
        if view is None:
            work.append(f"transform once input {ref} has data")
        elif view.last_offset is not None:
            done = consumed.get(view.dataset_id)
            new = view.last_offset - (done if done is not None else -1)
            if new > 0:
                work.append(f"transform {new} new record(s) of {ref}")
    return tuple(work)
