"""Manifests of ODF 0.36 to 0.39, rewritten as the ODF 0.35 events they mean exactly, or refused by name.

odfproj records ODF 0.35 metadata chains; kamu-contrib and kamu-cli write manifests in the forms of the
newer versions (the spec's CHANGELOG.md, tag by tag). Where a newer form is only another spelling of a
0.35 event, the document is rewritten to the 0.35 form before validation, so validation, hashing and
the chain see plain 0.35; a manifest that upgrades is the one its author meant, to the bit. Where a
construct has no 0.35 meaning, :func:`refusal_for` (the one decision, given the workspace's
``odf_version``) refuses it in one line naming the construct, the version that needs it and the
setting that would accept it.

Rewritten (spellings of 0.35 events):

- ``read.schema`` as an ODF ``DataSchema`` (0.38): ``fields: [{name, type}]``, each type a
  ``DataType`` in its long form (``{kind: Decimal, precision: 18, scale: 4}``) or short form
  (``String``, 0.38), ``unit``/``timezone`` defaulting to ``Millisecond``/``UTC`` (0.38), becomes the
  0.35 DDL list: a type that is not ``Option`` is required (``NOT NULL``), ``Option`` is nullable.
- ``read.ddlSchema`` (0.38, the new name of the 0.35 DDL list) becomes ``read.schema``.
- short-form unions (0.38): ``eventTime: FromMetadata`` and ``cache: Forever`` become
  ``{kind: ...}``.
- ``SetDataSchema.rawArrowSchema`` (0.37, the new name of 0.35's Arrow flatbuffer) becomes ``schema``.

Refused in a 0.35 workspace (``odf_version: "0.39"`` is what would accept them); in a 0.39 one the
merge strategies ``ChangelogStream`` and ``UpsertStream`` are recorded as they are (``Newer.runs``) and
the rest are "not supported yet": ``DataType``\\ s DDL cannot state exactly
(``Float16``, ``Duration``, ``Null``, fixed-size binaries and lists, sorted maps, a time zone other
than UTC, negative decimal scales), ``extra`` attributes, ``SetDataSchema`` holding an ODF ``DataSchema`` (0.37) and the resource
manifests of 0.39 (``$schema: https://opendatafabric.org/schemas/...``). Refused in any workspace: a
fetch step odfproj does not run (``EthereumLogs``, 0.36: it needs an Ethereum node).

Only the document (plain dicts and lists) is touched: no I/O, paths kept, so positions still point
into the file the user wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from odfproj.errors import InvalidValueError
from odfproj.odf.ddl import format_ddl_schema
from odfproj.odf.odf_versions import BLOCK_VERSION_OF, DEFAULT_ODF_VERSION

__all__ = [
    "Newer",
    "Refusal",
    "refusal_for",
    "upgrade_document",
]


def _version_key(version: str) -> tuple[int, ...]:
    """``"0.39"`` as ``(0, 39)``, so versions compare as numbers."""
    return tuple(int(part) for part in version.split(".") if part.isdigit())


#: The setting that makes a workspace speak the newest ODF it can declare, as a refusal names it.
_NEWEST_SETTING = f'odf_version: "{max(BLOCK_VERSION_OF, key=_version_key)}" in odfproj.yaml'

Path = tuple[str | int, ...]

_SOURCE_EVENTS = ("setpollingsource", "addpushsource")

#: Merge strategies of newer versions, by lowercased kind (RFC-013): no 0.35 strategy means the same.
_NEWER_MERGE = {"changelogstream": "ChangelogStream", "upsertstream": "UpsertStream"}
_MERGE_VERSION = "0.37"

#: Fetch steps of newer ODF versions that odfproj does not run, with the version that added each and what
#: it would take: refused by name in one line, whatever the workspace.
_FOREIGN_FETCH_STEPS = {
    "ethereumlogs": (
        "EthereumLogs",
        "0.36",
        "it reads event logs from an Ethereum node over JSON-RPC, which kamu-cli's own ingest does; "
        "ingest this dataset with kamu",
    ),
}

#: Keys of a fetch step that 0.38 lets name a union variant by its kind alone (``cache: Forever``).
_SHORT_FORM_UNIONS = ("eventTime", "cache")

#: The version whose ``read.schema`` holds an ODF ``DataSchema``: what a type inside it needs.
_READ_SCHEMA_VERSION = "0.38"
#: The version whose ``SetDataSchema`` holds an ODF ``DataSchema`` (RFC-016) and extra attributes.
_DATA_SCHEMA_VERSION = "0.37"
#: The version of the resource manifests (``$schema``, ``headers``, ``spec``).
_RESOURCE_VERSION = "0.39"

_TIME_UNITS = {"Second": "s", "Millisecond": "ms", "Microsecond": "us", "Nanosecond": "ns"}

_SCALARS: dict[str, pa.DataType] = {
    "Bool": pa.bool_(),
    "Date": pa.date32(),
    "Float32": pa.float32(),
    "Float64": pa.float64(),
    "Int8": pa.int8(),
    "Int16": pa.int16(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
    "UInt8": pa.uint8(),
    "UInt16": pa.uint16(),
    "UInt32": pa.uint32(),
    "UInt64": pa.uint64(),
    "String": pa.utf8(),
}


_KINDS = {
    k.lower(): k
    for k in (
        *_SCALARS,
        *("Binary", "Decimal", "Timestamp", "Time", "List", "Struct", "Map", "Option"),
        *("Float16", "Duration", "Null"),
    )
}


#: The keys each ``DataType`` kind may have beside ``kind`` (0.38 schemas/schema/DataType.json).
_TYPE_KEYS = {
    "Binary": ("fixedLength",),
    "Decimal": ("precision", "scale"),
    "Duration": ("unit",),
    "Time": ("unit",),
    "Timestamp": ("unit", "timezone"),
    "List": ("itemType", "fixedLength"),
    "Map": ("keyType", "valueType", "keysSorted"),
    "Option": ("inner",),
    "Struct": ("fields",),
}
_FIELD_KEYS = ("name", "type", "extra")


@dataclass(frozen=True, slots=True)
class Newer:
    """A construct of an ODF version after 0.35 that no 0.35 event records, at ``path`` in the document.

    ``what`` names it as a user would look for it (``merge strategy ChangelogStream``); ``version`` is
    the ODF version that introduced it; ``foreign`` says why odfproj never runs it, if it never does.
    """

    path: Path
    what: str
    version: str
    foreign: str = ""
    #: odfproj runs it in a workspace whose ``odf_version`` is at least ``version`` (its chains record it).
    runs: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the document cannot be loaded, at ``path`` in it: a newer construct or a malformed newer form."""

    path: Path
    message: str


