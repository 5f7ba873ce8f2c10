"""A definition change as a reviewer reads it: one line per changed field, not two whole YAML blocks.

An updated event becomes field lines addressed by path (``~ SetInfo.description: "a" -> "b"``,
``+ SetInfo.keywords[2]: "x"``, ``- SetVocab.eventTimeColumn: "t"``; two long values one above the
other); a multi-line value (a SQL query, an embedded attachment) becomes a unified diff of its lines
under its path. A new event is one summary
line (``+ SetLicense: CC-BY-4.0 (Creative Commons Attribution 4.0)``), and a removed one names its slot.

The lines are computed from the plain ODF data of ``EventChange.before``/``after`` (camelCase keys), so
every event kind is covered by one walk, and a field the spec adds later is diffed without new code.
Input datasets are shown by name: ``names`` maps ``did:odf`` ids to dataset names (the JSON form keeps
the ids). Every line starts with its marker (``+``, ``-``, ``~``) or with spaces, which is what
``render.colourize`` and markdown's ```` ```diff ```` blocks colour.
"""

from __future__ import annotations

import base64
import difflib
import json
from collections.abc import Mapping
from typing import Any

from odfproj.plan.model import EventChange

__all__ = ["change_lines", "event_summary"]

#: Characters of a description or other free text kept in a one-line summary.
SUMMARY_TEXT = 60
#: Items (columns, keywords, attachments) named in a one-line summary before "and N more".
SUMMARY_ITEMS = 6
#: Characters of an old and a new value past which they are shown on two lines instead of ``old -> new``.
LONG_VALUES = 80
#: Indentation of a multi-line value's diff under its path line.
_BLOCK = "    "


def change_lines(change: EventChange, names: Mapping[str, str] | None = None) -> list[str]:
    """The lines of one change: a summary for a new event, field lines for a changed one."""
    names = names or {}
    slot = change.key
    if change.before is None:
        summary = event_summary(change.kind, change.after, names)
        return [f"+ {slot}: {summary}" if summary else f"+ {slot}"]
    if change.after is None:
        undo = f" (appends {change.kind})" if change.event is not None and change.kind != slot else ""
        return [f"- {slot}{undo}"]
    before, after = _readable(change.before, names), _readable(change.after, names)
    if before == after:  # differs only in an input's id: the same name, a re-created dataset
        before, after = change.before, change.after
    out: list[str] = []
    _diff(slot, before, after, out)
    return out or [f"~ {slot}"]


def _readable(data: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """``data`` as a reviewer reads it: each ``inputs[].datasetRef`` id replaced by the dataset's name
    where known, and a ``SetDataSchema``'s base64 Arrow schema by its columns (``name type``)."""
    if data.get("kind") == "SetDataSchema" and isinstance(data.get("schema"), str):
        columns = _columns(data["schema"])
        return {**data, "schema": list(columns)} if columns is not None else data
    inputs = data.get("inputs")
    if not isinstance(inputs, list):
        return data
    named = [
        {**i, "datasetRef": names.get(i.get("datasetRef", ""), i.get("datasetRef"))}
        if isinstance(i, dict)
        else i
        for i in inputs
    ]
    return {**data, "inputs": named}


# -- field lines ---------------------------------------------------------------------------------


def _diff(path: str, old: Any, new: Any, out: list[str]) -> None:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(k for k in old if k not in new)]:
            sub = f"{path}.{key}"
            if key not in old:
                _whole("+", sub, new[key], out)
            elif key not in new:
                _whole("-", sub, old[key], out)
            else:
                _diff(sub, old[key], new[key], out)
    elif isinstance(old, list) and isinstance(new, list):
        _diff_list(path, old, new, out)
    elif _multiline(old) or _multiline(new):
        out.append(f"~ {path}:")
        old_lines = str(old).splitlines() if old is not None else []
        new_lines = str(new).splitlines() if new is not None else []
        for line in difflib.unified_diff(old_lines, new_lines, lineterm="", n=1):
            if line.startswith(("---", "+++")):
                continue
            if line.startswith("@@"):
                out.append(f"{_BLOCK}  {line}")
            else:
                out.append(f"{_BLOCK}{line[0] if line[0] in '+-' else ' '} {line[1:]}")
    else:
        before, after = _scalar(old), _scalar(new)
        if len(before) + len(after) > LONG_VALUES:  # one above the other, so the change lines up
            out += [f"~ {path}:", f"{_BLOCK}- {before}", f"{_BLOCK}+ {after}"]
        else:
            out.append(f"~ {path}: {before} -> {after}")


