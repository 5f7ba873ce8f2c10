"""Query checks in the plan: translate every query, ask the engine for output schemas, apply the rules.

The spec's procedure (Query Evolution) is: the engine validates the new query and returns its schema,
then the coordinator checks that schema against Schema Evolution (columns may only be added). The
planner stays free of Spark: it is handed a :class:`QueryChecker` (the CLI builds one on the Spark
engine) and calls it only for a dataset whose queries or sources are created or changed (or whose
schema a changed derivative needs), so a plan with no such change starts no JVM. Without a checker the
change is shown as not validated. Translation from another engine's SQL needs no engine: a query that
cannot be translated is refused even without one.

A root's preprocess query is checked over an empty input with its read step's declared schema, and the
schema it yields stands in for the root's data schema until the root has data, so a new derivative of
a new root (or of a new derivative) is checked in the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from odfproj.engine.errors import InvalidQueryError
from odfproj.odf import model
from odfproj.odf.vocab import OFFSET, OP, SYSTEM_TIME, Vocab
from odfproj.plan import evolution
from odfproj.plan.diff import ChainView, fold
from odfproj.plan.model import Action, AppendDefinitions, OutputSchema

if (
    TYPE_CHECKING
):  # the query modes and dialects pull in sqlglot, pyarrow 0.1 s: only a plan that checks a query needs them
    import pyarrow as pa

    from odfproj.transform.modes import CheckedQuery, QueryMode


@dataclass(frozen=True)
class DerivativeCheck:
    """What a derivative's query check is asked: the query over inputs of these data schemas.

    One value, so that each checker (on Spark here, in the warm engine's server, watch's memo of it)
    takes and forwards it whole, and it crosses the warm engine's socket as it is (``inputs`` a dict).
    """

    #: The dataset's name, for the messages.
    dataset: str
    transform: model.Transform
    #: Each query alias's data schema (system columns included, as in its files).
    inputs: dict[str, pa.Schema]
    #: Names the derivative's event time (``None``: the default).
    vocab: Vocab | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", dict(self.inputs))  # a read-only mapping does not pickle


class QueryChecker(Protocol):
    """The engine's checks the plan calls: ``plan.engine_checks.query_checker`` on Spark in this process,
    ``plan.served_checks.WarmChecks`` in the warm engine's server."""

    def __call__(self, check: DerivativeCheck) -> CheckedQuery:
        """The derivative's data schema for the check's query over its inputs, and the query's execution
        mode; raises ``InvalidQueryError`` for a query the engine refuses."""

    def source_schema(
        self, dataset: str, source: model.SetPollingSource | model.AddPushSource, vocab: model.SetVocab | None
    ) -> pa.Schema | None:
        """A root's first data schema, from its read step's declared schema through its preprocess query
        (``None``: no schema declared); raises ``InvalidQueryError`` for a query the engine refuses."""


@dataclass(frozen=True)
class CheckedStep:
    """A step after the query checks, and the data schema the dataset will have when it has none yet."""

    step: AppendDefinitions
    #: What a derivative of this dataset will read; None when unknown (or when the chain already has it).
    planned_schema: pa.Schema | None = None
    #: A derivative's execution mode (``transform.modes``) when its query was checked; None otherwise.
    mode: QueryMode | None = None


@dataclass(frozen=True)
class _Inputs:
    schemas: Mapping[str, pa.Schema]
    #: Inputs whose schema is not known yet (not created, or no data yet), by the manifest's reference.
    unknown: tuple[str, ...]
    #: Inputs whose schema comes from this plan (their first run will write it), not from their chain.
    planned: tuple[str, ...] = ()


def columns_of(schema: pa.Schema) -> tuple[str, ...]:
    """The columns a user cares about, as ``name type``: the system columns odfproj writes are left out."""
    return tuple(f"{f.name} {f.type}" for f in schema if f.name not in (OFFSET, OP, SYSTEM_TIME))


