"""Query Evolution in the plan: ask the engine for a changed query's output schema, then apply the rules.

The spec's procedure (Query Evolution) is: the engine validates the new query and returns its schema,
then the coordinator checks that schema against Schema Evolution (columns may only be added). The
planner stays free of Spark: it is handed a :data:`QueryChecker` (the CLI builds one on the Spark
engine) and calls it only for a derivative whose ``SetTransform`` is created or changed, so a plan
with no query change starts no JVM. Without a checker the change is shown as not validated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import pyarrow as pa

from odfproj.engine.contract import InvalidQueryError
from odfproj.odf import model
from odfproj.odf.data_schema import OFFSET, OP, SYSTEM_TIME, Vocab
from odfproj.plan import evolution
from odfproj.plan.diff import ChainView, fold
from odfproj.plan.model import Action, OutputSchema, PlanStep

#: ``(dataset, transform, {alias: input data schema}, the derivative's vocabulary) -> its data schema``;
#: raises ``InvalidQueryError`` for a query the engine refuses.
QueryChecker = Callable[[str, model.Transform, Mapping[str, pa.Schema], Vocab], pa.Schema]


@dataclass(frozen=True)
class _Inputs:
    schemas: Mapping[str, pa.Schema]
    #: Inputs whose schema is not known yet (not created, or no data yet), by the manifest's reference.
    unknown: tuple[str, ...]


def columns_of(schema: pa.Schema) -> tuple[str, ...]:
    """The columns a user cares about, as ``name type``: the system columns odfproj writes are left out."""
    return tuple(f"{f.name} {f.type}" for f in schema if f.name not in (OFFSET, OP, SYSTEM_TIME))


def check_query(
    step: PlanStep,
    snapshot: model.DatasetSnapshot,
    own: ChainView | None,
    views: Mapping[str, ChainView],
    checker: QueryChecker | None,
) -> PlanStep:
    """``step`` with the output schema of its new query, refused if the query or its schema breaks rules."""
    change = next((c for c in step.changes if c.key == "SetTransform" and c.event is not None), None)
    folded = fold(snapshot.metadata)
    transform = folded.get("SetTransform")
    if change is None or not isinstance(transform, model.SetTransform):
        return step
    before = own.data_schema if own is not None else None
    inputs = _input_schemas(transform, views)
    if checker is None:
        note = "query not validated (planned without the engine, e.g. --no-validate-queries); run checks it"
    elif inputs.unknown:
        note = f"query validated at run time: input {', '.join(inputs.unknown)} has no data schema yet"
    else:
        note = None
    if note is not None:
        if before is not None:
            step = replace(step, output_schema=OutputSchema(columns_of(before), None))
        return _with_note(step, note)
    assert checker is not None
    try:
        after = checker(step.dataset, transform.transform, inputs.schemas, Vocab.of(folded.get("SetVocab")))
    except InvalidQueryError as e:
        return _refused(step, f"the query is invalid: {e}")
    schema = OutputSchema(columns_of(before) if before is not None else None, columns_of(after))
    step = replace(step, output_schema=schema)
    if before is None:
        return step
    verdict = evolution.schema_change(before, after, "the new query")
    if not verdict.allowed:
        return _refused(step, *verdict.reasons)
    added = [f.name for f in after if f.name not in set(before.names)]
    if added:
        step = _with_note(
            step,
            f"the query adds column(s) {', '.join(added)}: run retracts every stored record and "
            "appends it again with the new column(s)",
        )
    return step


def _input_schemas(transform: model.SetTransform, views: Mapping[str, ChainView]) -> _Inputs:
    by_id = {view.dataset_id: view for view in views.values()}
    schemas: dict[str, pa.Schema] = {}
    unknown: list[str] = []
    for inp in transform.inputs:
        ref = inp.dataset_ref
        view = by_id.get(ref) if ref.startswith("did:") else views.get(ref.lower())
        schema = view.data_schema if view is not None else None
        if schema is None:
            unknown.append(ref)
        else:
            schemas[inp.alias or ref] = schema
    return _Inputs(schemas, tuple(unknown))


def _with_note(step: PlanStep, note: str) -> PlanStep:
    changes = tuple(
        replace(c, notes=(*c.notes, note)) if c.key == "SetTransform" and c.event is not None else c
        for c in step.changes
    )
    return replace(step, changes=changes)


def _refused(step: PlanStep, *reasons: str) -> PlanStep:
    return replace(step, action=Action.REFUSED, reasons=(*step.reasons, *reasons), data_work=())
