"""Renderings of one ``Plan``: human text in terraform's idiom, versioned JSON, and markdown for PRs."""

from __future__ import annotations

import difflib
import re
from typing import Any

from odfproj.odf.yaml_codec import dump_yaml
from odfproj.plan.model import Action, AppendDefinitions, DataStep, Ingest, OutputSchema, Plan, TransformInput
from odfproj.plan.planfile import plan_to_json

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


def render_text(plan: Plan, *, show_unchanged: bool = False, data: bool = True) -> str:
    """The plan for a terminal; ``data`` adds the data steps ``run`` takes after applying."""
    lines: list[str] = []
    visible = [s for s in plan.definitions if show_unchanged or s.action is not Action.UNCHANGED]
    if not visible:
        lines.append("No changes. The workspace matches the manifests.")
    else:
        lines.append("odfproj will perform the following actions:")
    for step in sorted(visible, key=lambda s: _ORDER[s.action]):
        lines.append("")
        lines.extend(_step_text(step))
    if data and plan.data_steps:
        lines += ["", DATA_HEADING]
        for data_step in plan.data_steps:
            lines.extend(data_step_lines(data_step))
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    lines.append("")
    lines.append(plan.summary())
    return "\n".join(lines) + "\n"


#: Files of one ingest step listed in the text and markdown forms; the JSON form lists all of them.
FILES_SHOWN = 20

#: Heads the data steps in the text and markdown forms.
DATA_HEADING = "Data work `odfproj run` does after applying, in this order:"


#: A derivative's mode when the plan did not check its query on the engine (it starts no JVM for that).
MODE_UNKNOWN = "not known without the engine (the query was not checked in this plan); run decides it"


def data_step_lines(step: DataStep) -> list[str]:
    """One data step: a head line, then what it reads (``#``) and its warnings (``!``)."""
    if isinstance(step, Ingest):
        source = f" {step.source}" if step.source else ""
        lines = [f"  ingest {step.dataset}  ({step.fetch}{source})"]
        lines += [f"    # reads {name}" for name in step.files[:FILES_SHOWN]]
        if len(step.files) > FILES_SHOWN:
            lines.append(f"    # ... and {len(step.files) - FILES_SHOWN} more file(s) (all in --format json)")
        lines += [f"    # {note}" for note in step.notes]
        lines += [f"    ! warning: {warning}" for warning in step.warnings]
        return lines
    lines = [f"  transform {step.dataset}"]
    for inp in step.inputs:
        lines.append(f"    # input {inp.name}: {_input_status(inp)}")
    lines.append(f"    # mode: {step.mode or MODE_UNKNOWN}")
    return lines


def _input_status(inp: TransformInput) -> str:
    """The input's new data as the chains show it at planning (an ingest earlier in the run may add more)."""
    if inp.dataset_id is None:
        return "not in the workspace yet; read once it exists and has data"
    if inp.last_offset is None:
        return "no data yet"
    if inp.new_records > 0:
        first = inp.consumed + 1 if inp.consumed is not None else 0
        return f"{inp.new_records} new record(s) (offsets {first}..{inp.last_offset})"
    return "no new data yet"


def _step_text(step: AppendDefinitions) -> list[str]:
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
    if step.output_schema is not None:
        lines.extend(_schema_lines(step.output_schema))
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


#: ANSI colours of a plan's marker lines on a terminal: create green, update yellow, refuse red.
_COLOURS = {"+": "32", "~": "33", "!": "31", "-": "31"}


def colourize(text: str) -> str:
    """``render_text`` output with each dataset's and change's line coloured by its marker."""
    out = []
    for line in text.split("\n"):
        marker = line.lstrip()[:2]
        if len(marker) == 2 and marker[1] == " " and marker[0] in _COLOURS:
            line = f"\x1b[{_COLOURS[marker[0]]}m{line}\x1b[0m"
        out.append(line)
    return "\n".join(out)


