"""The plan: one immutable list of steps that the renderers explain and ``apply`` executes.

Renderers and apply walk the same ``Plan`` object, so what a reviewer reads in a pull request can never
drift from what runs on merge (the idea of SQLMesh's plan stages and terraform's plan views).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

#: Bumped whenever the JSON form of a plan changes incompatibly; see schemas/plan.schema.json.
PLAN_FORMAT_VERSION = 1


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
class PlanStep:
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
    data_work: tuple[str, ...] = ()
    #: For a created or changed query: the output schema the engine reported (Query Evolution).
    output_schema: OutputSchema | None = None

    @property
    def has_changes(self) -> bool:
        return self.action in (Action.CREATE, Action.UPDATE, Action.DRIFT)


@dataclass(frozen=True)
class Plan:
    project: str
    workspace: str
    steps: tuple[PlanStep, ...]
    warnings: tuple[str, ...] = ()
    created_at: str = ""
    format_version: int = PLAN_FORMAT_VERSION

    def count(self, action: Action) -> int:
        return sum(1 for s in self.steps if s.action is action)

    @property
    def has_changes(self) -> bool:
        return any(s.has_changes for s in self.steps)

    @property
    def has_orphans(self) -> bool:
        """A dataset of the workspace lost its manifest: nothing is deleted, but the reviewer must know."""
        return any(s.action is Action.ORPHAN for s in self.steps)

    @property
    def has_refusals(self) -> bool:
        return any(s.action is Action.REFUSED for s in self.steps)

    def summary(self) -> str:
        return (
            f"Plan: {self.count(Action.CREATE)} to create, "
            f"{self.count(Action.UPDATE) + self.count(Action.DRIFT)} to update, "
            f"{self.count(Action.UNCHANGED)} unchanged, {self.count(Action.REFUSED)} refused"
            + (f", {self.count(Action.ORPHAN)} without a manifest." if self.has_orphans else ".")
        )
