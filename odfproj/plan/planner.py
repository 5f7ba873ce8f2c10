"""Make a ``Plan`` from the project's manifests and the workspace's chains. Reads only; executes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from odfproj.odf import model
from odfproj.plan.diff import ChainView, agreement_of, diff_dataset, fold, unchanged_step
from odfproj.plan.model import Action, AppendDefinitions, DataStep, InputName, Plan, RenameDataset, Transform
from odfproj.plan.queries import QueryChecker, check_queries
from odfproj.plan.renames import PlannedRenames
from odfproj.plan.view_cache import Agreements
from odfproj.plan.work import data_step

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class DesiredDataset:
    manifest: str
    snapshot: model.DatasetSnapshot
    #: The snapshot's definition digest when the parse cache keeps it (``LoadedManifest.definition_digest``).
    digest: str | None = None


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
    renames: PlannedRenames | None = None,
    agreements: Agreements | None = None,
) -> Plan:
    """``desired`` in topological order; ``views`` keyed by lower-case dataset name.

    ``renames`` (see ``plan.renames``) come first in the plan, and every other step is planned against
    the chains as they are named after them (``renames.views``, which replaces ``views``). A derivative
    whose manifest still names a renamed dataset's old name is refused: its input would not exist.

    The plan lists one ``AppendDefinitions`` per dataset, then the data steps of the datasets that are
    not refused (see ``plan.work``; ``project_root`` lets it list the files a FilesGlob root will read).

    ``query_checker`` validates created and changed queries (see ``plan.queries``); without one they
    are marked as not validated. ``orphan_readers`` names, for an orphan, the project's datasets that
    still read it (its manifest was deleted under them).

    ``known_ids`` (``did:odf`` -> name, the workspace's) names the inputs a step's changes give by
    id; ``downstream_of`` (the dataset graph's ``downstream``) finds, for a dataset run recomputes,
    the datasets it recomputes after it.

    ``agreements`` (the workspace state's, see ``plan.diff.Agreement``): a dataset whose manifest digest
    and inputs agree with what its unchanged chain was found to define is unchanged without a diff;
    the agreements the diffs find are noted in it. Not used when the plan renames a dataset.
    """
    renames = renames or PlannedRenames((), views)
    views = renames.views
    planned_ids = {name: view.dataset_id for name, view in views.items()}

    def resolve(ref: str) -> str | None:
        return planned_ids.get(ref.lower())

    memo = agreements if not renames.steps else None
    diffs = [_refuse_old_names(d, renames) or _diff(d, views, resolve, memo) for d in desired]
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
            # The last run's record is of the chain's query: of this one only if the plan keeps it.
            keeps_query = not any(c.key == "SetTransform" for c in step.changes)
            last_run = own.last_update if own is not None and keeps_query else None
            data = data_step(d.snapshot.name, d.manifest, d.snapshot, views, project_root, mode, last_run)
            if data is not None:
                work.append(data)
        steps.append(step)
    steps = _with_input_names(steps, _names_by_id(desired, views, known_ids or {}))
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
        steps=(*_with_definition_refusals(renames.steps, steps), *steps, *work),
        warnings=tuple(warnings),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def _diff(
    d: DesiredDataset,
    views: Mapping[str, ChainView],
    resolve: Callable[[str], str | None],
    agreements: Agreements | None,
) -> AppendDefinitions:
    """``diff_dataset``'s step, or ``unchanged_step`` when the chain agrees with the manifest as it did."""
    key = d.snapshot.name.lower()
    view = views.get(key)
    if agreements is None or view is None or d.digest is None:
        return diff_dataset(d.snapshot, d.manifest, view, resolve)
    agreement = agreement_of(d.snapshot, d.digest, resolve)
    if agreements.holds(key, agreement):
        return unchanged_step(d.snapshot, d.manifest, view)
    step = diff_dataset(d.snapshot, d.manifest, view, resolve)
    if step.action is Action.UNCHANGED and not step.changes:
        agreements.note(key, agreement)
    return step


def _refuse_old_names(d: DesiredDataset, renames: PlannedRenames) -> AppendDefinitions | None:
    """A refused step when ``d`` reads a dataset by the name this plan renames away; else None."""
    transform = fold(d.snapshot.metadata).get("SetTransform")
    if not isinstance(transform, model.SetTransform):
        return None
    reasons = tuple(
        f"input {i.dataset_ref!r} is renamed to {new!r} (odfproj.yaml moved): name it {new!r} "
        "(same id: nothing is recomputed)"
        for i in transform.inputs
        if (new := renames.renamed_to(i.dataset_ref)) is not None
    )
    if not reasons:
        return None
    own = renames.views.get(d.snapshot.name.lower())
    return AppendDefinitions(
        d.snapshot.name,
        Action.REFUSED,
        d.manifest,
        d.snapshot.kind.name,
        reasons=reasons,
        expected_head=own.head if own else None,
    )


def _with_definition_refusals(
    renames: tuple[RenameDataset, ...], steps: list[AppendDefinitions]
) -> tuple[RenameDataset, ...]:
    """A rename whose dataset's definition change is refused is refused with it (one line, both files)."""
    refused = {s.dataset.lower(): s for s in steps if s.action is Action.REFUSED}
    out = []
    for rename in renames:
        step = refused.get(rename.dataset.lower())
        if step is not None and not rename.refused:
            why = f"{rename.declared_in}: moved {rename.source} -> {rename.dataset}: refused with the change "
            rename = replace(rename, reasons=(f"{why}{step.manifest} makes: {step.reasons[0]}",))
        out.append(rename)
    return tuple(out)


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


def _names_by_id(
    desired: Sequence[DesiredDataset], views: Mapping[str, ChainView], known_ids: Mapping[str, str]
) -> dict[str, str]:
    """``did:odf`` -> the name plans show: the manifest's (a renamed dataset's new name), else the
    workspace's spelling."""
    spelled = {d.snapshot.name.lower(): d.snapshot.name for d in desired}
    names = dict(known_ids)
    for key, view in views.items():
        names[view.dataset_id] = spelled.get(key) or known_ids.get(view.dataset_id) or key
    return names


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