def _schema_lines(schema: OutputSchema) -> list[str]:
    """The output columns; against stored ones, removed or retyped columns as '-', new ones as '+'."""
    if schema.after is None:
        if schema.before is None:
            return []
        return ["    # output schema (stored; the new query is not validated):"] + [
            f"        {column}" for column in schema.before
        ]
    lines = ["    # output schema (as the engine reports it for the new query):"]
    if schema.before is None:
        return lines + [f"        {column}" for column in schema.after]
    before, after = set(schema.before), set(schema.after)
    lines += [f"        {c}" if c in after else f"      - {c}" for c in schema.before]
    lines += [f"      + {c}" for c in schema.after if c not in before]
    return lines


def render_json(plan: Plan) -> str:
    return plan_to_json(plan)


def render_markdown(plan: Plan, *, show_unchanged: bool = False) -> str:
    """A pull-request comment: refusals first, the summary, a table, then collapsible per-dataset diffs.

    GitHub renders ``<details>`` and ```` ```diff ```` blocks, so a reviewer sees the whole plan at a
    glance and opens only the datasets they care about.
    """
    lines = [f"### odfproj plan: {_md_code(plan.project)}", "", f"**{plan.summary()}**", ""]
    refused = [s for s in plan.definitions if s.action is Action.REFUSED]
    if refused:
        lines += [
            "> [!CAUTION]",
            f"> **{len(refused)} change(s) refused**; apply will not run until the manifests are fixed:",
        ]
        for step in refused:
            for reason in step.reasons:
                lines.append(f"> - `{step.dataset}` ({_md_code(step.manifest)}): {_md_escape(reason)}")
        lines.append("")
    visible = [s for s in plan.definitions if show_unchanged or s.action is not Action.UNCHANGED]
    visible.sort(key=lambda s: _ORDER[s.action])
    if not visible:
        lines.append("No changes. The workspace matches the manifests.")
    else:
        lines += ["| | dataset | action | manifest | events |", "|---|---|---|---|---|"]
        for step in visible:
            events = ", ".join(c.kind for c in step.changes if c.event is not None) or "-"
            lines.append(
                f"| `{step.action.symbol.strip() or '='}` | `{step.dataset}` | {step.action.value} "
                f"| {_md_code(step.manifest, in_table=True)} | {events} |"
            )
        lines.append("")
        for step in visible:
            body = [_diff_line(line) for line in _step_text(step)[1:]]
            if not body:
                continue
            fence = _fence(body)
            lines += [
                f"<details><summary><code>{step.action.symbol} {step.dataset}</code> "
                f"({step.action.value})</summary>",
                "",
                f"{fence}diff",
                *body,
                fence,
                "</details>",
                "",
            ]
    if plan.data_steps:
        body = [line for step in plan.data_steps for line in data_step_lines(step)]
        fence = _fence(body)
        lines += [f"<details><summary>{_md_escape(DATA_HEADING)}</summary>", "", f"{fence}text", *body, fence]
        lines += ["</details>", ""]
    warnings = [*plan.warnings, *(w for s in plan.data_steps if isinstance(s, Ingest) for w in s.warnings)]
    for warning in warnings:
        lines.append(f"> [!WARNING]\n> {_md_escape(warning)}\n")
    return "\n".join(lines).rstrip() + "\n"


def _diff_line(line: str) -> str:
    """``_step_text`` lines with their +/-/~ marker moved to column 0, where ```diff colours it."""
    stripped = line.lstrip()
    if stripped[:2] in ("+ ", "- "):
        return stripped[0] + " " + line.replace(stripped[:2], "  ", 1)[1:]
    return "  " + line


def _md_code(text: str | None, *, in_table: bool = False) -> str:
    """``text`` as one inline code span, whatever it holds: file names come from pull requests.

    The span's fence is longer than any run of backticks inside (CommonMark), line breaks are shown
    as ``\\n`` so a name cannot start a new line of markdown, and in a table ``|`` is escaped.
    """
    if not text:
        return "-"
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fence(lines: list[str]) -> str:
    """A code fence no line of the block can close: longer than any run of backticks in it."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
