"""Renderings of one ``Plan``: human text in terraform's idiom, versioned JSON, and markdown for PRs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from odfproj.plan.event_diff import change_lines
from odfproj.plan.model import (
    Action,
    AppendDefinitions,
    DataStep,
    Ingest,
    OutputSchema,
    Plan,
    RenameDataset,
    Transform,
    TransformInput,
)
from odfproj.plan.planfile import plan_to_json

_ORDER = {
    Action.REFUSED: 0,
    Action.CREATE: 1,
    Action.UPDATE: 2,
    Action.DRIFT: 3,
    Action.ORPHAN: 4,
    Action.UNCHANGED: 5,
}


def render_text(plan: Plan, *, show_unchanged: bool = False, data: bool = True) -> str:
    """The plan for a terminal; ``data`` adds the data steps ``run`` takes after applying."""
    lines: list[str] = []
    visible = [s for s in plan.definitions if show_unchanged or s.action is not Action.UNCHANGED]
    if not visible and not plan.renames:
        lines.append("No changes. The workspace matches the manifests.")
    else:
        lines.append("odfproj will perform the following actions:")
    for rename in plan.renames:
        lines.append("")
        lines.extend(rename_lines(rename))
    labels = step_labels(plan)
    for step in sorted(visible, key=lambda s: _ORDER[s.action]):
        lines.append("")
        lines.extend(_step_text(step, labels.names))
    if data and plan.data_steps:
        lines += ["", DATA_HEADING]
        for data_step in plan.data_steps:
            lines.extend(data_step_lines(data_step, labels))
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    lines.append("")
    lines.append(plan.summary())
    return "\n".join(lines) + "\n"


#: Files of one ingest step listed in the text and markdown forms; the JSON form lists all of them.
FILES_SHOWN = 20

#: Heads the data steps in the text and markdown forms.
DATA_HEADING = "Data work `odfproj run` does after applying, in this order:"


#: A derivative's mode when the plan did not check its query on the engine (it starts no JVM for that)
#: and no run recorded it for its current query.
MODE_UNKNOWN = "not known without the engine (the query was not checked in this plan); run decides it"
#: Marks a mode read from the last run's record, not checked by this plan.
LAST_RUN = "(last run)"


def dataset_names(plan: Plan) -> dict[str, str]:
    """``did:odf`` -> dataset name for every input id the plan knows a name of: inputs are shown by name."""
    names: dict[str, str] = {}
    for step in plan.steps:
        if isinstance(step, AppendDefinitions):
            names.update((n.dataset_id, n.name) for n in step.input_names)
        elif isinstance(step, Transform):
            names.update(
                (i.dataset_id, i.name) for i in step.inputs if i.dataset_id and not i.name.startswith("did:")
            )
    return names


@dataclass(frozen=True)
class StepLabels:
    """What the renderers add to a step from the rest of the plan."""

    #: ``did:odf`` -> dataset name (``dataset_names``).
    names: Mapping[str, str]
    #: Datasets whose changed query makes run recompute them (lower-case).
    recomputed: frozenset[str]


def step_labels(plan: Plan) -> StepLabels:
    recomputed = frozenset(s.dataset.lower() for s in plan.definitions if s.recomputes)
    return StepLabels(dataset_names(plan), recomputed)


def data_step_lines(step: DataStep, labels: StepLabels | None = None) -> list[str]:
    """One data step: a head line, then what it reads (``#``) and its warnings (``!``)."""
    names = labels.names if labels is not None else {}
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
    if labels is not None and step.dataset.lower() in labels.recomputed:
        lines.append("    # recomputes its whole state: its query changed")
    for inp in step.inputs:
        lines.append(f"    # input {names.get(inp.name, inp.name)}: {_input_status(inp)}")
    lines.append(f"    # mode: {mode_text(step)}")
    if step.hint:
        lines.append(f"    # hint: {step.hint}")
    return lines


def mode_text(step: Transform) -> str:
    """The ``# mode:`` of a transform step: checked in this plan, else as its last run found it
    (``grouped (last run)``), else not known without the engine."""
    if step.mode:
        return step.mode
    if step.last_run is not None:
        return f"{step.last_run.mode} {LAST_RUN}"
    return MODE_UNKNOWN


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


def rename_lines(step: RenameDataset) -> list[str]:
    """A declared rename: ``~ old -> new``, or ``!`` with its reasons when refused."""
    where = f"  ({step.declared_in}" + (f", {step.manifest})" if step.manifest else ")")
    if step.refused:
        return [f"! {step.source} -> {step.dataset}{where}  # rename refused"] + [
            f"    ! {reason}" for reason in step.reasons
        ]
    return [
        f"~ {step.source} -> {step.dataset}{where}  # rename",
        f"    # keeps its id {step.dataset_id}, chain, data and key: nothing is recomputed",
    ]


def _step_text(step: AppendDefinitions, names: Mapping[str, str]) -> list[str]:
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
    if step.recomputes:
        lines.append(f"    # {impact(step)}")
    if step.output_schema is not None:
        lines.extend(_schema_lines(step.output_schema))
    if step.action in (Action.CREATE, Action.UPDATE, Action.DRIFT):
        if step.action is Action.CREATE:
            lines.append("    + Seed (a new dataset id and key)")
        for change in step.changes:
            lines.extend(f"    {line}" for line in change_lines(change, names))
            lines.extend(f"        # {note}" for note in change.notes)
    return lines


#: Downstream datasets a text or markdown plan names before "and N more" (the JSON form lists all).
DOWNSTREAM_NAMED = 5


def impact(step: AppendDefinitions) -> str:
    """What run recomputes because of the step: the dataset itself and ``N downstream datasets``."""
    count = len(step.downstream)
    if not count:
        return "run recomputes this dataset from its inputs; no downstream dataset will be recomputed"
    named = ", ".join(step.downstream[:DOWNSTREAM_NAMED])
    more = f" and {count - DOWNSTREAM_NAMED} more" if count > DOWNSTREAM_NAMED else ""
    plural = "s" if count != 1 else ""
    return (
        f"run recomputes this dataset from its inputs; {count} downstream dataset{plural} "
        f"will be recomputed ({named}{more})"
    )


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


#: GitHub refuses a comment longer than this many characters.
GITHUB_COMMENT_LIMIT = 65_536
#: Datasets the markdown form details in full (each a collapsible diff); the table names the rest.
MARKDOWN_DETAILED = 30
#: Rows of the markdown form's table; past them it counts the datasets left out, per action.
MARKDOWN_TABLE_ROWS = 250
#: Data steps the markdown form lists; past them it says how many more run takes.
MARKDOWN_DATA_STEPS = 100
#: Warnings the markdown form shows; past them it says how many more there are.
MARKDOWN_WARNINGS = 20
#: Characters kept free for the lines that say what was left out.
_NOTES_RESERVE = 1_500


def render_markdown(plan: Plan, *, show_unchanged: bool = False, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """A pull-request comment: refusals first, the summary, a table, then collapsible per-dataset diffs.

    GitHub renders ``<details>`` and ```` ```diff ```` blocks, so a reviewer sees the whole plan at a
    glance and opens only the datasets they care about. The comment stays under ``limit`` characters
    (GitHub's comment limit) however large the plan: past fixed thresholds, and whenever the next piece
    would not fit, it summarises (the first datasets in full, a table of the next, then counts) and says
    what it left out. Pieces are whole lines and whole code blocks, never cut; every refused dataset is
    named (by name only once the reasons would not fit).
    """
    labels = step_labels(plan)
    page = _Page(limit - _NOTES_RESERVE)
    tail = _warnings_md(plan)
    page.reserve(tail)
    page.add([f"### odfproj plan: {_md_code(plan.project)}", "", f"**{plan.summary()}**", ""])
    page.add(_refusals_md([s for s in plan.definitions if s.action is Action.REFUSED], plan.renames, page))
    visible = [s for s in plan.definitions if show_unchanged or s.action is not Action.UNCHANGED]
    visible.sort(key=lambda s: _ORDER[s.action])
    if not visible and not plan.renames:
        page.add(["No changes. The workspace matches the manifests.", ""])
    else:
        _table_md(visible, plan, show_unchanged, page)
        _details_md(visible, labels.names, page)
    if plan.data_steps:
        _data_md(plan.data_steps, labels, page)
    page.release(tail)
    page.add(tail)
    return "\n".join(page.lines).rstrip() + "\n"


class _Page:
    """Markdown lines under a character budget: a piece is added whole or not at all."""

    def __init__(self, budget: int) -> None:
        self.lines: list[str] = []
        self.left = budget

    @staticmethod
    def size(lines: list[str]) -> int:
        return sum(len(line) + 1 for line in lines)

    def fits(self, lines: list[str]) -> bool:
        return self.size(lines) <= self.left

    def add(self, lines: list[str], *, force: bool = False) -> bool:
        """Append ``lines`` if they fit (``force``: a short note on the reserve); False if left out."""
        if not force and not self.fits(lines):
            return False
        self.lines.extend(lines)
        self.left -= self.size(lines)
        return True

    def reserve(self, lines: list[str]) -> None:
        self.left -= self.size(lines)

    def release(self, lines: list[str]) -> None:
        self.left += self.size(lines)


def _refusals_md(
    refused: list[AppendDefinitions], renames: tuple[RenameDataset, ...], page: _Page
) -> list[str]:
    """Every refused rename and dataset with its reasons; datasets by name only when the reasons would
    take half the page (refused renames are few: one per declared ``moved`` entry at most)."""
    refused_renames = [r for r in renames if r.refused]
    if not refused and not refused_renames:
        return []
    lines = [
        "> [!CAUTION]",
        f"> **{len(refused) + len(refused_renames)} change(s) refused**; apply will not run until the "
        "manifests are fixed:",
    ]
    lines += [
        f"> - {_md_code(f'{r.source} -> {r.dataset}')}: {_md_escape(_one_line(reason))}"
        for r in refused_renames
        for reason in r.reasons
    ]
    full = [
        f"> - `{s.dataset}` ({_md_code(s.manifest)}): {_md_escape(_one_line(reason))}"
        for s in refused
        for reason in s.reasons or ("refused",)  # named even when no reason was given
    ]
    if _Page.size(full) <= page.left // 2:
        return [*lines, *full, ""]
    lines[-1] += " (reasons in `odfproj plan`; too many to list here)"
    budget = page.left - _Page.size(lines) - 200
    for index, step in enumerate(refused):
        line = f"> - `{step.dataset}` ({_md_code(step.manifest)})"
        if len(line) + 1 > budget:
            lines.append(f"> - ... and {len(refused) - index} more refused dataset(s)")
            break
        lines.append(line)
        budget -= len(line) + 1
    return [*lines, ""]


def _table_md(visible: list[AppendDefinitions], plan: Plan, show_unchanged: bool, page: _Page) -> None:
    rows = ["| | dataset | action | manifest | events | downstream |", "|---|---|---|---|---|---|"]
    page.add(rows, force=True)
    for rename in plan.renames:
        page.add(
            [
                f"| `{'!' if rename.refused else '~'}` | {_md_code(f'{rename.source} -> {rename.dataset}')} "
                f"| {'rename refused' if rename.refused else 'rename'} "
                f"| {_md_code(rename.declared_in, in_table=True)} | - | - |"
            ]
        )
    shown = 0
    for step in visible[:MARKDOWN_TABLE_ROWS]:
        events = ", ".join(c.kind for c in step.changes if c.event is not None) or "-"
        downstream = str(len(step.downstream)) if step.recomputes else "-"
        row = (
            f"| `{step.action.symbol.strip() or '='}` | `{step.dataset}` | {step.action.value} "
            f"| {_md_code(step.manifest, in_table=True)} | {events} | {downstream} |"
        )
        if not page.add([row]):
            break
        shown += 1
    notes = [""]
    left_out = visible[shown:]
    if left_out:
        counts = ", ".join(
            f"{sum(1 for s in left_out if s.action is a)} {a.value}"
            for a in _ORDER
            if any(s.action is a for s in left_out)
        )
        notes += [
            f"... and {len(left_out)} more dataset(s) ({counts}) not listed, to keep this comment under "
            "GitHub's size limit; `odfproj plan` lists them all.",
            "",
        ]
    unchanged = plan.count(Action.UNCHANGED)
    if unchanged and not show_unchanged:
        notes += [f"... and {unchanged} more unchanged.", ""]
    page.add(notes, force=True)


def _details_md(visible: list[AppendDefinitions], names: Mapping[str, str], page: _Page) -> None:
    """A collapsible diff per dataset, for the first ``MARKDOWN_DETAILED`` that fit (one too large for
    what is left of the page is passed over, so a huge query diff does not hide every dataset after it)."""
    detailed = 0
    with_body = [s for s in visible if len(_step_text(s, names)) > 1]
    for step in with_body:
        if detailed >= MARKDOWN_DETAILED:
            break
        body = [_diff_line(line) for line in _step_text(step, names)[1:]]
        fence = _fence(body)
        block = [
            f"<details><summary><code>{step.action.symbol} {step.dataset}</code> "
            f"({step.action.value})</summary>",
            "",
            f"{fence}diff",
            *body,
            fence,
            "</details>",
            "",
        ]
        if page.add(block):
            detailed += 1
    if detailed < len(with_body):
        page.add(
            [
                f"Details of {len(with_body) - detailed} dataset(s) are left out to keep this comment "
                "under GitHub's size limit; `odfproj plan` shows them.",
                "",
            ],
            force=True,
        )


def _data_md(data_steps: tuple[DataStep, ...], labels: StepLabels, page: _Page) -> None:
    """The data work, as one collapsible block of the first steps that fit."""
    body: list[str] = []
    shown = 0
    wrapper = 2 * len(DATA_HEADING) + 120  # <details>, fences and the "more" line
    for step in data_steps[:MARKDOWN_DATA_STEPS]:
        lines = data_step_lines(step, labels)
        if _Page.size(body) + _Page.size(lines) + wrapper > page.left:
            break
        body += lines
        shown += 1
    if shown < len(data_steps):
        body.append(f"  ... and {len(data_steps) - shown} more data step(s) (all in `odfproj plan`)")
    fence = _fence(body)
    block = [f"<details><summary>{_md_escape(DATA_HEADING)}</summary>", "", f"{fence}text", *body, fence]
    page.add([*block, "</details>", ""], force=shown == 0)


def _warnings_md(plan: Plan) -> list[str]:
    warnings = [*plan.warnings, *(w for s in plan.data_steps if isinstance(s, Ingest) for w in s.warnings)]
    lines: list[str] = []
    for warning in warnings[:MARKDOWN_WARNINGS]:
        lines += [f"> [!WARNING]\n> {_md_escape(_one_line(warning))}", ""]
    if len(warnings) > MARKDOWN_WARNINGS:
        lines += [f"... and {len(warnings) - MARKDOWN_WARNINGS} more warning(s) (all in `odfproj plan`).", ""]
    return lines


#: Characters of one warning the markdown form shows.
_WARNING_CHARS = 1_000


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _WARNING_CHARS else text[: _WARNING_CHARS - 3] + "..."


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