def sql_transforms(snapshot: model.DatasetSnapshot) -> list[tuple[str, model.TransformSql]]:
    """Every Sql query of the dataset's current definition, with what it is (``transform``, ``preprocess``)."""
    found: list[tuple[str, model.TransformSql]] = []
    for key, event in fold(snapshot.metadata).items():
        if isinstance(event, model.SetTransform) and isinstance(event.transform, model.TransformSql):
            found.append(("transform", event.transform))
        elif isinstance(event, model.SetPollingSource | model.AddPushSource) and isinstance(
            event.preprocess, model.TransformSql
        ):
            label = "preprocess" if key == "SetPollingSource" else f"preprocess of push source {key[14:-1]}"
            found.append((label, event.preprocess))
    return found


def check_queries(
    step: AppendDefinitions,
    snapshot: model.DatasetSnapshot,
    own: ChainView | None,
    views: Mapping[str, ChainView],
    checker: QueryChecker | None,
    planned: Mapping[str, pa.Schema] | None = None,
    *,
    needed: bool = False,
) -> CheckedStep:
    """``step`` with its queries checked: translation (no engine), a root's preprocess, a derivative's query.

    ``planned`` holds the data schemas this plan's earlier steps will give datasets that have none yet
    (lower-case names), so a new derivative of a new dataset is checked before either has data.
    ``needed``: a changed derivative reads this dataset, so a root without data must report its schema
    even when no preprocess query changed (otherwise such a root starts no engine).
    """
    from odfproj.engine.dialects import UntranslatableQueryError, to_spark
    from odfproj.engine.gis import gis_refusals

    for label, transform in sql_transforms(snapshot):
        try:
            to_spark(transform)
        except UntranslatableQueryError as e:
            return CheckedStep(_refused(step, f"the {label} query cannot run: {e}"))
        unknown = gis_refusals(transform)  # no JVM: a misspelt ST_ function is reported even without one
        if unknown:
            return CheckedStep(_refused(step, f"the {label} query cannot run: {unknown[0]}"))
    definition = fold(snapshot.metadata)  # once: both checks read the current definition
    if snapshot.kind == model.DatasetKind.Root:
        return _check_sources(step, definition, own, checker, needed)
    return _check_transform(step, definition, own, views, checker, planned or {})


def _check_sources(
    step: AppendDefinitions,
    definition: Mapping[str, Any],
    own: ChainView | None,
    checker: QueryChecker | None,
    needed: bool,
) -> CheckedStep:
    """A root's sources checked over empty input of the read schema; the planned schema if it has no data."""
    changed = {c.key for c in step.changes if c.event is not None}
    has_schema = own is not None and own.schema_bytes is not None
    vocab = definition.get("SetVocab")
    planned: pa.Schema | None = None
    for key, source in definition.items():
        if not isinstance(source, model.SetPollingSource | model.AddPushSource):
            continue
        check_preprocess = key in changed and source.preprocess is not None
        if not (check_preprocess or (needed and not has_schema)):
            continue
        if checker is None:
            if check_preprocess:
                step = _with_note(step, _NOT_VALIDATED, key)
            continue
        try:
            schema = checker.source_schema(step.dataset, source, vocab)
        except InvalidQueryError as e:
            return CheckedStep(_refused(step, f"the ingest would fail: {e}"))
        if schema is None and check_preprocess:
            step = _with_note(
                step, "preprocess query validated at run time: the read step declares no schema", key
            )
        planned = planned or schema
    return CheckedStep(step, None if has_schema else planned)


_NOT_VALIDATED = "query not validated (planned without the engine, e.g. --no-validate-queries); run checks it"


