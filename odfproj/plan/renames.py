"""Plan the declared renames (odfproj.yaml's ``moved:``) against the workspace: one rule per outcome.

For each entry ``a -> b``, by what the workspace holds:

- ``a`` exists, ``b`` does not: a ``RenameDataset`` step, and the planner sees ``a``'s chain under the
  name ``b`` from then on (so ``b``'s manifest is diffed against it: an unchanged manifest plans
  unchanged, an incompatible one is refused by the usual evolution rules);
- ``b`` exists, ``a`` does not: already applied; no step (an applied entry is harmless to keep);
- both exist: refused (the target is taken);
- neither exists: refused when the workspace holds any dataset (the ``from`` names nothing: a typo
  would otherwise create ``b`` anew, with a new id); ignored in an empty workspace, where ``b`` is
  simply created;
- a manifest still defines ``a``, or none defines ``b``: refused (the rename would be undone, or
  leave a dataset without a manifest).

Reads only, like the rest of the planner.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odfproj.plan.diff import ChainView
from odfproj.plan.model import RenameDataset
from odfproj.project.config import CONFIG_FILE
from odfproj.project.moves import Move

__all__ = ["PlannedRenames", "plan_renames"]


@dataclass(frozen=True)
class PlannedRenames:
    """The rename steps, and the chains as the rest of the plan must see them (after the renames)."""

    steps: tuple[RenameDataset, ...]
    views: Mapping[str, ChainView]

    def renamed_to(self, name: str) -> str | None:
        """The new name of a dataset this plan renames (refused or not), or None."""
        return next((s.dataset for s in self.steps if s.source.lower() == name.lower()), None)


def plan_renames(
    moves: Sequence[Move],
    views: Mapping[str, ChainView],
    names: Mapping[str, str],
    manifests: Mapping[str, str],
    *,
    workspace_empty: bool,
    remote: str | None = None,
) -> PlannedRenames:
    """``views`` keyed by lower-case name, ``names`` the workspace's spelling of each (lower-case key),
    ``manifests`` each defined dataset's manifest path (lower-case key). ``remote`` is the URL of a
    remote workspace: renames there are refused (its objects live under each dataset's name)."""
    steps: list[RenameDataset] = []
    after = dict(views)
    for move in moves:
        source, target = move.source.lower(), move.target.lower()
        view, taken = views.get(source), views.get(target)
        if view is None and (taken is not None or workspace_empty):
            continue  # applied already, or a new workspace: nothing was ever named `source` here
        reasons = _refusals(move, view, taken, names, manifests, remote)
        steps.append(
            RenameDataset(
                source=names.get(source, move.source),
                dataset=move.target,
                declared_in=CONFIG_FILE,
                manifest=manifests.get(target),
                dataset_id=view.dataset_id if view else None,
                expected_head=view.head if view else None,
                reasons=reasons,
            )
        )
        if view is not None and not reasons:
            after[target] = after.pop(source)
    return PlannedRenames(tuple(steps), after)


def _refusals(
    move: Move,
    view: ChainView | None,
    taken: ChainView | None,
    names: Mapping[str, str],
    manifests: Mapping[str, str],
    remote: str | None,
) -> tuple[str, ...]:
    where = f"{CONFIG_FILE}: moved {move}"
    if view is None:
        close = difflib.get_close_matches(move.source.lower(), list(names), n=1, cutoff=0.75)
        hint = f" (did you mean {names[close[0]]}?)" if close else ""
        return (f"{where}: no dataset {move.source} in the workspace{hint}: fix 'from', or remove the entry",)
    reasons = []
    if taken is not None:
        reasons.append(f"{where}: {move.target} already exists in the workspace ({taken.dataset_id})")
    if move.source.lower() in manifests:
        reasons.append(
            f"{where}: {manifests[move.source.lower()]} still defines {move.source}: "
            f"rename its name to {move.target}"
        )
    if move.target.lower() not in manifests:
        reasons.append(f"{where}: no manifest defines {move.target}")
    if remote is not None:
        reasons.append(f"{where}: renames in a remote workspace ({remote}) are not supported yet")
    return tuple(reasons)