def refusal_for(construct: Newer, odf_version: str = DEFAULT_ODF_VERSION) -> str | None:
    """The one decision on a newer construct in a workspace of ``odf_version``: a refusal, or None.

    A workspace older than the construct names the version it needs and the setting that accepts it; a
    workspace new enough refuses it as not supported yet, until odfproj records chains of that version
    (then this is where it returns None). A fetch step odfproj never runs is refused in any workspace.
    """
    if construct.foreign:
        return f"{construct.what} (ODF {construct.version}) is not one odfproj runs: {construct.foreign}"
    if _version_key(odf_version) < _version_key(construct.version):
        return f"{construct.what} needs ODF {construct.version} ({_NEWEST_SETTING})"
    if construct.runs:
        return None
    return f"{construct.what} (ODF {construct.version}) is not supported yet by odfproj"


class _Refused(Exception):
    """A newer form that cannot be rewritten: a ``Newer`` construct, or a malformed one (``message``)."""

    def __init__(self, path: Path, message: str = "", construct: Newer | None = None):
        super().__init__(message or (construct.what if construct else ""))
        self.path = path
        self.message = message
        self.construct = construct


def upgrade_document(document: Any, odf_version: str = DEFAULT_ODF_VERSION) -> list[Refusal]:
    """Rewrite the newer forms of a DatasetSnapshot ``document`` in place; return what cannot be.

    ``odf_version`` is the workspace's (``odf_version`` in odfproj.yaml): it words the refusals.
    """
    prefix = _dataset_prefix(document)
    refusals: list[Refusal] = []
    for found in _newer_forms(document):
        if found.construct is None:
            refusals.append(Refusal(found.path, prefix + found.message))
            continue
        message = refusal_for(found.construct, odf_version)
        if message is not None:
            refusals.append(Refusal(found.path, prefix + message))
    return refusals