def _diff_list(path: str, old: list[Any], new: list[Any], out: list[str]) -> None:
    """Items matched by content: an inserted keyword is one ``+`` line, not a shift of all the rest."""
    matcher = difflib.SequenceMatcher(a=[_key(v) for v in old], b=[_key(v) for v in new], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for k in range(paired):
            _diff(f"{path}[{j1 + k}]", old[i1 + k], new[j1 + k], out)
        for i in range(i1 + paired, i2):
            _whole("-", f"{path}[{i}]", old[i], out)
        for j in range(j1 + paired, j2):
            _whole("+", f"{path}[{j}]", new[j], out)


def _whole(marker: str, path: str, value: Any, out: list[str]) -> None:
    """A value added or removed as a whole: one line per leaf, a multi-line text line by line."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _whole(marker, f"{path}.{key}", item, out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _whole(marker, f"{path}[{index}]", item, out)
    elif _multiline(value):
        out.append(f"{marker} {path}:")
        out.extend(f"{_BLOCK}{marker} {line}" for line in str(value).splitlines())
    else:
        out.append(f"{marker} {path}: {_scalar(value)}")


def _multiline(value: Any) -> bool:
    return isinstance(value, str) and "\n" in value.rstrip("\n")


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _scalar(value: Any) -> str:
    """A leaf as JSON (strings quoted, so trailing spaces and empty strings show); empty containers too."""
    return json.dumps(value, ensure_ascii=False, default=str)


# -- one-line summaries of new events ------------------------------------------------------------


def event_summary(kind: str, data: Mapping[str, Any] | None, names: Mapping[str, str] | None = None) -> str:
    """What a new event sets, in a few words: enough to review a created dataset without its YAML."""
    if not data:
        return ""
    names = names or {}
    summarise = _SUMMARIES.get(kind)
    if summarise is not None:
        return summarise(data, names)
    return _fields(data)


def _transform_summary(data: Mapping[str, Any], names: Mapping[str, str]) -> str:
    inputs = []
    for inp in data.get("inputs") or []:
        ref = inp.get("datasetRef", "")
        name = names.get(ref, ref)
        alias = inp.get("alias")
        inputs.append(name if not alias or alias == name else f"{name} as {alias}")
    parts = [f"input{'s' if len(inputs) != 1 else ''} {_items(inputs)}" if inputs else "no inputs"]
    parts.append(_transform_kind(data.get("transform")))
    return "; ".join(p for p in parts if p)


def _transform_kind(transform: Any) -> str:
    """``Sql (spark), 1 query of 3 lines``: which engine runs how much SQL."""
    if not isinstance(transform, Mapping):
        return ""
    engine = f" ({transform['engine']})" if transform.get("engine") else ""
    queries = transform.get("queries") or ([{"query": transform["query"]}] if transform.get("query") else [])
    lines = sum(len(str(q.get("query", "")).splitlines()) for q in queries)
    count = f", {len(queries)} quer{'y' if len(queries) == 1 else 'ies'} of {lines} line{_s(lines)}"
    return f"{transform.get('kind', '?')}{engine}{count if queries else ''}"


def _source_summary(data: Mapping[str, Any], names: Mapping[str, str]) -> str:
    parts = []
    if data.get("sourceName"):
        parts.append(f"source {data['sourceName']}")
    fetch = data.get("fetch")
    if isinstance(fetch, Mapping):
        where = fetch.get("url") or fetch.get("path") or fetch.get("image") or ""
        parts.append(f"fetch {fetch.get('kind', '?')} {_text(str(where))}".rstrip())
    read = data.get("read")
    if isinstance(read, Mapping):
        schema = read.get("schema")
        columns = f" ({len(schema)} column{_s(len(schema))})" if isinstance(schema, list) else ""
        parts.append(f"read {read.get('kind', '?')}{columns}")
    if isinstance(data.get("preprocess"), Mapping):
        parts.append(f"preprocess {_transform_kind(data['preprocess'])}")
    merge = data.get("merge")
    if isinstance(merge, Mapping):
        key = merge.get("primaryKey")
        parts.append(f"merge {merge.get('kind', '?')}" + (f" by {', '.join(key)}" if key else ""))
    return "; ".join(parts)


def _info_summary(data: Mapping[str, Any], names: Mapping[str, str]) -> str:
    parts = []
    if data.get("description") is not None:
        parts.append(f"description {_text(data['description'])}")
    if data.get("keywords"):
        parts.append(f"keywords {_items(data['keywords'])}")
    return "; ".join(parts) or "no description, no keywords"


def _license_summary(data: Mapping[str, Any], names: Mapping[str, str]) -> str:
    full = f" ({data['name']})" if data.get("name") and data.get("name") != data.get("shortName") else ""
    return f"{data.get('shortName', '?')}{full}"


def _attachments_summary(data: Mapping[str, Any], names: Mapping[str, str]) -> str:
    attachments = data.get("attachments")
    items = attachments.get("items") if isinstance(attachments, Mapping) else None
    if not isinstance(items, list):
        return _fields(data)
    paths = [str(i.get("path", "?")) for i in items if isinstance(i, Mapping)]
    return f"{len(items)} attachment{_s(len(items))}" + (f": {_items(paths)}" if paths else "")


def _data_schema_summary(data: Mapping[str, Any], names: Mapping[str, str]) -> str:
    columns = _columns(str(data.get("schema", "")))
    if columns is None:
        return "a data schema odfproj cannot decode"
    return f"{len(columns)} column{_s(len(columns))}: {_items(list(columns))}"


def _columns(schema: str) -> tuple[str, ...] | None:
    """The columns of a ``SetDataSchema``'s Arrow schema (base64 FlatBuffers in the data form); None if
    it does not decode (a display must not fail the plan: apply's checks judge the schema)."""
    from odfproj.errors import SerializationError
    from odfproj.odf.arrow_schema import decode_arrow_schema
    from odfproj.plan.queries import columns_of

    try:
        return columns_of(decode_arrow_schema(base64.b64decode(schema, validate=True)))
    except (ValueError, SerializationError):
        return None


_SUMMARIES = {
    "SetTransform": _transform_summary,
    "SetPollingSource": _source_summary,
    "AddPushSource": _source_summary,
    "SetInfo": _info_summary,
    "SetLicense": _license_summary,
    "SetAttachments": _attachments_summary,
    "SetDataSchema": _data_schema_summary,
}


def _fields(data: Mapping[str, Any]) -> str:
    """Any other event (SetVocab, ...): its fields as ``key value``."""
    fields = ((k, v) for k, v in data.items() if k != "kind")
    return ", ".join(f"{k} {_text(v) if isinstance(v, str) else _scalar(v)}" for k, v in fields)


def _text(text: str) -> str:
    """Free text quoted on one line, cut to ``SUMMARY_TEXT`` characters."""
    one_line = " ".join(text.split())
    if len(one_line) > SUMMARY_TEXT:
        one_line = one_line[: SUMMARY_TEXT - 3].rstrip() + "..."
    return json.dumps(one_line, ensure_ascii=False)


def _items(items: list[Any]) -> str:
    shown = ", ".join(str(i) for i in items[:SUMMARY_ITEMS])
    more = len(items) - SUMMARY_ITEMS
    return shown + (f" and {more} more" if more > 0 else "")


def _s(count: int) -> str:
    return "" if count == 1 else "s"
