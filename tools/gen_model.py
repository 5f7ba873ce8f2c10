#!/usr/bin/env python3
"""Generate ``odfproj/odf/model.py`` from the ODF FlatBuffers schema and JSON schemas.

The .fbs gives the types, field order, field ids, scalar widths and defaults (everything the binary
layout depends on); the JSON schemas give what the .fbs cannot say: which ``[ubyte]`` is a multihash,
a dataset id or opaque bytes, which fields are required, and the descriptions that become docstrings.

One model serves every ODF version from 0.35 to 0.39: the types come from the newest schema
(``spec/odf-0.39``), restricted to every 0.35 type and what those reach, and the generator proves
that it is a superset of 0.35 (``spec/odf-0.35``) in the binary form: every 0.35 table is a prefix of
its newer self (same field ids and wire types), every 0.35 union and enum a prefix of its newer self.
A 0.35 object therefore encodes to the same bytes as before, and a newer block decodes into the same
classes. Two fields kept their slot but changed name in 0.38 (``ddlSchema`` of the read steps,
``rawArrowSchema`` of ``SetDataSchema``, both ``schema`` in 0.35): the model keeps the 0.35 names, and
the newer ``schema`` fields that took those names are named after their type (``data_schema``). A
field is required only when every version requires it.

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
SPEC = REPO / "spec" / "odf-0.39"
LEGACY_SPEC = REPO / "spec" / "odf-0.35"
#: The JSON schema folders of the newest spec that describe the types the model holds.
SCHEMA_DIRS = ("data", "dataset", "engine", "legacy", "source")
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
    """A strict parser for the subset of the FlatBuffers IDL that opendatafabric.fbs uses.

    A declaration line it does not understand stops the generator: a silently skipped field would
    shift every later field id.
    """
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'attribute\s+"[^"]*"\s*;', "", text)
    decls: dict[str, FbsDecl] = {}
    for m in re.finditer(r"(table|struct|union|enum)\s+(\w+)\s*(?::\s*(\w+))?\s*\{(.*?)\}", text, re.S):
        kind, name, base, body = m.group(1), m.group(2), m.group(3), m.group(4)
        decl = FbsDecl(kind, name, base=base)
        if kind in ("table", "struct"):
            for stmt in (x.strip() for x in body.split(";")):
                if not stmt:
                    continue
                fm = re.fullmatch(
                    r"(\w+)\s*:\s*(\[?)\s*(\w+)\s*\]?\s*(?:=\s*([\w.\-]+))?\s*(?:\((.*)\))?", stmt, re.S
                )
                if fm is None:
                    raise SystemExit(f"{name}: cannot parse field {stmt!r}")
                attrs = dict(
                    (a.split(":")[0].strip(), a.partition(":")[2].strip())
                    for a in (fm.group(5) or "").split(",")
                )
                if "id" in attrs and int(attrs["id"]) != len(decl.fields):
                    raise SystemExit(f"{name}.{fm.group(1)}: explicit ids out of declaration order")
                decl.fields.append(FbsField(fm.group(1), fm.group(3), bool(fm.group(2)), fm.group(4)))
        else:
            decl.members = [x.strip() for x in body.split(",") if x.strip()]
        decls[name] = decl
    return decls


def load_json_schemas(spec: Path, dirs: tuple[str, ...] | None = None) -> dict[str, dict]:
    schemas: dict[str, dict] = {}
    for path in sorted((spec / "schemas").rglob("*.json")):
        if dirs is not None and path.relative_to(spec / "schemas").parts[0] not in dirs:
            continue
        if path.stem in schemas:
            raise SystemExit(f"two JSON schemas named {path.stem}")
        schemas[path.stem] = json.loads(path.read_text())
    return schemas


def snake(camel_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel_name).lower()


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def union_tag(union: str, variant: str) -> str:
    return variant[len(union) :] if variant.startswith(union) and variant != union else variant


class Generator:
    def __init__(self) -> None:
        newest = parse_fbs((SPEC / "opendatafabric.fbs").read_text())
        self.legacy = parse_fbs((LEGACY_SPEC / "opendatafabric.fbs").read_text())
        self.decls = self.reachable(newest, roots=self.legacy)
        self.json = load_json_schemas(SPEC, SCHEMA_DIRS)
        self.legacy_json = load_json_schemas(LEGACY_SPEC)
        self.unions = {n: d for n, d in self.decls.items() if d.kind == "union"}
        self.variant_of: dict[str, tuple[str, str]] = {}
        for u in self.unions.values():
            for v in u.members:
                self.variant_of[v] = (u.name, union_tag(u.name, v))
        self.renames = self.check_superset()

    @staticmethod
    def reachable(decls: dict[str, FbsDecl], roots: dict[str, FbsDecl]) -> dict[str, FbsDecl]:
        """The newest declarations of every 0.35 type and of everything they refer to, in .fbs order."""
        seen: set[str] = set()
        todo = [name for name in roots if name in decls]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            decl = decls[name]
            todo += [f.type for f in decl.fields if f.type in decls]
            todo += [m for m in decl.members if m in decls]
        return {name: decl for name, decl in decls.items() if name in seen}

    def check_superset(self) -> dict[tuple[str, str], str]:
        """Prove the newest schema writes every 0.35 object as 0.35 did; the field renames it implies.

        A 0.35 field whose slot the newer schema renamed keeps its 0.35 name; a newer field that took
        that name is named after its type.
        """
        renames: dict[tuple[str, str], str] = {}
        for name, old in self.legacy.items():
            new = self.decls.get(name)
            if new is None or new.kind != old.kind:
                raise SystemExit(f"{name}: a 0.35 {old.kind} missing from the newest schema")
            if old.kind == "enum" and (
                old.base != new.base or new.members[: len(old.members)] != old.members
            ):
                raise SystemExit(f"enum {name} is not a superset of its 0.35 form")
            if old.kind == "union" and new.members[: len(old.members)] != old.members:
                raise SystemExit(f"union {name} is not a superset of its 0.35 form")
            if old.kind not in ("table", "struct"):
                continue
            if old.kind == "struct" and len(new.fields) != len(old.fields):
                raise SystemExit(f"struct {name} changed size")
            for was, now in zip(old.fields, new.fields[: len(old.fields)], strict=False):
                if (was.type, was.vector, was.default) != (now.type, now.vector, now.default):
                    raise SystemExit(f"{name}.{now.name}: wire type changed since 0.35 ({was.name})")
                if was.name != now.name:
                    renames[(name, now.name)] = was.name
            if len(new.fields) < len(old.fields):
                raise SystemExit(f"{name}: fields removed since 0.35")
            kept = {was.name for was in old.fields}
            for now in new.fields[len(old.fields) :]:
                if now.name in kept:
                    renames[(name, now.name)] = snake(now.type)
        return renames

    # -- JSON schema lookups ------------------------------------------------------------------
    def json_for(self, table: str, schemas: dict[str, dict] | None = None) -> dict | None:
        schemas = self.json if schemas is None else schemas
        if table in self.variant_of:
            union, tag = self.variant_of[table]
            if union == "MetadataEvent":
                return schemas.get(table)
            return schemas.get(union, {}).get("$defs", {}).get(tag)
        return schemas.get(table)

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
        legacy_decl = self.legacy.get(table)
        legacy_fields = {f.name for f in legacy_decl.fields} if legacy_decl else set()
        legacy_required = set((self.json_for(table, self.legacy_json) or {}).get("required", []))
        specs: list[dict] = []
        slot = 0
        for f in decl.fields:
            json_name = camel(f.name)
            name = self.renames.get((table, f.name), f.name)
            prop = props.get(json_name, {})
            if props and json_name not in props:
                raise SystemExit(f"{table}.{f.name}: no property {json_name!r} in the JSON schema")
            fmt = prop.get("format") or prop.get("items", {}).get("format")
            is_required = json_name in required and (
                name not in legacy_fields or camel(name) in legacy_required
            )
            spec: dict = {
                "name": name,
                "yaml": camel(name),
                "json_name": json_name,
                "vector": f.vector,
                "required": is_required,
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
        w('"""The ODF metadata model of versions 0.35 to 0.39: every 0.35 type in its newest form.')
        w("")
        w(
            "A superset of 0.35 in the binary form (see tools/gen_model.py): 0.35 objects encode as 0.35 wrote them."
        )
        w(
            "GENERATED by tools/gen_model.py from spec/odf-0.39 and spec/odf-0.35 -- do not edit; regenerate instead."
        )
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
        w("#: The scalar kind each enum is written as.")
        kinds = {e: SCALAR_ALIASES.get(self.decls[e].base or "int32", self.decls[e].base) for e in enums}
        w("ENUM_KINDS: dict[str, str] = {" + ", ".join(f"{e!r}: {k!r}" for e, k in kinds.items()) + "}")
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
        desc = (schema.get("description") or name).strip().replace('"""', "'''")
        desc = (
            "\n".join(line.rstrip() for line in desc.split("\n"))
            .replace("\n", "\n    ")
            .replace("\n    \n", "\n\n")
        )
        variant = self.variant_of.get(name)
        if variant:
            desc += f"\n\n    Variant ``{variant[1]}`` of union ``{variant[0]}``."
        w(f'    """{desc}"""')
        props = schema.get("properties", {})
        if not specs:
            w("")
            w("    pass")
        for s in sorted(specs, key=lambda s: not s["required"]):
            pdesc = props.get(s.get("json_name", s["yaml"]), {}).get("description")
            w("")
            if pdesc:
                for line in pdesc.strip().splitlines():
                    w(f"    #: {line.strip()}".rstrip())
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