def _newer_forms(document: Any) -> Iterator[_Refused]:
    """Rewrite what has a 0.35 spelling; yield each construct that has none, and each malformed form."""
    if isinstance(document, dict) and isinstance(document.get("$schema"), str):
        resource = document["$schema"].rstrip("/").rsplit("/", 1)[-1] or document["$schema"]
        what = f"the {resource} resource manifest form ($schema, headers, spec)"
        yield _Refused(("$schema",), construct=Newer(("$schema",), what, _RESOURCE_VERSION))
        return
    for path, event in _events(document):
        kind = str(event.get("kind", "")).lower()
        try:
            if kind in _SOURCE_EVENTS:
                yield from _source_forms(event, path)
            elif kind == "setdataschema":
                _upgrade_set_data_schema(event, path)
            elif kind == "adddata" and event.get("extra"):
                raise _Refused(
                    (*path, "extra"),
                    construct=Newer(
                        (*path, "extra"), "AddData with an `extra` mapping", _DATA_SCHEMA_VERSION
                    ),
                )
        except _Refused as e:
            yield e


def _source_forms(event: dict[str, Any], path: Path) -> Iterator[_Refused]:
    fetch = event.get("fetch")
    if isinstance(fetch, dict):
        foreign = _FOREIGN_FETCH_STEPS.get(str(fetch.get("kind", "")).lower())
        if foreign is not None:
            name, version, why = foreign
            where = (*path, "fetch", "kind")
            yield _Refused(where, construct=Newer(where, f"the fetch step {name}", version, why))
        for key in _SHORT_FORM_UNIONS:
            if isinstance(fetch.get(key), str):
                fetch[key] = {"kind": fetch[key]}
    merge = event.get("merge")
    newer_merge = _NEWER_MERGE.get(str(merge.get("kind", "")).lower()) if isinstance(merge, dict) else None
    if newer_merge is not None:
        where = (*path, "merge", "kind")
        yield _Refused(
            where, construct=Newer(where, f"merge strategy {newer_merge}", _MERGE_VERSION, runs=True)
        )
    read = event.get("read")
    if isinstance(read, dict):
        try:
            _upgrade_read(read, (*path, "read"))
        except _Refused as e:
            yield e


def _upgrade_set_data_schema(event: dict[str, Any], path: Path) -> None:
    if "rawArrowSchema" in event:
        if "schema" in event:
            raise _Refused((*path, "rawArrowSchema"), "SetDataSchema has both rawArrowSchema and schema")
        event["schema"] = event.pop("rawArrowSchema")
    elif isinstance(event.get("schema"), dict):
        where = (*path, "schema")
        what = "SetDataSchema with an ODF DataSchema (schema: {fields: ...})"
        raise _Refused(where, construct=Newer(where, what, _DATA_SCHEMA_VERSION))


def _dataset_prefix(document: Any) -> str:
    """``"NAME: "`` when the document names its dataset (``content.name``, a resource's ``headers.name``)."""
    if not isinstance(document, dict):
        return ""
    for key in ("content", "headers"):
        part = document.get(key)
        name = part.get("name") if isinstance(part, dict) else None
        if isinstance(name, str) and name:
            return f"{name}: "
    return ""


def _events(document: Any) -> Iterator[tuple[Path, dict[str, Any]]]:
    content = document.get("content") if isinstance(document, dict) else None
    metadata = content.get("metadata") if isinstance(content, dict) else None
    for index, event in enumerate(metadata if isinstance(metadata, list) else []):
        if isinstance(event, dict):
            yield ("content", "metadata", index), event


def _upgrade_read(read: dict[str, Any], path: Path) -> None:
    if "ddlSchema" in read:
        if "schema" in read:
            raise _Refused((*path, "ddlSchema"), "read has both ddlSchema and schema; give the columns once")
        read["schema"] = read.pop("ddlSchema")
        return
    schema = read.get("schema")
    if isinstance(schema, dict):
        read["schema"] = ddl_of_data_schema(schema, (*path, "schema"))


def ddl_of_data_schema(schema: dict[str, Any], path: Path) -> list[str]:
    """The 0.35 DDL columns of a ``DataSchema`` mapping, or ``_Refused`` naming what does not map."""
    _no_extra(schema, path, "read.schema")
    unknown = sorted(set(schema) - {"fields", "extra"})
    if unknown:
        raise _Refused((*path, unknown[0]), f"read.schema has an unknown key {unknown[0]!r}")
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise _Refused(path, "read.schema as a mapping must have a `fields` list (an ODF 0.38 DataSchema)")
    arrow = pa.schema(_fields(fields, (*path, "fields"), "read.schema"))
    try:
        return format_ddl_schema(arrow)
    except InvalidValueError as e:  # pragma: no cover - every type built here has a DDL spelling
        raise _Refused(path, str(e)) from None


