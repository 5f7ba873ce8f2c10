"""Manifests in newer ODF forms, rewritten as the ODF 0.35 events they mean exactly, or refused by name.

kamu-contrib's current manifests follow a newer schema than the 0.35 odfproj speaks. Where a newer
form is only another spelling of a 0.35 event, the document is rewritten to the 0.35 form before
validation (so validation, hashing and the chain see plain 0.35); where it has no exact 0.35 meaning,
it is refused with one message naming the construct and the version that introduced it. Never a
guess: a manifest that upgrades is the one its author meant, to the bit.

Rewritten (the newer spellings come from ``opendatafabric.newest.fbs``, the 0.38-era schema):

- ``read.schema`` as a ``DataSchema`` mapping (``fields: [{name, type}]``) becomes the DDL list of
  0.35. A field's type is a ``DataType`` (short form ``type: String`` or ``type: {kind: ...}``); a type
  that is not ``Option`` is required, so it becomes ``NOT NULL``; ``Option`` is a nullable column.
- ``read.ddlSchema`` (the newer name of the DDL list) becomes ``read.schema``.

Refused: ``DataType`` kinds DDL cannot state exactly (``Float16``, ``Duration``, ``Null``, fixed-size
binaries and lists, sorted maps, timestamps in a zone other than UTC, negative decimal scales), a
field's or schema's ``extra`` attributes, and the merge kinds 0.35 does not have. A fetch step odfproj
does not run (``EthereumLogs``, ODF 0.36: it needs an Ethereum node) is refused in one line naming the
dataset, the step, its version and why, so a project that holds one can leave it out by name.

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

__all__ = ["NEWER_SCHEMA_VERSION", "Refusal", "upgrade_document"]

#: The ODF version whose schema the newer forms come from (kamu-contrib's current manifests).
NEWER_SCHEMA_VERSION = "ODF 0.38"

Path = tuple[str | int, ...]

_SOURCE_EVENTS = ("SetPollingSource", "AddPushSource")

#: Kinds of merge steps newer than 0.35: no 0.35 event means the same.
_NEWER_KINDS = {
    "merge": ("ChangelogStream", "UpsertStream"),
}

#: Fetch steps of newer ODF versions that odfproj does not run, with the version that added each and what
#: it would take: refused by name in one line, whatever the workspace.
_FOREIGN_FETCH_STEPS = {
    "EthereumLogs": (
        "ODF 0.36",
        "it reads event logs from an Ethereum node over JSON-RPC, which kamu-cli's own ingest does; "
        "ingest this dataset with kamu",
    ),
}

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


@dataclass(frozen=True, slots=True)
class Refusal:
    """A newer construct with no exact ODF 0.35 meaning, at ``path`` in the document."""

    path: Path
    message: str


class _Refused(Exception):
    def __init__(self, path: Path, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


def upgrade_document(document: Any) -> list[Refusal]:
    """Rewrite the newer forms of a DatasetSnapshot ``document`` in place; return what cannot be."""
    refusals: list[Refusal] = []
    for path, event in _events(document):
        if event.get("kind") not in _SOURCE_EVENTS:
            continue
        fetch = event.get("fetch")
        foreign = _FOREIGN_FETCH_STEPS.get(fetch.get("kind")) if isinstance(fetch, dict) else None
        if foreign is not None:
            version, why = foreign
            refusals.append(
                Refusal(
                    (*path, "fetch", "kind"),
                    f"{_dataset_prefix(document)}the fetch step {fetch['kind']} ({version}) is not one "
                    f"odfproj runs: {why}",
                )
            )
        for step, kinds in _NEWER_KINDS.items():
            value = event.get(step)
            if isinstance(value, dict) and value.get("kind") in kinds:
                refusals.append(
                    Refusal(
                        (*path, step, "kind"),
                        f"{step} kind {value['kind']} is from a newer ODF than 0.35 "
                        f"(in the {NEWER_SCHEMA_VERSION} schema); odfproj speaks ODF 0.35, which has no "
                        "equivalent",
                    )
                )
        read = event.get("read")
        if isinstance(read, dict):
            try:
                _upgrade_read(read, (*path, "read"))
            except _Refused as e:
                refusals.append(Refusal(e.path, e.message))
    return refusals


def _dataset_prefix(document: Any) -> str:
    """``"NAME: "`` when the document's ``content.name`` is a string, else nothing."""
    content = document.get("content") if isinstance(document, dict) else None
    name = content.get("name") if isinstance(content, dict) else None
    return f"{name}: " if isinstance(name, str) and name else ""


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
    """The 0.35 DDL columns of a newer ``DataSchema`` mapping, or ``_Refused`` naming what does not map."""
    _no_extra(schema, path)
    unknown = sorted(set(schema) - {"fields", "extra"})
    if unknown:
        raise _Refused((*path, unknown[0]), f"read.schema has an unknown key {unknown[0]!r}")
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise _Refused(path, "read.schema as a mapping must have a `fields` list (ODF 0.38 DataSchema)")
    arrow = pa.schema(_fields(fields, (*path, "fields")))
    try:
        return format_ddl_schema(arrow)
    except InvalidValueError as e:  # pragma: no cover - every type built here has a DDL spelling
        raise _Refused(path, str(e)) from None


