"""The plan: one immutable list of typed steps that the renderers explain and ``apply``/``run`` execute.

A plan holds every piece of work a run does, in the order it is done: first one :class:`RenameDataset`
per declared rename, then one :class:`AppendDefinitions` per dataset (what ``apply`` writes), then one
:class:`Ingest` per root with a polling source and one :class:`Transform` per derivative, inputs before their
readers (what ``run`` adds).
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
class InputName:
    """An input id a step's changes mention, and the dataset's name: plans show inputs by name."""

    dataset_id: str
    name: str


#: Definition events whose change makes ``run`` recompute the dataset's whole state from its inputs
#: (docs/design/transforms.md: a changed query is recomputed even without new input data). A changed
#: source, vocabulary, info, license or attachment applies from now on and recomputes nothing.
RECOMPUTING_EVENTS = frozenset({"SetTransform"})


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
    #: The dataset names of the input ids its changes mention (the events keep the ids).
    input_names: tuple[InputName, ...] = ()
    #: When the change makes run recompute this dataset: the datasets downstream of it that run
    #: recomputes after it (those with a transform step in this plan), in plan order.
    downstream: tuple[str, ...] = ()

    @property
    def has_changes(self) -> bool:
        return self.action in (Action.CREATE, Action.UPDATE, Action.DRIFT)

    @property
    def recomputes(self) -> bool:
        """Run recomputes this existing dataset's state because of the change (not only new data)."""
        return self.action in (Action.UPDATE, Action.DRIFT) and any(
            c.kind in RECOMPUTING_EVENTS and c.event is not None for c in self.changes
        )


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
class LastRun:
    """How the last run that updated a derivative with its current query computed it, as that run
    recorded it in the dataset's ``info/`` (:mod:`odfproj.storage.update_record`)."""

    #: The query's mode as that run found it (``grouped``, ``full: window function``).
    mode: str
    #: The path that update took (``stateless``, ``grouped``, ``grouped over a join``, ``join``, ``full``).
    path: str
    #: Why it took the full path (``""`` for another).
    why_full: str = ""


@dataclass(frozen=True)
class Transform:
    """``run`` updates a derivative from its inputs' new data (it commits nothing when there is none)."""

    dataset: str
    manifest: str | None
    inputs: tuple[TransformInput, ...] = ()
    #: The query's execution mode (``stateless``, ``grouped``, ``join``, ``full: <construct>``), known
    #: when this plan checked the query on the engine; None otherwise (run decides it from the query).
    mode: str | None = None
    #: For a query this plan does not change: how its last run computed it (read from the workspace,
    #: without the engine); None when no run recorded it.
    last_run: LastRun | None = None
    #: For a ``full`` query: the small rewrite that would make it incremental (from this plan's check,
    #: else from the last run), or None.
    hint: str | None = None

    @property
    def has_new_data(self) -> bool:
        return any(i.new_records > 0 for i in self.inputs)


@dataclass(frozen=True)
class RenameDataset:
    """``apply`` renames a dataset of the workspace, as odfproj.yaml's ``moved:`` list declares.

    The dataset keeps its ``did:odf``, chain, data, key and caches: nothing is recomputed, and the
    derivatives reading it (by id in their chains) are unaffected. Renames come first in a plan, so
    the ``AppendDefinitions`` step of ``dataset`` (the new name) is planned against the renamed chain.
    A refused rename has ``reasons``, and the whole plan is refused with it.
    """

    #: The dataset's name in the workspace now.
    source: str
    #: Its new name, as its manifest spells it.
    dataset: str
    #: Where the rename is declared (``odfproj.yaml``) and the manifest of the new name.
    declared_in: str
    manifest: str | None
    dataset_id: str | None
    #: Head of the chain the rename was planned against; apply refuses it when it has moved.
    expected_head: str | None
    reasons: tuple[str, ...] = ()

    @property
    def refused(self) -> bool:
        return bool(self.reasons)


#: Data work ``run`` does after ``apply``.
DataStep = Ingest | Transform
#: Any step of a plan.
Step = RenameDataset | AppendDefinitions | Ingest | Transform


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
    def renames(self) -> tuple[RenameDataset, ...]:
        """The renames ``apply`` makes before it appends any definition (``moved:`` in odfproj.yaml)."""
        return tuple(s for s in self.steps if isinstance(s, RenameDataset))

    @property
    def data_steps(self) -> tuple[DataStep, ...]:
        """The steps ``run`` walks after apply, inputs before the derivatives that read them."""
        return tuple(s for s in self.steps if isinstance(s, Ingest | Transform))

    def count(self, action: Action) -> int:
        return sum(1 for s in self.definitions if s.action is action)

    @property
    def has_changes(self) -> bool:
        """Whether ``apply`` writes anything: a rename or definition events (orphans: see ``needs_action``)."""
        return any(not r.refused for r in self.renames) or any(s.has_changes for s in self.definitions)

    @property
    def needs_action(self) -> bool:
        """What a reviewer must act on: the changes apply makes, and orphans (which only ``odfproj
        destroy`` removes, or a restored manifest keeps). ``plan --detailed-exitcode`` exits 2 on it."""
        return self.has_changes or self.has_orphans

    @property
    def has_orphans(self) -> bool:
        """A dataset of the workspace lost its manifest: nothing is deleted, but the reviewer must know."""
        return any(s.action is Action.ORPHAN for s in self.definitions)

    @property
    def has_refusals(self) -> bool:
        return any(r.refused for r in self.renames) or any(
            s.action is Action.REFUSED for s in self.definitions
        )

    def summary(self) -> str:
        """Counts of what the reviewer acts on; renames and orphans appear only when there are some."""
        renames = sum(1 for r in self.renames if not r.refused)
        refused = self.count(Action.REFUSED) + sum(1 for r in self.renames if r.refused)
        orphans = self.count(Action.ORPHAN)
        return (
            f"Plan: {self.count(Action.CREATE)} to create, "
            f"{self.count(Action.UPDATE) + self.count(Action.DRIFT)} to update, "
            + (f"{renames} to rename, " if renames else "")
            + f"{self.count(Action.UNCHANGED)} unchanged, {refused} refused"
            + (f", {orphans} without a manifest (to destroy: odfproj destroy --orphans)." if orphans else ".")
        )
