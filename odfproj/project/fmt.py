"""``odfproj fmt``: one canonical layout for DatasetSnapshot manifests, comments kept.

Canonical means: the envelope as ``kind, version, content``; inside ``content``: ``name, kind, metadata``;
every tagged object (an event, a fetch step, a read step...) with ``kind`` first and then the fields in
the order of the ODF schema (the descriptors in ``odfproj.odf.model``); keys the schema does not know
keep their relative order after the known ones; 2-space indentation, sequences indented under their key.
Values, scalar styles (quotes, ``|`` blocks) and list order are never touched.

Why ruamel.yaml: PyYAML drops comments, and in manifests comments are documentation. ruamel.yaml's
round-trip mode keeps them, but attaches each full-line comment to the END of the entry ABOVE it (to
its deepest last value). Before moving keys we therefore detach the comment lines that precede each
key ("leads") and re-attach them in front of the same key at its new place, re-indented.

Safety: a file is rewritten only when re-reading the result with the loader ``validate`` uses gives the
same data as the original, and, for templates, the same Jinja tags. A Jinja manifest that is not YAML
on its own (e.g. ``{% if %}`` blocks) is skipped with a warning rather than mangled.
"""

from __future__ import annotations

import enum
import io
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.tokens import CommentToken

from odfproj.errors import OdfprojError
from odfproj.odf import model
from odfproj.odf.yaml_codec import load_yaml
from odfproj.project.render import has_jinja

__all__ = [
    "FormatError",
    "FormatReport",
    "FormatResult",
    "FormatStatus",
    "TemplateNotYamlError",
    "format_text",
    "formatted_files",
]

_ENVELOPE_ORDER = ("kind", "version", "content")
_MANIFEST_KIND = "DatasetSnapshot"
#: Indentation of a mapping's keys relative to its parent key, and of a sequence's items.
_MAP_INDENT = 2
_SEQ_DASH_OFFSET = 2
_SEQ_INDENT = 4
_JINJA_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)


class FormatError(OdfprojError):
    """A file cannot be formatted (not YAML, not a manifest, or formatting would change its meaning)."""


class TemplateNotYamlError(FormatError):
    """A Jinja manifest that only becomes YAML once rendered: it is skipped, not an error."""


# ------------------------------------------------------------------------------------------------
# Schema order


def _spellings(tag: str) -> tuple[str, ...]:
    return (tag, tag[:1].lower() + tag[1:], tag.lower())


#: union name -> every accepted spelling of a variant tag -> the variant's table name.
_VARIANTS: dict[str, dict[str, str]] = {
    union: {spelling: table for tag, table in spec.variants for spelling in _spellings(tag)}
    for union, spec in model.UNIONS.items()
}


def _ordered_keys(node: CommentedMap, desired: Sequence[str]) -> list[Any]:
    """``desired`` keys present in ``node`` first, then the unknown ones in their current order."""
    wanted = [k for k in desired if k in node]
    seen = set(wanted)
    return wanted + [k for k in node if k not in seen]


#: Receives the comment lines that must go in front of a mapping (see ``_reorder``).
LeadSink = Callable[[list[str]], None]


def _order_table(node: CommentedMap, table: str, col: int, *, tagged: bool, sink: LeadSink | None) -> None:
    spec = model.TABLES[table]
    for f in spec.fields:
        if f.kind not in ("table", "union") or f.ref is None or f.yaml not in node:
            continue
        value = node[f.yaml]
        if f.vector:
            if isinstance(value, CommentedSeq):
                for index, item in enumerate(value):
                    item_sink = _item_sink(node, f.yaml, value, index, col + _SEQ_DASH_OFFSET)
                    _order_typed(item, f.kind, f.ref, col + _SEQ_INDENT, item_sink)
        else:
            _order_typed(value, f.kind, f.ref, col + _MAP_INDENT, None)
    fields = [f.yaml for f in spec.fields]
    _reorder(node, _ordered_keys(node, ["kind", *fields] if tagged else fields), col, sink)


