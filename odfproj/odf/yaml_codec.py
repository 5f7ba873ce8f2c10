"""YAML form of the ODF model, exactly as the spec and its reference implementation write it.

- camelCase keys in schema order; union values are internally tagged with ``kind`` (RFC-013), written
  in PascalCase and read in PascalCase, camelCase or lowercase; string enums likewise.
- root resources are wrapped in the ``kind / version / content`` manifest envelope.
- hashes and dataset ids are multibase strings, timestamps RFC 3339 UTC, opaque bytes base64.

Conversion goes through plain ``dict``/``list`` values so the same functions serve JSON output.
Errors raise ``InvalidValueError`` naming the path inside the document (``metadata[0].read.header``);
the line-numbered report of a whole manifest is the job of ``validation``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import yaml

from odfproj.errors import InvalidValueError
from odfproj.odf import model
from odfproj.odf.identity import DatasetId
from odfproj.odf.multiformats import Multihash
from odfproj.odf.schema_types import SCALAR_WIDTH, FieldSpec, TableSpec
from odfproj.odf.timestamps import format_rfc3339, parse_rfc3339
from odfproj.odf.yaml_source import check_yaml_limits

#: Envelope kinds and the manifest versions this implementation reads.
MANIFEST_VERSIONS: dict[str, tuple[int, ...]] = {"DatasetSnapshot": (1,), "MetadataBlock": (2, 3)}
DEFAULT_MANIFEST_VERSION: dict[str, int] = {"DatasetSnapshot": 1, "MetadataBlock": 2}


def _spellings(name: str) -> tuple[str, ...]:
    return (name, name[:1].lower() + name[1:], name.lower())


def _tag_index(variants: tuple[tuple[str, str], ...]) -> dict[str, str]:
    index: dict[str, str] = {}
    for tag, table in variants:
        for spelling in _spellings(tag):
            index[spelling] = table
    return index


_UNION_TAGS = {name: _tag_index(spec.variants) for name, spec in model.UNIONS.items()}
_FIELDS_BY_YAML = {name: {f.yaml: f for f in spec.fields} for name, spec in model.TABLES.items()}
_ENUM_NAMES = {
    name: {spelling: member for member in enum_cls for spelling in _spellings(member.name)}
    for name, enum_cls in model.ENUMS.items()
}


# ------------------------------------------------------------------------------------------------
# model -> plain data


def to_data(obj: Any) -> dict[str, Any]:
    """Convert a model object to plain data; a union variant gets its ``kind`` tag first."""
    cls = type(obj)
    spec = model.TABLES[cls.__name__]
    out: dict[str, Any] = {}
    variant = model.VARIANT_OF.get(cls)
    if variant is not None:
        out["kind"] = variant[1]
    for f in spec.fields:
        value = getattr(obj, f.name)
        if value is None:
            continue
        out[f.yaml] = [_value_to_data(f, v) for v in value] if f.vector else _value_to_data(f, value)
    return out


def _value_to_data(f: FieldSpec, value: Any) -> Any:
    kind = f.kind
    if kind in ("table", "union"):
        return to_data(value)
    if kind == "enum":
        return value.name
    if kind == "multihash":
        return value.to_multibase()
    if kind == "did":
        return value.as_did_str()
    if kind == "timestamp":
        return format_rfc3339(value)
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    return value


# ------------------------------------------------------------------------------------------------
# plain data -> model


def from_data(type_name: str, data: Any, path: str = "") -> Any:
    """Build a model object of table or union ``type_name`` from plain data, strictly."""
    if type_name in model.UNIONS:
        return _union_from_data(type_name, data, path)
    tagged = model.CLASSES[type_name] in model.VARIANT_OF
    return _table_from_data(model.TABLES[type_name], data, path, tagged=tagged)


def _where(path: str) -> str:
    return f" at {path}" if path else ""


def _union_from_data(union: str, data: Any, path: str) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidValueError(
            f"expected a {union} object with a 'kind'{_where(path)}, got {_describe(data)}"
        )
    tag = data.get("kind")
    table = _UNION_TAGS[union].get(tag) if isinstance(tag, str) else None
    if table is None:
        expected = ", ".join(t for t, _ in model.UNIONS[union].variants)
        raise InvalidValueError(f"unknown {union} kind {tag!r}{_where(path)} (expected one of: {expected})")
    return _table_from_data(model.TABLES[table], data, path, tagged=True)


def _table_from_data(spec: TableSpec, data: Any, path: str, *, tagged: bool) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidValueError(f"expected a {spec.name} object{_where(path)}, got {_describe(data)}")
    by_yaml = _FIELDS_BY_YAML[spec.name]
    for key in data:
        if key == "kind" and tagged:
            continue
        if key not in by_yaml:
            known = ", ".join(by_yaml) or "none"
            raise InvalidValueError(f"unknown field {key!r} in {spec.name}{_where(path)} (expected: {known})")
    kwargs: dict[str, Any] = {}
    for f in spec.fields:
        raw = data.get(f.yaml)
        if raw is None:
            if f.required:
                raise InvalidValueError(f"missing required field {f.yaml!r} in {spec.name}{_where(path)}")
            continue
        if f.kind == "string" and not f.vector and isinstance(raw, str):
            kwargs[f.name] = raw  # the commonest field, without building its path for an error
            continue
        sub = f"{path}.{f.yaml}" if path else f.yaml  # only for a field that is there: most are not
        if f.vector:
            if not isinstance(raw, list):
                raise InvalidValueError(f"field {sub!r} must be a list, got {_describe(raw)}")
            kwargs[f.name] = tuple(_value_from_data(f, v, f"{sub}[{i}]") for i, v in enumerate(raw))
        else:
            kwargs[f.name] = _value_from_data(f, raw, sub)
    return model.CLASSES[spec.name](**kwargs)


def _value_from_data(f: FieldSpec, raw: Any, path: str) -> Any:
    kind = f.kind
    if kind == "table":
        return _table_from_data(model.TABLES[f.ref], raw, path, tagged=False)
    if kind == "union":
        return _union_from_data(f.ref, raw, path)
    if kind == "enum":
        member = _ENUM_NAMES[f.ref].get(raw) if isinstance(raw, str) else None
        if member is None:
            expected = ", ".join(m.name for m in model.ENUMS[f.ref])
            raise InvalidValueError(f"invalid {f.ref} {raw!r} at {path} (expected one of: {expected})")
        return member
    if kind == "string":
        if not isinstance(raw, str):
            raise InvalidValueError(f"field {path!r} must be a string, got {_describe(raw)}")
        return raw
    if kind == "bool":
        if not isinstance(raw, bool):
            raise InvalidValueError(f"field {path!r} must be a boolean, got {_describe(raw)}")
        return raw
    if kind in SCALAR_WIDTH:
        return _integer(raw, kind, path)
    if not isinstance(raw, str):
        raise InvalidValueError(f"field {path!r} must be a string, got {_describe(raw)}")
    try:
        if kind == "multihash":
            return Multihash.from_multibase(raw)
        if kind == "did":
            return DatasetId.from_did_str(raw)
        if kind == "timestamp":
            return parse_rfc3339(raw)
        if kind == "bytes":
            return base64.b64decode(raw.encode("ascii"), validate=True)
    except (InvalidValueError, binascii.Error, UnicodeEncodeError) as e:
        raise InvalidValueError(f"field {path!r}: {e}") from None
    raise AssertionError(f"unhandled field kind {kind}")


def _integer(raw: Any, kind: str, path: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidValueError(f"field {path!r} must be an integer, got {_describe(raw)}")
    bits = SCALAR_WIDTH[kind] * 8
    lo, hi = (0, 2**bits - 1) if kind.startswith("uint") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not lo <= raw <= hi:
        raise InvalidValueError(f"field {path!r} = {raw} is out of range for {kind}")
    return raw


def _describe(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}
    label = names.get(type(value), type(value).__name__)
    if isinstance(value, str | int | float | bool):
        return f"{label} {value!r}"
    return label


# ------------------------------------------------------------------------------------------------
# manifests (kind / version / content)


def manifest_to_data(obj: Any, version: int | None = None) -> dict[str, Any]:
    kind = type(obj).__name__
    if kind not in MANIFEST_VERSIONS:
        raise InvalidValueError(f"{kind} is not a root resource and has no manifest form")
    return {"kind": kind, "version": version or DEFAULT_MANIFEST_VERSION[kind], "content": to_data(obj)}


def manifest_from_data(data: Any, expected_kind: str | None = None) -> tuple[Any, int]:
    """Parse a manifest envelope; returns the content object and the envelope version."""
    if not isinstance(data, Mapping):
        raise InvalidValueError(
            f"a manifest must be an object with kind, version and content, got {_describe(data)}"
        )
    extra = set(data) - {"kind", "version", "content"}
    if extra:
        raise InvalidValueError(f"unknown manifest field(s): {', '.join(sorted(map(str, extra)))}")
    kind = data.get("kind")
    if kind not in MANIFEST_VERSIONS:
        raise InvalidValueError(
            f"unknown manifest kind {kind!r} (expected one of: {', '.join(MANIFEST_VERSIONS)})"
        )
    if expected_kind and kind != expected_kind:
        raise InvalidValueError(f"expected a {expected_kind} manifest, got {kind}")
    version = data.get("version")
    if version not in MANIFEST_VERSIONS[kind]:
        supported = ", ".join(map(str, MANIFEST_VERSIONS[kind]))
        raise InvalidValueError(f"unsupported {kind} manifest version {version!r} (supported: {supported})")
    if "content" not in data:
        raise InvalidValueError("missing required field 'content' in the manifest")
    return _table_from_data(model.TABLES[kind], data["content"], "content", tagged=False), version


# ------------------------------------------------------------------------------------------------
# YAML text


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings: ODF parses them itself, in UTC, strictly."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _Dumper(yaml.SafeDumper):
    """Block style, indented sequences, literal multi-line strings, unquoted timestamps."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_Dumper.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


#: Characters YAML treats as line breaks or cannot keep in block scalars: such strings are double-quoted.
_QUOTE_CHARS = frozenset("\r\x85\u2028\u2029\ufeff")


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if _QUOTE_CHARS.intersection(value):
        style = '"'
    elif "\n" in value:
        style = "|"
    else:
        style = None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def load_yaml(text: str | bytes) -> Any:
    """Plain data from YAML text; a document over the limits raises ``YamlLimitError`` (a YAMLError)."""
    check_yaml_limits(text if isinstance(text, str) else text.decode("utf-8", "replace"))
    return yaml.load(text, Loader=_Loader)


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000)


def parse_manifest(text: str | bytes, expected_kind: str | None = None) -> tuple[Any, int]:
    """YAML manifest text -> (content object, envelope version)."""
    return manifest_from_data(load_yaml(text), expected_kind)


def write_manifest(obj: Any, version: int | None = None) -> str:
    """Model object -> YAML manifest text, as the reference implementation writes it."""
    return dump_yaml(manifest_to_data(obj, version))
