"""Make a ``Plan`` from the project's manifests and the workspace's chains. Reads only; executes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from odfproj.odf import model
from odfproj.plan.diff import ChainView, diff_dataset, fold
from odfproj.plan.model import Action, Plan, PlanStep
from odfproj.plan.queries import QueryChecker, check_query


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
) -> Plan:
    """``desired`` in topological order; ``views`` keyed by lower-case dataset name.

    ``query_checker`` validates created and changed queries (see ``plan.queries``); without one they
    are marked as not validated.
    """
    planned_ids = {name: view.dataset_id for name, view in views.items()}

    def resolve(ref: str) -> str | None:
        return planned_ids.get(ref.lower())

    steps: list[PlanStep] = []
    for d in desired:
        own = views.get(d.snapshot.name.lower())
        step = diff_dataset(d.snapshot, d.manifest, own, resolve)
        if step.has_changes:
            step = check_query(step, d.snapshot, own, views, query_checker)
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
                reasons=(
                    "no manifest defines this dataset; it is kept, as odfproj never deletes a dataset: "
                    "restore its manifest, or remove its folder from the workspace's datasets/ by hand",
                ),
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
