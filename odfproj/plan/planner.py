"""Make a ``Plan`` from the project's manifests and the workspace's chains. Reads only; executes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from odfproj.odf import model
from odfproj.plan.diff import ChainView, diff_dataset
from odfproj.plan.model import Action, Plan, PlanStep


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
) -> Plan:
    """``desired`` in topological order; ``views`` keyed by lower-case dataset name."""
    planned_ids = {name: view.dataset_id for name, view in views.items()}

    def resolve(ref: str) -> str | None:
        return planned_ids.get(ref.lower())

    steps: list[PlanStep] = [
        diff_dataset(d.snapshot, d.manifest, views.get(d.snapshot.name.lower()), resolve) for d in desired
    ]
    for name in sorted(orphans):
        view = views.get(name.lower())
        steps.append(
            PlanStep(
                name,
                Action.ORPHAN,
                None,
                view.kind.name if view else None,
                reasons=(
                    "no manifest defines this dataset; it is kept (nothing is deleted without an explicit flag)",
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
