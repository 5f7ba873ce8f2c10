"""Apply a plan: append exactly the events the plan lists, dataset by dataset, in topological order.

Apply walks the same ``Plan`` the reviewer read, so what runs can never drift from what was shown.
The caller holds the workspace lock for the whole apply (two applies never interleave). Each dataset
is one atomic commit; a failure stops the apply with every dataset either untouched or fully
updated, and running it again finishes the job (apply is idempotent: an applied plan replans to
"no changes"). An interrupt (``cancel`` set) stops it the same way, between two datasets.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from odfproj.errors import PlanError
from odfproj.odf import model
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multihash
from odfproj.odf.yaml_codec import from_data
from odfproj.plan.apply_record import APPLY_RECORD, applied_sequence_number, apply_record
from odfproj.plan.model import Action, AppendDefinitions, Plan, RenameDataset
from odfproj.plan.planfile import read_plan_file
from odfproj.run.environments import fork_changed
from odfproj.storage.dataset import Dataset
from odfproj.storage.errors import DatasetExistsError, DatasetNotFoundError
from odfproj.storage.workspace import Workspace


class StalePlanError(PlanError):
    """The workspace changed since the plan was made; the plan must be made again."""


@dataclass(frozen=True)
class AppliedStep:
    dataset: str
    action: Action
    events: tuple[str, ...]
    head: str


@dataclass(frozen=True)
class ApplyResult:
    steps: tuple[AppliedStep, ...]
    #: Datasets left untouched because the apply was interrupted before their step.
    not_applied: tuple[str, ...] = ()
    #: Renames made, as ``(old name, new name)``, before any definition was appended.
    renamed: tuple[tuple[str, str], ...] = ()

    @property
    def changed(self) -> tuple[AppliedStep, ...]:
        return tuple(s for s in self.steps if s.events)

    def summary(self) -> str:
        created = sum(1 for s in self.steps if s.action is Action.CREATE)
        updated = sum(1 for s in self.steps if s.action in (Action.UPDATE, Action.DRIFT))
        blocks = sum(len(s.events) for s in self.steps)
        renamed = f"{len(self.renamed)} renamed, " if self.renamed else ""
        done = f"{renamed}{created} created, {updated} updated, {blocks} block(s) appended"
        if self.not_applied:
            return (
                f"Apply interrupted: {done}; {len(self.not_applied)} dataset(s) not applied "
                f"({', '.join(self.not_applied)}): apply again to finish."
            )
        return f"Apply complete: {done}."


def check_plan(plan: Plan, workspace: Workspace) -> None:
    """Refuse a plan with refused steps, or one whose datasets moved since it was made."""
    refused = [
        *(r for r in plan.renames if r.refused),
        *(s for s in plan.definitions if s.action is Action.REFUSED),
    ]
    if refused:
        first = refused[0]
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise PlanError(
            f"the plan has refused changes; nothing was applied: {first.dataset}: "
            f"{'; '.join(first.reasons)}{more}"
        )
    renamed = {r.dataset.lower(): r.source for r in plan.renames}
    for rename in plan.renames:
        if workspace.exists(rename.dataset):
            raise StalePlanError(
                f"dataset {rename.dataset} was created since the plan was made; nothing was applied: "
                "run odfproj plan again"
            )
        if _current_head(workspace, rename.source) != rename.expected_head:
            raise StalePlanError(
                f"dataset {rename.source} (to be renamed to {rename.dataset}) changed since the plan was made; "
                "nothing was applied: run odfproj plan again"
            )
    for step in plan.definitions:
        # A renamed dataset's definitions were planned against its chain under the old name.
        current = _current_head(workspace, renamed.get(step.dataset.lower(), step.dataset))
        if current != step.expected_head:
            if step.expected_head is None:
                why = "was created"
            elif current is None:
                why = "was deleted"
            else:
                why = f"moved from {step.expected_head[:16]}… to {current[:16]}…"
            raise StalePlanError(
                f"dataset {step.dataset} {why} since the plan was made; nothing was applied: "
                "run odfproj plan again"
            )


def read_saved_plan(path: Path, workspace: Workspace) -> Plan:
    """A plan saved by ``plan --out``; refused when it was made for another workspace.

    A plan of ``plan --env NAME`` made before environment NAME existed was made against production,
    which a new environment starts from: it applies in that environment (its heads are checked, as
    every saved plan's are, by ``check_plan``).
    """
    plan = read_plan_file(path)
    made_for = Path(plan.workspace).resolve()
    if made_for != workspace.root.resolve():
        production = workspace.production
        if production is None or made_for != production.root.resolve():
            raise PlanError(f"{path} was made for workspace {plan.workspace}, not {workspace.root}")
    return plan


def apply_plan(
    plan: Plan,
    workspace: Workspace,
    *,
    on_step: Callable[[AppliedStep], None] | None = None,
    on_rename: Callable[[str, str], None] | None = None,
    system_time: datetime | None = None,
    cancel: threading.Event | None = None,
) -> ApplyResult:
    """Apply ``plan`` to ``workspace``; the caller holds ``workspace.lock()``.

    ``on_rename(old, new)`` and ``on_step`` are told of each rename and each definition step as it is
    done, so a user watching a long apply sees progress in the order it happens.
    Once ``cancel`` is set no further dataset is touched; the result names the ones left.
    """
    check_plan(plan, workspace)
    now = system_time or datetime.now(UTC)
    renamed = []
    for rename in plan.renames:  # first: the definition steps name the datasets by their new names
        if cancel is not None and cancel.is_set():
            left = tuple(r.dataset for r in plan.renames[len(renamed) :])
            return ApplyResult((), not_applied=left, renamed=tuple(renamed))
        _rename(rename, workspace)
        renamed.append((rename.source, rename.dataset))
        if on_rename is not None:
            on_rename(rename.source, rename.dataset)
    applied: list[AppliedStep] = []
    steps = [s for s in plan.definitions if s.action not in (Action.ORPHAN, Action.REFUSED)]
    # In a preview environment a changed dataset and its downstream get chains of their own first.
    fork_changed(workspace, [s.dataset for s in steps if s.changes and s.action is not Action.CREATE])
    for index, step in enumerate(steps):
        if cancel is not None and cancel.is_set():
            left = tuple(s.dataset for s in steps[index:] if s.changes)
            return ApplyResult(tuple(applied), not_applied=left, renamed=tuple(renamed))
        result = _apply_step(step, workspace, now)
        applied.append(result)
        if on_step is not None:
            on_step(result)
    return ApplyResult(tuple(applied), renamed=tuple(renamed))


def _rename(step: RenameDataset, workspace: Workspace) -> None:
    """Rename one dataset, refusing it (as stale) if it was replaced since the plan was made."""
    expected = DatasetId.from_did_str(step.dataset_id) if step.dataset_id else None
    try:
        workspace.rename(step.source, step.dataset, expected_id=expected)
    except DatasetExistsError as e:
        raise StalePlanError(f"{e}; run odfproj plan again") from None


def _apply_step(step: AppendDefinitions, workspace: Workspace, now: datetime) -> AppliedStep:
    events = [
        _resolve_inputs(from_data("MetadataEvent", c.event), workspace) for c in step.changes if c.event
    ]
    kinds = tuple(type(e).__name__ for e in events)
    if step.action is Action.CREATE:
        kind = model.DatasetKind[step.kind or "Root"]
        dataset = workspace.create(step.dataset, kind, events=events, system_time=now)
    else:
        dataset = workspace.open(step.dataset)
        if events:
            expected = Multihash.from_multibase(step.expected_head) if step.expected_head else None
            dataset.append(events, expected_head=expected, system_time=now)
    projection = dataset.projection()
    _record_apply(dataset, step, projection.sequence_number, projection.head.to_multibase(), now)
    return AppliedStep(step.dataset, step.action, kinds, projection.head.to_multibase())


def _record_apply(
    dataset: Dataset, step: AppendDefinitions, sequence_number: int, head: str, now: datetime
) -> None:
    """Remember where apply left the chain, so later definition events show up as drift.

    Not for a dataset an environment pins: nothing was appended to it (a change forks it first), and
    its record is production's, which the environment reads (``Dataset.read_info``).
    """
    if dataset.pinned is not None:
        return
    record = apply_record(
        sequence_number=sequence_number,
        head=head,
        manifest=step.manifest,
        applied_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    if applied_sequence_number(dataset.read_info(APPLY_RECORD)) != sequence_number:
        dataset.write_info(APPLY_RECORD, record)


def _resolve_inputs(event: Any, workspace: Workspace) -> Any:
    """Inputs named by datasets that this apply created now get their ids (the chain stores ids)."""
    if not isinstance(event, model.SetTransform):
        return event
    inputs = []
    for inp in event.inputs:
        ref = inp.dataset_ref
        if not ref.startswith("did:"):
            try:
                ref = workspace.open(ref).dataset_id.as_did_str()
            except DatasetNotFoundError:
                raise PlanError(f"input {inp.dataset_ref!r} does not exist in the workspace") from None
        inputs.append(replace(inp, dataset_ref=ref))
    return replace(event, inputs=tuple(inputs))


def _current_head(workspace: Workspace, name: str) -> str | None:
    if not workspace.exists(name):
        return None
    head = workspace.open(name).head()
    return head.to_multibase() if head is not None else None
