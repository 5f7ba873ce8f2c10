"""Load one YAML manifest into plain Python data, remembering where every key and value came from.

Why not ``yaml.safe_load``: it forgets positions, silently keeps the last of duplicate keys, turns
RFC3339-looking strings into ``datetime`` objects and raises on the first problem. Manifest authors
need ``file:line:col`` for every problem, so this module composes the node graph with PyYAML (which
keeps marks) and builds the data itself, collecting problems instead of raising.

Behaviour worth knowing:

* Timestamps stay strings: the implicit timestamp resolver is removed and an explicit
  ``!!timestamp`` tag yields the text, because ODF models times as RFC3339 strings.
* Other scalars follow PyYAML's SafeLoader, i.e. YAML 1.1: ``yes/no/on/off`` (any case variant
  PyYAML knows) are booleans, ``0o17``/``017`` octal, ``1:30`` base-60 integers. A field typed as
  string in ODF then fails schema validation with a "must be a string" message, which tells the
  author to quote the value.
* Mapping keys are always the key's source text (``on:`` is the key ``"on"``, ``1:`` is ``"1"``),
  because manifests are JSON-shaped and JSON keys are strings.
* Anchors, aliases and ``<<`` merge keys work as in SafeLoader; positions of aliased data point at
  the anchored definition.
* A leading ``---`` and a UTF-8 byte order mark are accepted; a second document is an error.
* Manifests come from pull requests, so size, nesting depth and alias expansion are bounded before
  anything is built (``check_yaml_limits``): a document nested thousands deep would otherwise crash
  libyaml's recursive composer, and a "billion laughs" document would take hours. Every YAML reader
  of the project (odfproj.yaml, ``fmt``) calls the same check.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

PathElement = str | int
Path = tuple[PathElement, ...]
Position = tuple[int, int]
"""``(line, column)``, both 1-based, columns counted in characters."""

_TAG = "tag:yaml.org,2002:"
_TIMESTAMP_TAG = _TAG + "timestamp"
_MERGE_TAG = _TAG + "merge"
_NULL_TAG = _TAG + "null"
_STR_TAG = _TAG + "str"
_PLAIN_SCALAR_TAGS = frozenset(_TAG + t for t in ("str", "null", "bool", "int", "float"))
_MAP_TAG = _TAG + "map"
_SEQ_TAG = _TAG + "seq"
_MAX_NODES = 1_000_000
"""Bound on built nodes, so that nested aliases ("billion laughs") cannot exhaust memory."""
MAX_YAML_BYTES = 4 * 1024 * 1024
"""Largest YAML document read (a manifest is a few KB; the biggest real ones are tens of KB)."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings and sequences (ODF manifests nest about 10 deep)."""
MAX_YAML_VALUES = _MAX_NODES
"""Most values a document may expand to once its aliases are followed."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file, at a 1-based line and column; ``str()`` is ``file:line:col: message``."""

    file: str
    line: int
    col: int
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


@dataclass(frozen=True)
class SourceMap:
    """Where each key and value of a loaded document starts.

    Paths are JSON-pointer-like tuples of mapping keys and sequence indexes, e.g.
    ``("content", "metadata", 0, "read", "schema", 2)``; the root document is ``()``.
    """

    values: Mapping[Path, Position] = field(default_factory=dict)
    keys: Mapping[Path, Position] = field(default_factory=dict)

    def __getitem__(self, path: Path) -> Position:
        """Value position of ``path``; raises KeyError like any mapping when it is unknown."""
        return self.values[tuple(path)]

    def __contains__(self, path: object) -> bool:
        return isinstance(path, tuple) and path in self.values

    def value_position(self, path: Path) -> Position | None:
        return self.values.get(tuple(path))

    def key_position(self, path: Path) -> Position | None:
        """Position of the mapping key that holds ``path`` (None for sequence items and the root)."""
        return self.keys.get(tuple(path))

    def nearest(self, path: Path) -> Position:
        """The value position of ``path`` or of its closest ancestor that has one (else 1:1)."""
        path = tuple(path)
        for end in range(len(path), -1, -1):
            position = self.values.get(path[:end])
            if position is not None:
                return position
        return (1, 1)

    def locate(self, path: Path) -> Position:
        """Best place to point at a problem with the whole value at ``path``: its key if it has one.

        Pointing at ``fetch:`` reads better than pointing at the first line of its body, which for a
        block mapping is merely its first key.
        """
        return self.key_position(path) or self.nearest(path)