def _fields(fields: list[Any], path: Path, owner: str) -> list[pa.Field]:
    out = []
    for index, field in enumerate(fields):
        where = (*path, index)
        if not isinstance(field, dict) or not isinstance(field.get("name"), str) or "type" not in field:
            raise _Refused(where, f"{owner}: a field needs a `name` and a `type`")
        label = f"{owner} field {field['name']!r}"
        _known_keys(field, _FIELD_KEYS, where, f"{label}:")
        _no_extra(field, where, label)
        data_type, nullable = _data_type(field["type"], (*where, "type"), label)
        out.append(pa.field(field["name"], data_type, nullable=nullable))
    return out


def _no_extra(node: dict[str, Any], path: Path, label: str) -> None:
    if node.get("extra"):
        where = (*path, "extra")
        raise _Refused(where, construct=Newer(where, f"{label}: an `extra` mapping", _READ_SCHEMA_VERSION))


def _known_keys(node: dict[str, Any], known: tuple[str, ...], path: Path, where: str) -> None:
    """A key the 0.38 schema does not have is a mistake to report, never a value to drop."""
    unknown = sorted(str(k) for k in set(node) - set(known))
    if unknown:
        expected = ", ".join(k for k in known if k != "kind") or "no other key"
        raise _Refused((*path, unknown[0]), f"{where} unknown key {unknown[0]!r} (expected: {expected})")


def _newer_type(path: Path, label: str, what: str) -> _Refused:
    return _Refused(path, construct=Newer(path, f"{label}: {what}", _READ_SCHEMA_VERSION))


def _data_type(node: Any, path: Path, label: str) -> tuple[pa.DataType, bool]:
    """The Arrow type of a ``DataType`` and whether it is nullable (only ``Option`` is)."""
    if isinstance(node, str):
        node = {"kind": node}
    if not isinstance(node, dict) or not isinstance(node.get("kind"), str):
        raise _Refused(path, f"{label}: a type must be a type name or a mapping with a `kind`")
    kind = _KINDS.get(node["kind"].lower(), node["kind"])  # kinds match case-insensitively (RFC-013)
    _known_keys(node, ("kind", *_TYPE_KEYS.get(kind, ())), path, f"{label}: the {kind} type:")
    if kind == "Option":
        inner, _ = _data_type(node.get("inner"), (*path, "inner"), label)
        return inner, True
    return _required_type(kind, node, path, label), False


def _required_type(kind: str, node: dict[str, Any], path: Path, label: str) -> pa.DataType:
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "Binary":
        if node.get("fixedLength") is not None:
            raise _newer_type(path, label, "a fixed-size Binary")
        return pa.binary()
    if kind == "Decimal":
        precision, scale = node.get("precision"), node.get("scale")
        if not isinstance(precision, int) or not isinstance(scale, int):
            raise _Refused(path, f"{label}: a Decimal type needs an integer `precision` and `scale`")
        if scale < 0:
            raise _newer_type(path, label, "a Decimal with a negative scale")
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if kind in ("Timestamp", "Time"):
        unit = _TIME_UNITS.get(node.get("unit") or "Millisecond")
        if unit is None:
            raise _Refused((*path, "unit"), f"{label}: unknown time unit {node.get('unit')!r}")
        if kind == "Time":
            return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
        zone = node.get("timezone") or "UTC"
        if zone not in ("UTC", "+00:00"):
            raise _newer_type(
                (*path, "timezone"), label, f"a Timestamp in time zone {zone!r} (0.35: UTC only)"
            )
        return pa.timestamp(unit, tz="UTC")
    if kind == "List":
        if node.get("fixedLength") is not None:
            raise _newer_type(path, label, "a fixed-size List")
        item, nullable = _data_type(node.get("itemType"), (*path, "itemType"), label)
        return pa.list_(pa.field("item", item, nullable=nullable))
    if kind == "Struct":
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise _Refused(path, f"{label}: a Struct type needs a `fields` list")
        return pa.struct(_fields(fields, (*path, "fields"), label))
    if kind == "Map":
        if node.get("keysSorted"):
            raise _newer_type(path, label, "a Map with sorted keys")
        key, _ = _data_type(node.get("keyType"), (*path, "keyType"), label)
        value, nullable = _data_type(node.get("valueType"), (*path, "valueType"), label)
        return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value, nullable=nullable))
    if kind in ("Float16", "Duration", "Null"):
        raise _newer_type(path, label, f"type {kind}")
    raise _Refused(path, f"{label}: unknown data type kind {kind!r}")