def _order_typed(node: Any, kind: str, ref: str, col: int, sink: LeadSink | None) -> None:
    if not isinstance(node, CommentedMap):
        return  # a wrong type: validate reports it, fmt leaves it alone
    if kind == "table":
        _order_table(node, ref, col, tagged=False, sink=sink)
        return
    tag = node.get("kind")
    table = _VARIANTS[ref].get(tag) if isinstance(tag, str) else None
    if table is None:
        _reorder(node, _ordered_keys(node, ["kind"]), col, sink)
    else:
        _order_table(node, table, col, tagged=True, sink=sink)


def _order_manifest(doc: Any) -> None:
    if not isinstance(doc, CommentedMap) or doc.get("kind") != _MANIFEST_KIND:
        raise FormatError(f"not a {_MANIFEST_KIND} manifest (expected 'kind: {_MANIFEST_KIND}' at the top)")
    content = doc.get("content")
    if isinstance(content, CommentedMap):
        _order_table(content, _MANIFEST_KIND, _MAP_INDENT, tagged=False, sink=None)
    _reorder(doc, _ordered_keys(doc, _ENVELOPE_ORDER), 0, None)


# ------------------------------------------------------------------------------------------------
# Moving keys with their comments
#
# ruamel keeps the comment text that follows an entry in one token: an optional end-of-line comment
# ("# eol\n") and then the full lines below it, up to the next entry. For a map entry the token is
# ``ca.items[key][2]``, for a sequence item ``ca.items[index][0]``, and when the value is a non-empty
# collection it sits on that collection's last entry, recursively.


def _after_slot(node: CommentedMap | CommentedSeq, key: Any) -> tuple[CommentedMap | CommentedSeq, Any, int]:
    """Where the comments following entry ``key`` of ``node`` live: (container, key, slot index)."""
    value = node[key]
    while isinstance(value, CommentedMap | CommentedSeq) and len(value) > 0:
        node = value
        key = next(reversed(value)) if isinstance(value, CommentedMap) else len(value) - 1
        value = node[key]
    return node, key, 2 if isinstance(node, CommentedMap) else 0


def _split(value: str) -> tuple[str | None, list[str]]:
    """Token text -> (end-of-line comment or None, the full lines after it)."""
    if value.startswith("#"):
        eol, _, rest = value.partition("\n")
        return eol + "\n", rest.splitlines(keepends=True)
    return None, value[1:].splitlines(keepends=True) if value.startswith("\n") else value.splitlines(True)


def _pop_after(node: CommentedMap | CommentedSeq, key: Any) -> list[str]:
    """Detach and return the full comment lines below entry ``key`` (its end-of-line comment stays)."""
    owner, owner_key, slot = _after_slot(node, key)
    entry = owner.ca.items.get(owner_key)
    token = entry[slot] if entry is not None and len(entry) > slot else None
    if not isinstance(token, CommentToken):
        return []
    eol, lines = _split(token.value)
    if not lines:
        return []
    entry[slot] = CommentToken(eol, token.start_mark, token.end_mark) if eol is not None else None
    return lines


def _push_after(node: CommentedMap | CommentedSeq, key: Any, lines: list[str]) -> None:
    """Append full comment lines below entry ``key``."""
    if not lines:
        return
    owner, owner_key, slot = _after_slot(node, key)
    entry = owner.ca.items.setdefault(owner_key, [None, None, None, None])
    while len(entry) <= slot:
        entry.append(None)
    token = entry[slot]
    if isinstance(token, CommentToken):
        eol, existing = _split(token.value)
        entry[slot] = CommentToken(
            (eol or "\n") + "".join(existing + lines), token.start_mark, token.end_mark
        )
    else:
        entry[slot] = CommentToken("\n" + "".join(lines), CommentMark(0))


def _reindent(lines: list[str], col: int) -> list[str]:
    return [" " * col + line.lstrip(" \t") if line.strip() else line for line in lines]


