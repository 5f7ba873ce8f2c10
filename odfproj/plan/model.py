"""The plan: one immutable list of typed steps that the renderers explain and ``apply``/``run`` execute.

A plan holds every piece of work a run does, in the order it is done: first one
:class:`AppendDefinitions` per dataset (what ``apply`` writes), then one :class:`Ingest` per root with a
polling source and one :class:`Transform` per derivative, inputs before their readers (what ``run`` adds).
Renderers, apply and run walk this same list, so what a reviewer reads in a pull request can never
drift from what runs on merge (the idea of SQLMesh's plan stages and terraform's plan views).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

#: Bumped whenever the JSON form of a plan changes incompatibly; see schemas/plan.schema.json.
PLAN_FORMAT_VERSION = 2


class Action(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    DRIFT = "drift"
    ORPHAN = "orphan"
    REFUSED = "refused"

    @property
    def symbol(self) -> str:
        return {"create": "+", "update": "~", "unchanged": " ", "drift": "~", "orphan": "?", "refused": "!"}[
            self.value
        ]


@dataclass(frozen=True)
class EventChange:
    """One definition event the step appends, with the value it replaces (None when there was none)."""

    key: str
    kind: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    #: The event to append, as plain ODF data (``yaml_codec.to_data``); None for unresolved inputs.
    event: dict[str, Any] | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class OutputSchema:
    """A derivative's columns (``name type``, system columns left out) before and after its query change.

    ``before`` is None while the dataset has no data; ``after`` is None when the new query was not
    validated (the notes of its SetTransform change say why).
    """

    before: tuple[str, ...] | None
    after: tuple[str, ...] | None


@dataclass(frozen=True)
class AppendDefinitions:
    """The definition events ``apply`` appends to one dataset (or why it appends none)."""

    dataset: str
    action: Action
    manifest: str | None
    kind: str | None
    changes: tuple[EventChange, ...] = ()
    reasons: tuple[str, ...] = ()
    #: Head of the chain the step was planned against; apply refuses the step when it has moved.
    expected_head: str | None = None
    #: Inputs not yet in the workspace: their ids are known only after apply creates them.
    pending_inputs: tuple[str, ...] = ()
    #: For a created or changed query: the output schema the engine reported (Query Evolution).
    output_schema: OutputSchema | None = None

    @property
    def has_changes(self) -> bool:
        return self.action in (Action.CREATE, Action.UPDATE, Action.DRIFT)


#: The former name of :class:`AppendDefinitions`, kept for code written before data steps existed.
PlanStep = AppendDefinitions


@dataclass(frozen=True)
class Ingest:
    """``run`` polls a root's source, judged from its definition alone: nothing is fetched to plan it.

    ``files`` are the files a ``FilesGlob`` source will read, in ingestion order (project-relative, only
    those inside the project folder; a URL or container source lists none: what it returns is known
    only by asking it). ``warnings`` name the files the source will never ingest, and why.
    """

    dataset: str
    manifest: str | None
    #: The fetch step's kind: ``Url``, ``FilesGlob``, ``Container``, ...
    fetch: str
    #: What the fetch step names, as the manifest writes it (URL, glob pattern, container image).
    source: str
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TransformInput:
    """One input of a derivative, as the plan knows it from the chains' metadata.

    ``last_offset`` is the input's last data offset (None: no data yet, or the input does not exist
    yet); ``consumed`` the last offset the derivative has read (None: none yet).
    """

    name: str
    dataset_id: str | None
    last_offset: int | None
    consumed: int | None

    @property
    def new_records(self) -> int:
        """Records of the input the derivative has not read yet (0 when it has no data)."""
        if self.last_offset is None:
            return 0
        return self.last_offset - (self.consumed if self.consumed is not None else -1)


@dataclass(frozen=True)
class Transform:
    """``run`` updates a derivative from its inputs' new data (it commits nothing when there is none)."""

    dataset: str
    manifest: str | None
    inputs: tuple[TransformInput, ...] = ()
    #: The query's execution mode (``stateless``, ``grouped``, ``join``, ``full: <construct>``), known
    #: when this plan checked the query on the engine; None otherwise (run decides it from the query).
    mode: str | None = None

    @property
    def has_new_data(self) -> bool:
        return any(i.new_records > 0 for i in self.inputs)


#: Data work ``run`` does after ``apply``.
DataStep = Ingest | Transform
#: Any step of a plan.
Step = AppendDefinitions | Ingest | Transform


@dataclass(frozen=True)
class Plan:
    project: str
    workspace: str
    #: Every step, in the order apply and run execute them: definitions first, then data steps.
    steps: tuple[Step, ...]
    warnings: tuple[str, ...] = ()
    created_at: str = ""
    format_version: int = PLAN_FORMAT_VERSION

    @property
    def definitions(self) -> tuple[AppendDefinitions, ...]:
        """The steps ``apply`` walks: one per dataset, manifests in topological order, then orphans."""
        return tuple(s for s in self.steps if isinstance(s, AppendDefinitions))

    @property
    def data_steps(self) -> tuple[DataStep, ...]:
        """The steps ``run`` walks after apply, inputs before the derivatives that read them."""
        return tuple(s for s in self.steps if isinstance(s, Ingest | Transform))

    def count(self, action: Action) -> int:
        return sum(1 for s in self.definitions if s.action is action)

    @property
    def has_changes(self) -> bool:
        return any(s.has_changes for s in self.definitions)

    @property
    def has_orphans(self) -> bool:
        """A dataset of the workspace lost its manifest: nothing is deleted, but the reviewer must know."""
        return any(s.action is Action.ORPHAN for s in self.definitions)

    @property
    def has_refusals(self) -> bool:
        return any(s.action is Action.REFUSED for s in self.definitions)

    def summary(self) -> str:
        return (
            f"Plan: {self.count(Action.CREATE)} to create, "
            f"{self.count(Action.UPDATE) + self.count(Action.DRIFT)} to update, "
            f"{self.count(Action.UNCHANGED)} unchanged, {self.count(Action.REFUSED)} refused"
            + (f", {self.count(Action.ORPHAN)} without a manifest." if self.has_orphans else ".")
        )
