"""Renderings of one ``Plan``: human text in terraform's idiom, and versioned JSON."""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict
from typing import Any

from odfproj.odf.yaml_codec import dump_yaml
from odfproj.plan.model import Action, Plan, PlanStep

_ORDER = {
    Action.REFUSED: 0,
    Action.CREATE: 1,
    Action.UPDATE: 2,
    Action.DRIFT: 3,
    Action.ORPHAN: 4,
    Action.UNCHANGED: 5,
}


def _yaml_lines(data: dict[str, Any] | None) -> list[str]:
    return dump_yaml(data).splitlines() if data is not None else []


def field_diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """A field-level YAML diff: changed lines only, each with '-' or '+', and '  ' for context."""
    old, new = _yaml_lines(before), _yaml_lines(after)
    if not old:
        return [f"+ {line}" for line in new]
    if not new:
        return [f"- {line}" for line in old]
    out = []
    for line in difflib.unified_diff(old, new, lineterm="", n=1):
        if line.startswith(("---", "+++", "@@")):
            continue
        out.append(f"{line[0]} {line[1:]}" if line[:1] in "+-" else f"  {line[1:]}")
    return out


def render_text(plan: Plan, *, show_unchanged: bool = False) -> str:
    lines: list[str] = []
    visible = [s for s in plan.steps if show_unchanged or s.action is not Action.UNCHANGED]
    if not visible:
        lines.append("No changes. The workspace matches the manifests.")
    else:
        lines.append("odfproj will perform the following actions:")
    for step in sorted(visible, key=lambda s: _ORDER[s.action]):
        lines.append("")
        lines.extend(_step_text(step))
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    lines.append("")
    lines.append(plan.summary())
    return "\n".join(lines) + "\n"


def _step_text(step: PlanStep) -> list[str]:
    where = f"  ({step.manifest})" if step.manifest else ""
    kind = f" [{step.kind}]" if step.kind else ""
    head = f"{step.action.symbol} {step.dataset}{kind}{where}"
    label = {
        Action.DRIFT: "  # drift: the chain was changed outside this project",
        Action.REFUSED: "  # refused",
    }
    lines = [head + label.get(step.action, "")]
    for reason in step.reasons:
        lines.append(f"    {'!' if step.action is Action.REFUSED else '#'} {reason}")
    for pending in step.pending_inputs:
        lines.append(f"    # input '{pending}' is created by this apply; its id is known after apply")
    if step.action in (Action.CREATE, Action.UPDATE, Action.DRIFT):
        if step.action is Action.CREATE:
            lines.append("    + Seed (a new dataset id and key)")
        for change in step.changes:
            marker = "+" if change.before is None else ("-" if change.after is None else "~")
            lines.append(f"    {marker} {change.kind}")
            for note in change.notes:
                lines.append(f"        # {note}")
            lines.extend(f"        {line}" for line in field_diff(change.before, change.after))
    return lines


def plan_to_json(plan: Plan) -> dict[str, Any]:
    data = asdict(plan)
    data["counts"] = {a.value: plan.count(a) for a in Action}
    data["summary"] = plan.summary()
    for step in data["steps"]:
        step["action"] = step["action"].value
    return data


def render_json(plan: Plan) -> str:
    return json.dumps(plan_to_json(plan), indent=2, sort_keys=False) + "\n"