def _tokens(lines: list[str], col: int) -> list[CommentToken]:
    """Comment lines as ruamel "before" tokens; the emitter indents each to ``col``."""
    return [CommentToken(line.lstrip(" \t") if line.strip() else "\n", CommentMark(col)) for line in lines]


def _set_before(node: CommentedMap, key: Any, lines: list[str], col: int) -> None:
    """Put comment lines in front of ``key`` (for a key that is not inside a ``- `` item line)."""
    entry = node.ca.items.setdefault(key, [None, None, None, None])
    entry[1] = [*(entry[1] or []), *_tokens(lines, col)]


def _item_sink(parent: CommentedMap, key: Any, seq: CommentedSeq, index: int, dash_col: int) -> LeadSink:
    """Where lines that must precede the ``index``-th item of ``seq`` (the value of ``parent[key]``) go:
    below the previous item, or for the first item in front of the sequence's first dash."""

    def sink(lines: list[str]) -> None:
        if index > 0:
            _push_after(seq, index - 1, _reindent(lines, dash_col))
            return
        entry = parent.ca.items.setdefault(key, [None, None, None, None])
        if entry[3] is None:
            entry[3] = []
            seq.ca.comment = [None, entry[3]]
        entry[3].extend(_tokens(lines, dash_col))

    return sink


def _reorder(node: CommentedMap, order: list[Any], col: int, sink: LeadSink | None) -> None:
    """Put ``node``'s keys in ``order``; comment lines above a key move with it, the tail stays last.

    Comment lines above the original FIRST key are the mapping's header (for the top level: the file
    header) and stay first. A key that becomes first takes its lines in front of it; for a mapping that
    is a sequence item they go before the item's dash (``sink``), never between the dash and the key.
    """
    keys = list(node)
    if keys == order:
        return
    leads = {key: _pop_after(node, prev) for prev, key in pairwise(keys)}
    tail = _pop_after(node, keys[-1])
    for key in order:
        node.move_to_end(key)
    first_lead = leads.get(order[0], [])
    if first_lead:
        if sink is not None:
            sink(first_lead)
        else:
            _set_before(node, order[0], first_lead, col)
    for prev, key in pairwise(order):
        _push_after(node, prev, _reindent(leads.get(key, []), col))
    _push_after(node, order[-1], tail)


def _reheader(parent: CommentedMap, key: Any, col: int) -> None:
    """Re-indent the comment lines above the first entry of ``parent[key]`` (kept in the parent)."""
    entry = parent.ca.items.get(key)
    header = entry[3] if entry is not None and len(entry) > 3 else None
    if header:
        lines = "".join(t.value for t in header if isinstance(t, CommentToken)).splitlines(keepends=True)
        header[:] = _tokens(lines, col)  # in place: the child's ``ca.comment`` shares this list


def _indent_comments(node: CommentedMap | CommentedSeq, col: int) -> None:
    """Indent every full-line comment like the entry below it (``col``: this container's entries).

    Lines below a container's LAST entry belong to an outer level, which indents them.
    """
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            if (
                isinstance(value, CommentedMap | CommentedSeq)
                and len(value) > 0
                and not value.fa.flow_style()
            ):
                child = col + (_MAP_INDENT if isinstance(value, CommentedMap) else _SEQ_DASH_OFFSET)
                _reheader(node, key, child)
                _indent_comments(value, child)
        entries: list[Any] = list(node)
    else:
        for item in node:
            if isinstance(item, CommentedMap) and len(item) > 0 and not item.fa.flow_style():
                _indent_comments(item, col + _SEQ_INDENT - _SEQ_DASH_OFFSET)
        entries = list(range(len(node)))
    for entry in entries[:-1]:
        _push_after(node, entry, _reindent(_pop_after(node, entry), col))


# ------------------------------------------------------------------------------------------------
# Text


def _yaml() -> YAML:
    rt = YAML(typ="rt")
    rt.indent(mapping=_MAP_INDENT, sequence=_SEQ_INDENT, offset=_SEQ_DASH_OFFSET)
    rt.preserve_quotes = True
    rt.width = 10_000  # never re-wrap long values
    return rt


