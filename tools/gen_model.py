#!/usr/bin/env python3
"""Generate ``odfproj/odf/model.py`` from the ODF FlatBuffers schema and JSON schemas.

The .fbs gives the types, field order, field ids, scalar widths and defaults (everything the binary
layout depends on); the JSON schemas give what the .fbs cannot say: which ``[ubyte]`` is a multihash,
a dataset id or opaque bytes, which fields are required, and the descriptions that become docstrings.

Usage: ``python tools/gen_model.py [--check]`` (``--check`` exits 1 when the committed file is stale).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "spec" / "odf-0.35"
OUT = REPO / "odfproj" / "odf" / "model.py"

SCALARS = {
    "bool",
    "byte",
    "ubyte",
    "short",
    "ushort",
    "int",
    "uint",
    "long",
    "ulong",
    "float",
    "double",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float32",
    "float64",
}
SCALAR_ALIASES = {
    "byte": "int8",
    "ubyte": "uint8",
    "short": "int16",
    "ushort": "uint16",
    "int": "int32",
    "uint": "uint32",
    "long": "int64",
    "ulong": "uint64",
    "float": "float32",
    "double": "float64",
}
PY_SCALAR = {"bool": "bool", "float32": "float", "float64": "float"}

#: Tables wrapping a single union so that it can be a vector element or a message root.
WRAPPER_SUFFIXES = ("Wrapper", "Root")


@dataclass
class FbsField:
    name: str
    type: str
    vector: bool
    default: str | None


@dataclass
class FbsDecl:
    kind: str  # table | struct | union | enum
    name: str
    fields: list[FbsField] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    base: str | None = None


def parse_fbs(text: str) -> dict[str, FbsDecl]:
    """A parser for the subset of the FlatBuffers IDL that opendatafabric.fbs uses."""
    text = re.sub(r"//[^\n]*", "", text)
    decls: dict[str, FbsDecl] = {}
    for m in re.finditer(r"(table|struct|union|enum)\s+(\w+)\s*(?::\s*(\w+))?\s*\{(.*?)\}", text, re.S):
        kind, name, base, body = m.group(1), m.group(2), m.group(3), m.group(4)
        decl = FbsDecl(kind, name, base=base)
        if kind in ("table", "struct"):
            for fm in re.finditer(r"(\w+)\s*:\s*(\[?)\s*(\w+)\s*\]?\s*(?:=\s*([\w.\-]+))?\s*;", body):
                decl.fields.append(FbsField(fm.group(1), fm.group(3), bool(fm.group(2)), fm.group(4)))
        else:
            decl.members = [x.strip() for x in body.split(",") if x.strip()]
        decls[name] = decl
    return decls


def load_json_schemas() -> dict[str, dict]:
    schemas = {}
    for path in sorted((SPEC / "schemas").rglob("*.json")):
        schemas[path.stem] = json.loads(path.read_text())
    return schemas


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def union_tag(union: str, variant: str) -> str:
    return variant[len(union) :] if variant.startswith(union) and variant != union else variant


class Generator:
    def __init__(self) -> None:
        self.decls = parse_fbs((SPEC / "opendatafabric.fbs").read_text())
        self.json = load_json_schemas()
        self.unions = {n: d for n, d in self.decls.items() if d.kind == "union"}
        self.variant_of: dict[str, tuple[str, str]] = {}
        for u in self.unions.values():
            for v in u.members:
                self.variant_of[v] = (u.name, union_tag(u.name, v))

    # -- JSON schema lookups ------------------------------------------------------------------
    def json_for(self, table: str) -> dict | None:
        if table in self.variant_of:
            union, tag = self.variant_of[table]
            if union == "MetadataEvent":
                return self.json.get(table)
            return self.json.get(union, {}).get("$defs", {}).get(tag)
        return self.json.get(table)

    def wrapper_union(self, table: str) -> str | None:
        decl = self.decls.get(table)
        if (
            decl
            and decl.kind == "table"
            and table.endswith(WRAPPER_SUFFIXES)
            and len(decl.fields) == 1
            and decl.fields[0].type in self.unions
        ):
            return decl.fields[0].type
        return None

    # -- field specs --------------------------------------------------------------------------
    def field_specs(self, table: str) -> list[dict]:
        decl = self.decls[table]
        schema = self.json_for(table) or {}
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        specs: list[dict] = []
        slot = 0
        for f in decl.fields:
            yaml_name = camel(f.name)
            prop = props.get(yaml_name, {})
            if props and yaml_name not in props:
                raise SystemExit(f"{table}.{f.name}: no property {yaml_name!r} in the JSON schema")
            fmt = prop.get("format") or prop.get("items", {}).get("format")
            spec: dict = {
                "name": f.name,
                "yaml": yaml_name,
                "vector": f.vector,
                "required": yaml_name in required,
            }
            t = SCALAR_ALIASES.get(f.type, f.type)
            target = self.decls.get(f.type)
            if f.type == "string":
                spec["kind"] = "string"
            elif f.type == "ubyte" and f.vector:
                spec["vector"] = False
                spec["kind"] = {"multihash": "multihash", "dataset-id": "did"}.get(fmt, "bytes")
            elif t in SCALARS:
                spec["kind"] = t
                if f.default == "null":
                    spec["optional_scalar"] = True
                else:
                    spec["default"] = (f.default == "true") if t == "bool" else int(f.default or 0)
            elif target and target.kind == "struct":
                assert f.type == "Timestamp", f.type
                spec["kind"] = "timestamp"
            elif target and target.kind == "enum":
                spec["kind"] = "enum"
                spec["ref"] = f.type
                if f.default == "null":
                    spec["optional_scalar"] = True
                else:
                    spec["default"] = 0
            elif target and target.kind == "union":
                spec["kind"] = "union"
                spec["ref"] = f.type
            elif f.vector and self.wrapper_union(f.type):
                spec["kind"] = "union"
                spec["ref"] = self.wrapper_union(f.type)
                spec["wrapper"] = f.type
            elif target and target.kind == "table":
                spec["kind"] = "table"
                spec["ref"] = f.type
            else:
                raise SystemExit(f"{table}.{f.name}: unsupported type {f.type}")
            spec["slot"] = slot + (1 if spec["kind"] == "union" and not spec.get("wrapper") else 0)
            slot += 2 if spec["kind"] == "union" and not spec.get("wrapper") else 1
            specs.append(spec)
        return specs

    def num_slots(self, specs: list[dict]) -> int:
        return (specs[-1]["slot"] + 1) if specs else 0

    # -- rendering ----------------------------------------------------------------------------
    def py_type(self, spec: dict) -> str:
        kind = spec["kind"]
        base = {
            "string": "str",
            "timestamp": "datetime",
            "bytes": "bytes",
            "multihash": "Multihash",
            "did": "DatasetId",
        }.get(kind)
        if base is None:
            base = spec["ref"] if kind in ("table", "union", "enum") else PY_SCALAR.get(kind, "int")
        if spec["vector"]:
            base = f"tuple[{base}, ...]"
        return base if spec["required"] else f"{base} | None"

    def render(self) -> str:
        out: list[str] = []
        w = out.append
        w('"""The ODF 0.35 metadata model: every table, union and enum of opendatafabric.fbs.')
        w("")
        w("GENERATED by tools/gen_model.py from spec/odf-0.35 -- do not edit; regenerate instead.")
        w('"""')
        w("")
        w("from __future__ import annotations")
        w("")
        w("import enum")
        w("from dataclasses import dataclass")
        w("from datetime import datetime")
        w("")
        w("from odfproj.odf.identity import DatasetId")
        w("from odfproj.odf.multiformats import Multihash")
        w("from odfproj.odf.schema_types import FieldSpec, TableSpec, UnionSpec")
        w("")
        emitted_tables: list[str] = []

        for decl in self.decls.values():
            if decl.kind == "enum":
                w("")
                w(f"class {decl.name}(enum.IntEnum):")
                for i, member in enumerate(decl.members):
                    w(f"    {member} = {i}")
                w("")
        for decl in self.decls.values():
            if decl.kind != "table" or self.wrapper_union(decl.name):
                continue
            emitted_tables.append(decl.name)
            self.render_table(w, decl.name, self.field_specs(decl.name), self.json_for(decl.name) or {})
        # Types that exist only in the JSON schemas.
        snapshot_specs = [
            {"name": "name", "yaml": "name", "kind": "string", "vector": False, "required": True, "slot": 0},
            {
                "name": "kind",
                "yaml": "kind",
                "kind": "enum",
                "ref": "DatasetKind",
                "vector": False,
                "required": True,
                "default": 0,
                "slot": 1,
            },
            {
                "name": "metadata",
                "yaml": "metadata",
                "kind": "union",
                "ref": "MetadataEvent",
                "vector": True,
                "required": True,
                "slot": 2,
            },
        ]
        self.render_table(w, "DatasetSnapshot", snapshot_specs, self.json["DatasetSnapshot"])

        for union in self.unions.values():
            w("")
            members = " | ".join(union.members)
            w(f"{union.name} = {members}")
        w("")
        w("")
        w("TABLES: dict[str, TableSpec] = {")
        for name in [*emitted_tables, "DatasetSnapshot"]:
            specs = snapshot_specs if name == "DatasetSnapshot" else self.field_specs(name)
            w(f"    {name!r}: TableSpec(")
            w(f"        {name!r},")
            w("        (")
            for s in specs:
                args = [repr(s["name"]), repr(s["yaml"]), repr(s["kind"])]
                for key in ("ref", "vector", "required", "optional_scalar", "default", "wrapper", "slot"):
                    if s.get(key) not in (None, False) or (key == "default" and s.get(key) is False):
                        args.append(f"{key}={s[key]!r}")
                w(f"            FieldSpec({', '.join(args)}),")
            w("        ),")
            w(f"        {self.num_slots(specs)},")
            if name == "DatasetSnapshot":
                w("        has_binary_form=False,")
            w("    ),")
        w("}")
        w("")
        w("UNIONS: dict[str, UnionSpec] = {")
        for union in self.unions.values():
            variants = ", ".join(f"({union_tag(union.name, v)!r}, {v!r})" for v in union.members)
            w(f"    {union.name!r}: UnionSpec({union.name!r}, ({variants},)),")
        w("}")
        w("")
        enums = [d.name for d in self.decls.values() if d.kind == "enum"]
        w("ENUMS: dict[str, type[enum.IntEnum]] = {" + ", ".join(f"{e!r}: {e}" for e in enums) + "}")
        w("")
        w("CLASSES: dict[str, type] = {")
        for name in [*emitted_tables, "DatasetSnapshot"]:
            w(f"    {name!r}: {name},")
        w("}")
        w("")
        w("#: Union variant class -> (union name, YAML tag).")
        w("VARIANT_OF: dict[type, tuple[str, str]] = {")
        for union in self.unions.values():
            for v in union.members:
                w(f"    {v}: ({union.name!r}, {union_tag(union.name, v)!r}),")
        w("}")
        return "\n".join(out) + "\n"

    def render_table(self, w, name: str, specs: list[dict], schema: dict) -> None:
        w("")
        w("@dataclass(frozen=True, slots=True, kw_only=True)")
        w(f"class {name}:")
        desc = (schema.get("description") or name).strip().replace('"""', "'''").replace("\n", "\n    ")
        variant = self.variant_of.get(name)
        if variant:
            desc += f"\n\n    Variant ``{variant[1]}`` of union ``{variant[0]}``."
        w(f'    """{desc}"""')
        props = schema.get("properties", {})
        if not specs:
            w("")
            w("    pass")
        for s in sorted(specs, key=lambda s: not s["required"]):
            pdesc = props.get(s["yaml"], {}).get("description")
            w("")
            if pdesc:
                for line in pdesc.strip().splitlines():
                    w(f"    #: {line.strip()}")
            default = "" if s["required"] else " = None"
            w(f"    {s['name']}: {self.py_type(s)}{default}")
        w("")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed model is stale")
    args = parser.parse_args()
    text = Generator().render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(REPO)} is stale: run python tools/gen_model.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