@dataclass(frozen=True)
class LoadResult:
    """The outcome of loading: ``document`` is None when the file cannot be used at all."""

    document: Any
    source_map: SourceMap
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


class _ManifestLoader(yaml.SafeLoader):
    """SafeLoader that never resolves plain scalars to timestamps (ODF times are strings)."""


_ManifestLoader.yaml_implicit_resolvers = {
    first_char: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
    for first_char, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ManifestLoader.add_constructor(_TIMESTAMP_TAG, yaml.SafeLoader.construct_yaml_str)

if getattr(yaml, "__with_libyaml__", False):

    class _FastManifestLoader(yaml.CSafeLoader):
        """The same loader over libyaml's parser: about 10x faster on valid documents."""

    _FastManifestLoader.yaml_implicit_resolvers = _ManifestLoader.yaml_implicit_resolvers
    _FastManifestLoader.add_constructor(_TIMESTAMP_TAG, yaml.SafeLoader.construct_yaml_str)
else:  # pragma: no cover - PyPI wheels of PyYAML ship libyaml
    _FastManifestLoader = None  # type: ignore[assignment,misc]


class YamlLimitError(yaml.MarkedYAMLError):
    """A YAML document over a size, depth or alias-expansion limit.

    A ``MarkedYAMLError``, so every ``except yaml.YAMLError`` that already reports a syntax error with
    its position reports this too.
    """

    def __init__(self, problem: str, mark: Mark | None = None) -> None:
        super().__init__(problem=problem, problem_mark=mark)


def check_yaml_limits(text: str) -> None:
    """Raise ``YamlLimitError`` when ``text`` is too large, nested too deeply, or expands too much.

    Walks libyaml's event stream, which is iterative (no recursion, whatever the depth) and never
    expands aliases: the expanded size is counted from each anchor's own size instead. Syntax errors
    are left to the real parser, whose messages are better.
    """
    if len(text) > MAX_YAML_BYTES:
        raise YamlLimitError(
            f"the document is {len(text)} characters long, over the limit of {MAX_YAML_BYTES} characters"
        )
    if _obviously_within_limits(text):
        return
    parser = _FastManifestLoader or _ManifestLoader
    sizes: dict[str, int] = {}
    open_nodes: list[list[Any]] = [[0, None]]  # [values inside, anchor] for each open collection
    total = 0
    try:
        for event in yaml.parse(text, Loader=parser):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(open_nodes) > MAX_YAML_DEPTH:
                    raise YamlLimitError(
                        f"the document is nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark
                    )
                open_nodes.append([1, event.anchor])
                total += 1
                continue
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                size, anchor = open_nodes.pop()
                if anchor is not None:
                    sizes[anchor] = size
            elif isinstance(event, yaml.ScalarEvent):
                size = 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
                total += 1
            elif isinstance(event, yaml.AliasEvent):
                size = sizes.get(event.anchor, 1)
                total += size
            else:
                continue
            open_nodes[-1][0] += size
            if total > MAX_YAML_VALUES:
                raise YamlLimitError(
                    f"the document expands to more than {MAX_YAML_VALUES} values (too many aliases)",
                    event.start_mark,
                )
    except YamlLimitError:
        raise
    except yaml.MarkedYAMLError as error:
        # libyaml 0.2.5 as bundled with PyYAML 6.0.4 stops scanning past its own nesting limit (1,000
        # levels) before the parser has emitted the events that would reach ours: that is over our
        # limit too, and the document must be refused as such, not handed to a recursive parser.
        if "nesting depth" in str(error.problem or ""):
            raise YamlLimitError(
                f"the document is nested more than {MAX_YAML_DEPTH} levels deep", error.problem_mark
            ) from None
        return
    except (yaml.YAMLError, RecursionError):
        return


def _obviously_within_limits(text: str) -> bool:
    """True when ``text`` cannot break a limit, judged from its characters alone (about 20 times faster
    than walking the events, and true for nearly every real manifest).

    Without an anchor (``&``) no alias can expand. Each block-style level starts further right than
    its parent, except a sequence written at its key's own column, so block nesting is at most twice
    the widest run of indentation, dashes and ``?`` at a line's start; each flow level needs a bracket.
    """
    if "&" in text:
        return False
    brackets = text.count("[") + text.count("{")
    if brackets > MAX_YAML_DEPTH:
        return False
    widest = max((len(line) - len(line.lstrip(" -?")) for line in text.splitlines()), default=0)
    return brackets + 2 * (widest + 1) <= MAX_YAML_DEPTH


def _position(mark: Mark) -> Position:
    return (mark.line + 1, mark.column + 1)


def _tag_text(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


class _TooLarge(Exception):
    """Internal: the alias expansion budget is exhausted."""


class _Builder:
    """Builds plain data from a node graph, recording positions and problems."""

    def __init__(self, loader: _ManifestLoader, filename: str) -> None:
        self._loader = loader
        self._filename = filename
        self._active: set[int] = set()
        self._budget = _MAX_NODES
        self.values: dict[Path, Position] = {}
        self.keys: dict[Path, Position] = {}
        self.problems: list[Problem] = []

    def problem(self, mark: Mark, message: str) -> None:
        line, col = _position(mark)
        self.problems.append(Problem(self._filename, line, col, message))

    def build(self, node: Node, path: Path) -> Any:
        self._budget -= 1
        if self._budget < 0:
            raise _TooLarge
        self.values[path] = _position(node.start_mark)
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if id(node) in self._active:
            self.problem(node.start_mark, "recursive YAML alias: a value cannot contain itself")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                self._check_tag(node, _SEQ_TAG)
                return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
            self._check_tag(node, _MAP_TAG)
            return self._mapping(node, path)
        finally:
            self._active.discard(id(node))

    def _check_tag(self, node: Node, expected: str) -> None:
        if node.tag != expected:
            self.problem(node.start_mark, f"unsupported YAML tag '{_tag_text(node.tag)}' in a manifest")

    def _scalar(self, node: ScalarNode) -> Any:
        if node.tag == _TIMESTAMP_TAG:
            return node.value
        if node.tag not in _PLAIN_SCALAR_TAGS:
            self._check_tag(node, _STR_TAG)
            return node.value
        try:
            return self._loader.construct_object(node)
        except (ValueError, KeyError, TypeError, yaml.YAMLError):
            self.problem(node.start_mark, f"cannot read {node.value!r} as {_tag_text(node.tag)}")
            return node.value

    def _key(self, node: Node) -> str | None:
        if isinstance(node, ScalarNode):
            return node.value
        self.problem(node.start_mark, "mapping keys must be plain strings, not lists or mappings")
        return None

    def _mapping(self, node: MappingNode, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for source in self._merge_sources(node):
            for key, value in self._mapping(source, path).items():
                result.setdefault(key, value)
        first_seen: dict[str, Mark] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node)
            if key is None:
                continue
            if key in first_seen:
                first_line = first_seen[key].line + 1
                self.problem(
                    key_node.start_mark,
                    f"duplicate key '{key}': first defined at line {first_line}, "
                    f"again at line {key_node.start_mark.line + 1} (YAML would silently keep the last one)",
                )
            first_seen[key] = key_node.start_mark
            self.keys[(*path, key)] = _position(key_node.start_mark)
            result.pop(key, None)
            result[key] = self.build(value_node, (*path, key))
        return result

    def _merge_sources(self, node: MappingNode) -> Iterator[MappingNode]:
        """Mappings named by ``<<`` keys, earliest first (earlier ones win, as in YAML 1.1)."""
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                continue
            sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, MappingNode):
                    self.problem(source.start_mark, "a '<<' merge key needs a mapping or a list of mappings")
                elif id(source) in self._active:
                    self.problem(source.start_mark, "recursive YAML alias: a value cannot contain itself")
                else:
                    yield source


def _decode(data: bytes, filename: str) -> tuple[str | None, Problem | None]:
    """Strict UTF-8 decoding; a UTF-8 BOM is dropped (editors do not count it as a column)."""
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    body = data[bom:]
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError as error:
        line_start = body.rfind(b"\n", 0, error.start) + 1
        line = body.count(b"\n", 0, error.start) + 1
        col = len(body[line_start : error.start].decode("utf-8")) + 1
        message = (
            f"not valid UTF-8: byte 0x{body[error.start]:02x} at offset {bom + error.start} "
            f"({error.reason}); manifests must be UTF-8 encoded"
        )
        return None, Problem(filename, line, col, message)


def _text_position(text: str, index: int) -> Position:
    line_start = text.rfind("\n", 0, index) + 1
    return (text.count("\n", 0, index) + 1, index - line_start + 1)


def _yaml_error_problem(error: yaml.YAMLError, text: str, filename: str) -> Problem:
    """Turn a PyYAML exception into one positioned, readable problem."""
    if isinstance(error, yaml.reader.ReaderError):
        line, col = _text_position(text, error.position)
        char = error.character if isinstance(error.character, int) else ord(error.character)
        return Problem(filename, line, col, f"character U+{char:04X} is not allowed in YAML ({error.reason})")
    if isinstance(error, YamlLimitError):
        line, col = _position(error.problem_mark) if error.problem_mark is not None else (1, 1)
        return Problem(filename, line, col, f"refused: {error.problem}")
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return Problem(filename, 1, 1, f"YAML syntax error: {error}")
    line, col = _position(error.problem_mark)
    problem = error.problem or "invalid YAML"
    if error.context == "expected a single document in the stream":
        message = "a manifest must contain a single YAML document, but another one starts here"
    elif "'\\t'" in problem:
        lines = text.split("\n")
        before = lines[line - 1][: col - 1] if line <= len(lines) else ""
        if before.strip(" \t"):
            message = "tab characters are not allowed here, use spaces"
        else:
            message = "tabs are not allowed for indentation, use spaces"
    else:
        message = f"YAML syntax error: {problem}"
        if error.context and error.context_mark is not None:
            context_line, context_col = _position(error.context_mark)
            message += f" ({error.context} at line {context_line}, column {context_col})"
        elif error.context:
            message += f" ({error.context})"
    return Problem(filename, line, col, message)


def _is_empty(node: Node | None) -> bool:
    """No document, or a document with no content at all (``---`` and comments only)."""
    return node is None or (isinstance(node, ScalarNode) and node.tag == _NULL_TAG and node.value == "")


def _compose(text: str, filename: str) -> tuple[Node | None, Any, Problem | None]:
    """Compose with libyaml when it can; anything it rejects is composed again by the pure-Python
    parser, whose error messages and positions the problems are written for."""
    if _FastManifestLoader is not None and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        try:
            fast = _FastManifestLoader(text)
            try:
                return fast.get_single_node(), fast, None
            finally:
                fast.dispose()
        except (yaml.YAMLError, RecursionError):
            pass
    try:
        loader = _ManifestLoader(text)  # the reader rejects non-printable characters right here
        try:
            return loader.get_single_node(), loader, None
        finally:
            loader.dispose()
    except yaml.YAMLError as error:
        return None, None, _yaml_error_problem(error, text, filename)
    except RecursionError:
        return None, None, Problem(filename, 1, 1, "the YAML document is nested too deeply")


def _unique_sorted(problems: list[Problem]) -> tuple[Problem, ...]:
    """Merge-key sources are built once per use, so the same problem may be found twice."""
    return tuple(sorted(set(problems), key=lambda p: (p.line, p.col, p.message)))


def load_yaml_document(data: bytes, filename: str) -> LoadResult:
    """Load one YAML document from ``data``, reporting every problem with a position.

    Never raises on bad input. ``document`` is None when the file is unusable (undecodable, a
    syntax error, empty); problems such as duplicate keys leave a usable document (the last value
    wins, as in PyYAML) so that later validation can still run.
    """
    text, decode_problem = _decode(data, filename)
    if text is None:
        return LoadResult(None, SourceMap(), (decode_problem,) if decode_problem else ())
    try:
        check_yaml_limits(text)
    except YamlLimitError as error:
        return LoadResult(None, SourceMap(), (_yaml_error_problem(error, text, filename),))
    node, loader, problem = _compose(text, filename)
    if problem is not None:
        return LoadResult(None, SourceMap(), (problem,))
    if _is_empty(node) or loader is None or node is None:
        return LoadResult(
            None, SourceMap(), (Problem(filename, 1, 1, "empty manifest: the file has no YAML content"),)
        )
    builder = _Builder(loader, filename)
    try:
        document = builder.build(node, ())
    except _TooLarge:
        line, col = _position(node.start_mark)
        limit = f"the document expands to more than {_MAX_NODES} values (too many aliases)"
        return LoadResult(None, SourceMap(), (Problem(filename, line, col, limit),))
    except RecursionError:
        return LoadResult(
            None, SourceMap(), (Problem(filename, 1, 1, "the YAML document is nested too deeply"),)
        )
    return LoadResult(document, SourceMap(builder.values, builder.keys), _unique_sorted(builder.problems))