def _position(error: Exception) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    return f"{mark.line + 1}:{mark.column + 1}: " if mark is not None else ""


def _reason(error: Exception) -> str:
    return str(getattr(error, "problem", None) or error).splitlines()[0]


def format_text(text: str) -> str:
    """The canonical form of manifest ``text``; raises ``FormatError`` / ``TemplateNotYamlError``."""
    template = has_jinja(text)
    try:
        original = load_yaml(text)  # refuses documents over the YAML limits before ruamel sees them
        doc = _yaml().load(text)
    except (yaml.YAMLError, YAMLError) as e:
        message = f"{_position(e)}invalid YAML: {_reason(e)}"
        if template:
            raise TemplateNotYamlError(
                f"{message} (a Jinja template that is YAML only once rendered)"
            ) from None
        raise FormatError(message) from None
    _order_manifest(doc)
    _indent_comments(doc, 0)
    if doc.ca.comment and doc.ca.comment[1]:
        doc.ca.comment[1][:] = _tokens("".join(t.value for t in doc.ca.comment[1]).splitlines(True), 0)
    if len(doc) > 0:
        _push_after(doc, next(reversed(doc)), _reindent(_pop_after(doc, next(reversed(doc))), 0))
    out = io.StringIO()
    _yaml().dump(doc, out)
    formatted = out.getvalue()
    try:
        same = load_yaml(formatted) == original
    except yaml.YAMLError:
        same = False
    if not same:
        raise FormatError(
            "formatting would change the manifest's meaning; left as it is (please report this)"
        )
    if template and sorted(_JINJA_TAG.findall(formatted)) != sorted(_JINJA_TAG.findall(text)):
        raise TemplateNotYamlError("formatting would alter its Jinja tags")
    return formatted


# ------------------------------------------------------------------------------------------------
# Files


class FormatStatus(enum.StrEnum):
    UNCHANGED = "unchanged"
    REFORMATTED = "reformatted"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class FormatResult:
    path: Path
    shown: str
    """The path as reported to the user."""
    status: FormatStatus
    message: str = ""
    formatted: bytes | None = None
    """The canonical bytes of a ``REFORMATTED`` file, for the caller that writes them."""


@dataclass(frozen=True)
class FormatReport:
    results: tuple[FormatResult, ...]
    check: bool

    def with_status(self, status: FormatStatus) -> tuple[FormatResult, ...]:
        return tuple(r for r in self.results if r.status is status)

    @property
    def ok(self) -> bool:
        """Nothing failed, and under ``--check`` nothing would change."""
        if self.with_status(FormatStatus.FAILED):
            return False
        return not (self.check and self.with_status(FormatStatus.REFORMATTED))


def formatted_files(
    files: Iterable[Path], *, check: bool = False, display_root: Path | None = None
) -> FormatReport:
    """Each file's canonical form, read and judged but never written (reading a project writes
    nothing: ``run.fmt.format_files`` writes the ``REFORMATTED`` ones); never raises for what is in a
    file: each one gets a ``FormatResult``."""
    return FormatReport(tuple(_format_file(p, _display(p, display_root)) for p in files), check)


def _format_file(path: Path, shown: str) -> FormatResult:
    try:
        raw = path.read_bytes()
    except OSError as e:
        reason = "no such file" if isinstance(e, FileNotFoundError) else f"cannot read: {e.strerror}"
        return FormatResult(path, shown, FormatStatus.FAILED, reason)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return FormatResult(path, shown, FormatStatus.FAILED, "not UTF-8 text")
    try:
        formatted = format_text(text)
    except TemplateNotYamlError as e:
        return FormatResult(path, shown, FormatStatus.SKIPPED, str(e))
    except FormatError as e:
        return FormatResult(path, shown, FormatStatus.FAILED, str(e))
    if formatted.encode("utf-8") == raw:
        return FormatResult(path, shown, FormatStatus.UNCHANGED)
    return FormatResult(path, shown, FormatStatus.REFORMATTED, formatted=formatted.encode("utf-8"))


def _display(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return str(path)