def _check_transform(
    step: AppendDefinitions,
    definition: Mapping[str, Any],
    own: ChainView | None,
    views: Mapping[str, ChainView],
    checker: QueryChecker | None,
    planned: Mapping[str, pa.Schema],
) -> CheckedStep:
    """``step`` with the output schema of its new query, refused if the query or its schema breaks rules."""
    change = next((c for c in step.changes if c.key == "SetTransform" and c.event is not None), None)
    transform = definition.get("SetTransform")
    if change is None or not isinstance(transform, model.SetTransform):
        return CheckedStep(step)
    before = own.data_schema if own is not None else None
    inputs = _input_schemas(transform, views, planned)
    if checker is None:
        note = _NOT_VALIDATED
    elif inputs.unknown:
        note = f"query validated at run time: input {', '.join(inputs.unknown)} has no data schema yet"
    else:
        note = None
    if note is not None:
        if before is not None:
            step = replace(step, output_schema=OutputSchema(columns_of(before), None))
        return CheckedStep(_with_note(step, note))
    assert checker is not None
    try:
        checked = checker(
            DerivativeCheck(
                step.dataset, transform.transform, dict(inputs.schemas), Vocab.of(definition.get("SetVocab"))
            )
        )
    except InvalidQueryError as e:
        return CheckedStep(_refused(step, f"the query is invalid: {e}"))
    after, mode = checked.schema, checked.mode
    schema = OutputSchema(columns_of(before) if before is not None else None, columns_of(after))
    step = replace(step, output_schema=schema)
    if inputs.planned:
        step = _with_note(
            step,
            f"checked against the schema that input {', '.join(inputs.planned)} will have after its first "
            "run (its read schema and queries)",
        )
    if before is None:
        return CheckedStep(step, after, mode)
    verdict = evolution.schema_change(before, after, "the new query")
    if not verdict.allowed:
        return CheckedStep(_refused(step, *verdict.reasons))
    added = [f.name for f in after if f.name not in set(before.names)]
    if added:
        step = _with_note(
            step,
            f"the query adds column(s) {', '.join(added)}: run retracts every stored record and "
            "appends it again with the new column(s)",
        )
    return CheckedStep(step, after, mode)


def _input_schemas(
    transform: model.SetTransform, views: Mapping[str, ChainView], planned: Mapping[str, pa.Schema]
) -> _Inputs:
    by_id = {view.dataset_id: view for view in views.values()}
    schemas: dict[str, pa.Schema] = {}
    unknown: list[str] = []
    from_plan: list[str] = []
    for inp in transform.inputs:
        ref = inp.dataset_ref
        view = by_id.get(ref) if ref.startswith("did:") else views.get(ref.lower())
        schema = view.data_schema if view is not None else None
        if schema is None and not ref.startswith("did:"):
            schema = planned.get(ref.lower())
            if schema is not None:
                from_plan.append(ref)
        if schema is None:
            unknown.append(ref)
        else:
            schemas[inp.alias or ref] = schema
    return _Inputs(schemas, tuple(unknown), tuple(from_plan))


def _with_note(step: AppendDefinitions, note: str, key: str = "SetTransform") -> AppendDefinitions:
    changes = tuple(
        replace(c, notes=(*c.notes, note)) if c.key == key and c.event is not None else c
        for c in step.changes
    )
    return replace(step, changes=changes)


def _refused(step: AppendDefinitions, *reasons: str) -> AppendDefinitions:
    return replace(step, action=Action.REFUSED, reasons=(*step.reasons, *reasons))


def render_queries(snapshot: model.DatasetSnapshot) -> str:
    """Every query of the dataset as Spark will run it, each headed by a comment naming its engine.

    What ``odfproj render`` prints: the translation a reviewer should read before trusting a query
    written for another engine. Raises ``UntranslatableQueryError`` for a query that cannot run.
    """
    from odfproj.engine.dialects import is_spark, translated_queries

    blocks: list[str] = []
    for label, transform in sql_transforms(snapshot):
        steps = translated_queries(transform)
        engine = transform.engine.strip().lower()
        how = "runs as written" if is_spark(transform) else "translated to Spark SQL"
        for i, step in enumerate(steps, start=1):
            head = f"-- {snapshot.name}: {label}"
            if len(steps) > 1:
                head += f", step {i} of {len(steps)}" + (
                    f" (alias {step.alias})" if step.alias else " (output)"
                )
            blocks.append(f"{head}\n-- engine {engine}: {how}\n{step.spark.strip()}\n")
    if not blocks:
        return f"-- {snapshot.name}: no SQL queries\n"
    return "\n".join(blocks)
