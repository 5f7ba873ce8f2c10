"""The three renderings of ``odfproj diff``: text for a terminal, JSON for tools, markdown for a
pull-request comment (within the plan's size budget, saying what it left out)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from odfproj.plan.render import GITHUB_COMMENT_LIMIT
from odfproj.run.data_diff import DatasetDiff
from odfproj.state.data_diff import DataDiff, SchemaChange

__all__ = ["render_json", "render_markdown", "render_text"]


def render_text(diffs: Sequence[DatasetDiff]) -> str:
    lines: list[str] = []
    for item in diffs:
        if item.diff is None:
            lines.append(f"{item.name}: {item.note}")
            continue
        lines.append(f"{item.name}: {summary(item.diff)}")
        diff = item.diff
        if diff.schema_changes:
            lines.append(f"  schema: {'; '.join(_schema_text(c) for c in diff.schema_changes)}")
        lines += [f"  + {_row_text(r)}" for r in diff.added_sample]
        lines += [f"  - {_row_text(r)}" for r in diff.removed_sample]
        for row in diff.changed_sample:
            changes = ", ".join(
                f"{c}: {_value(row.before[c])} -> {_value(row.after[c])}" for c in row.columns
            )
            lines.append(f"  ~ {_row_text(row.key)}: {changes}")
        shown = len(diff.added_sample) + len(diff.removed_sample) + len(diff.changed_sample)
        if shown < diff.added + diff.removed + diff.changed:
            lines.append(
                f"  ({diff.added + diff.removed + diff.changed - shown} more rows not shown; --sample N)"
            )
    return "\n".join(lines) + ("\n" if lines else "")


def summary(diff: DataDiff) -> str:
    """One line: the counts, and how rows were matched."""
    if not diff.differs:
        return f"unchanged ({diff.rows_after} rows)"
    parts = [f"+{diff.added} added", f"-{diff.removed} removed"]
    if diff.key:
        parts.append(f"~{diff.changed} changed")
    how = f"by key {', '.join(diff.key)}" if diff.key else "as multisets (no primary key)"
    schema = f", {len(diff.schema_changes)} schema changes" if diff.schema_changes else ""
    return f"{diff.rows_before} -> {diff.rows_after} rows: {', '.join(parts)} ({how}){schema}"


def render_json(diffs: Sequence[DatasetDiff]) -> str:
    def one(item: DatasetDiff) -> dict[str, Any]:
        if item.diff is None:
            return {"dataset": item.name, "note": item.note}
        diff = item.diff
        return {
            "dataset": item.name,
            "key": list(diff.key),
            "rows_before": diff.rows_before,
            "rows_after": diff.rows_after,
            "added": diff.added,
            "removed": diff.removed,
            "changed": diff.changed,
            "schema_changes": [
                {"column": c.column, "before": c.before, "after": c.after} for c in diff.schema_changes
            ],
            "added_sample": [dict(r) for r in diff.added_sample],
            "removed_sample": [dict(r) for r in diff.removed_sample],
            "changed_sample": [
                {
                    "key": dict(r.key),
                    "before": dict(r.before),
                    "after": dict(r.after),
                    "columns": list(r.columns),
                }
                for r in diff.changed_sample
            ],
        }

    return json.dumps({"datasets": [one(d) for d in diffs]}, indent=2, default=_json_value) + "\n"


def render_markdown(diffs: Sequence[DatasetDiff], *, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """A summary table, then each differing dataset's samples, added whole while they fit in ``limit``."""
    differing = [d for d in diffs if d.diff is not None and d.diff.differs]
    head = ["### Data diff", ""]
    if not differing:
        return "\n".join([*head, f"No differences in {len(diffs)} datasets."]) + "\n"
    head += [
        "| dataset | rows before | rows after | added | removed | changed | schema |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for item in differing:
        diff = item.diff
        assert diff is not None
        changed = str(diff.changed) if diff.key else "n/a"
        schema = "; ".join(_schema_text(c) for c in diff.schema_changes) or ""
        head.append(
            f"| `{item.name}` | {diff.rows_before} | {diff.rows_after} | {diff.added} | {diff.removed} "
            f"| {changed} | {_cell(schema)} |"
        )
    unchanged = len(diffs) - len(differing)
    if unchanged:
        head += ["", f"{unchanged} more datasets have no differences."]
    text = "\n".join(head) + "\n"
    tail_reserve = 200
    left_out: list[str] = []
    for item in differing:
        section = _details(item)
        if len(text) + len(section) + tail_reserve <= limit:
            text += section
        else:
            left_out.append(item.name)
    if left_out:
        text += (
            f"\n_Samples of {len(left_out)} datasets left out to fit the comment "
            f"({', '.join(f'`{n}`' for n in left_out[:5])}{' ...' if len(left_out) > 5 else ''}): "
            "run `odfproj diff` to see them._\n"
        )
    return text


def _details(item: DatasetDiff) -> str:
    diff = item.diff
    assert diff is not None
    lines = ["", f"<details><summary><code>{item.name}</code>: {summary(diff)}</summary>", ""]
    for title, rows in (("Added", diff.added_sample), ("Removed", diff.removed_sample)):
        if rows:
            lines += [f"**{title}** (first {len(rows)})", "", *_table(rows), ""]
    if diff.changed_sample:
        lines += [f"**Changed** (first {len(diff.changed_sample)})", "", "| key | column | before | after |"]
        lines.append("| --- | --- | --- | --- |")
        for row in diff.changed_sample:
            for c in row.columns:
                lines.append(
                    f"| {_cell(_row_text(row.key))} | `{c}` | {_cell(_value(row.before[c]))} "
                    f"| {_cell(_value(row.after[c]))} |"
                )
        lines.append("")
    lines.append("</details>")
    return "\n".join(lines) + "\n"


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    columns = list(rows[0])
    return [
        "| " + " | ".join(f"`{c}`" for c in columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
        *["| " + " | ".join(_cell(_value(r[c])) for c in columns) + " |" for r in rows],
    ]


def _schema_text(change: SchemaChange) -> str:
    if change.before is None:
        return f"+ {change.column} {change.after}"
    if change.after is None:
        return f"- {change.column}"
    return f"{change.column} {change.before} -> {change.after}"


def _row_text(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_value(v)}" for k, v in row.items())


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def _cell(text: str) -> str:
    """Text safe in a markdown table cell: no pipes or line breaks, and capped."""
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 120 else text[:117] + "..."


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)