def _fields(fields: list[Any], path: Path) -> list[pa.Field]:
    out = []
    for index, field in enumerate(fields):
        where = (*path, index)
        if not isinstance(field, dict) or not isinstance(field.get("name"), str) or "type" not in field:
            raise _Refused(where, "a schema field needs a `name` and a `type`")
        _no_extra(field, where)
        data_type, nullable = _data_type(field["type"], (*where, "type"))
        out.append(pa.field(field["name"], data_type, nullable=nullable))
    return out


def _no_extra(node: dict[str, Any], path: Path) -> None:
    if node.get("extra"):
        raise _Refused(
            (*path, "extra"),
            f"extra attributes are {NEWER_SCHEMA_VERSION}; ODF 0.35 schemas have no place for them",
        )


def _data_type(node: Any, path: Path) -> tuple[pa.DataType, bool]:
    """The Arrow type of a ``DataType`` and whether it is nullable (only ``Option`` is)."""
    if isinstance(node, str):
        node = {"kind": node}
    if not isinstance(node, dict) or not isinstance(node.get("kind"), str):
        raise _Refused(path, "a field type must be a type name or a mapping with a `kind`")
    kind = _KINDS.get(node["kind"].lower(), node["kind"])  # kinds match case-insensitively (RFC-013)
    if kind == "Option":
        inner, _ = _data_type(node.get("inner"), (*path, "inner"))
        return inner, True
    return _required_type(kind, node, path), False


def _required_type(kind: str, node: dict[str, Any], path: Path) -> pa.DataType:
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "Binary":
        if node.get("fixedLength") is not None:
            raise _Refused(path, _no_ddl("a fixed-size Binary"))
        return pa.binary()
    if kind == "Decimal":
        precision, scale = node.get("precision"), node.get("scale")
        if not isinstance(precision, int) or not isinstance(scale, int):
            raise _Refused(path, "a Decimal type needs an integer `precision` and `scale`")
        if scale < 0:
            raise _Refused(path, _no_ddl("a Decimal with a negative scale"))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if kind in ("Timestamp", "Time"):
        unit = _TIME_UNITS.get(node.get("unit") or "Millisecond")
        if unit is None:
            raise _Refused((*path, "unit"), f"unknown time unit {node.get('unit')!r}")
        if kind == "Time":
            return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
        zone = node.get("timezone") or "UTC"
        if zone not in ("UTC", "+00:00"):
            raise _Refused(
                (*path, "timezone"), _no_ddl(f"a Timestamp in time zone {zone!r} (0.35: UTC only)")
            )
        return pa.timestamp(unit, tz="UTC")
    if kind == "List":
        if node.get("fixedLength") is not None:
            raise _Refused(path, _no_ddl("a fixed-size List"))
        item, nullable = _data_type(node.get("itemType"), (*path, "itemType"))
        return pa.list_(pa.field("item", item, nullable=nullable))
    if kind == "Struct":
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise _Refused(path, "a Struct type needs a `fields` list")
        return pa.struct(_fields(fields, (*path, "fields")))
    if kind == "Map":
        if node.get("keysSorted"):
            raise _Refused(path, _no_ddl("a Map with sorted keys"))
        key, _ = _data_type(node.get("keyType"), (*path, "keyType"))
        value, nullable = _data_type(node.get("valueType"), (*path, "valueType"))
        return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value, nullable=nullable))
    if kind in ("Float16", "Duration", "Null"):
        raise _Refused(path, _no_ddl(f"the {kind} type"))
    raise _Refused(path, f"unknown data type kind {kind!r}")


def _no_ddl(what: str) -> str:
    return (
        f"{what} is an {NEWER_SCHEMA_VERSION} schema type that ODF 0.35 DDL cannot state exactly; "
        "declare the schema as an ODF 0.35 DDL list"
    )
