"""Schema changes as typed operations, each knowing whether ODF's evolution rules allow it.

ODF (Schema Evolution) lets a dataset's data schema only *grow*: old data must stay readable under the
new schema, so columns may be added but never removed, renamed or retyped, and a nullable column may
not become NOT NULL (old rows may hold nulls). Every place that judges a schema change (the chain
validator, the planner, ingest and transforms) asks this module, so plan and run give the same answer
with the same words.

**The name rule.** A column is identified by its exact name, case included: Arrow, Parquet and the
``SetDataSchema`` all store names case-sensitively, so ``total`` and ``Total`` are two different
names, and a change of case is a rename (not additive). Spark, on the other hand, resolves names
case-insensitively, so a query could not tell ``total`` and ``Total`` apart: a new column that equals
an existing one ignoring case is refused too. :func:`same_name_ignoring_case` is that comparison.

Two views of a change:

- :func:`diff_schemas` compares two stored layouts (``SetDataSchema`` after ``SetDataSchema``):
  positions and nullability matter, new columns may only come at the end.
- :func:`diff_columns` compares the columns new data or a new query brings with the stored schema they
  are conformed to: ingest and transforms lay data out in the stored column order and keep the stored
  nullability, so only names and types matter there, and a column the data lacks is a removal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

__all__ = [
    "AddColumn",
    "ChangeNullability",
    "DropColumn",
    "MoveColumn",
    "RenameColumn",
    "RetypeColumn",
    "SchemaDiff",
    "SchemaOp",
    "diff_columns",
    "diff_schemas",
    "nullable_throughout",
    "same_name_ignoring_case",
]


def same_name_ignoring_case(a: str, b: str) -> bool:
    """Whether two column names would resolve to the same column in a case-insensitive engine."""
    return a.casefold() == b.casefold()


@dataclass(frozen=True)
class AddColumn:
    """A new column; additive unless its name differs from an existing column's only in case."""

    name: str
    type: pa.DataType
    #: The existing column whose name equals this one's ignoring case, if any.
    clashes_with: str | None = None

    @property
    def additive(self) -> bool:
        return self.clashes_with is None

    def describe(self) -> str:
        if self.clashes_with is not None:
            return (
                f"adds column {self.name!r}, whose name differs from column {self.clashes_with!r} only in "
                "case (Spark resolves names case-insensitively, so a query could not tell them apart)"
            )
        return f"adds column {self.name!r} ({self.type})"


class _Breaking:
    """An operation old data does not survive: never additive."""

    additive = False


@dataclass(frozen=True)
class DropColumn(_Breaking):
    """An old column the new schema lacks (a rename to an unrelated name looks the same)."""

    name: str

    def describe(self) -> str:
        return f"removes or renames column {self.name!r}"


@dataclass(frozen=True)
class RenameColumn(_Breaking):
    """A column whose name changed only in case: still a rename, since names are case-sensitive."""

    old: str
    new: str

    def describe(self) -> str:
        return (
            f"renames column {self.old!r} to {self.new!r} (a change of case is a rename: column names "
            "are case-sensitive in ODF data)"
        )


@dataclass(frozen=True)
class RetypeColumn(_Breaking):
    """A column whose type changed (nested nullability counts only in a stored layout)."""

    name: str
    old: pa.DataType
    new: pa.DataType

    def describe(self) -> str:
        return f"changes the type of column {self.name!r} from {self.old} to {self.new}"


@dataclass(frozen=True)
class ChangeNullability:
    """Widening (NOT NULL -> nullable) is additive; narrowing is not: old rows may hold nulls."""

    name: str
    nullable: bool

    @property
    def additive(self) -> bool:
        return self.nullable

    def describe(self) -> str:
        return f"makes column {self.name!r} {'nullable' if self.nullable else 'NOT NULL'}"


@dataclass(frozen=True)
class MoveColumn(_Breaking):
    """An old column at another position (positions count from 0, system columns included)."""

    name: str
    old_position: int
    new_position: int

    def describe(self) -> str:
        return f"moves column {self.name!r} from position {self.old_position} to {self.new_position}"


SchemaOp = AddColumn | DropColumn | RenameColumn | RetypeColumn | ChangeNullability | MoveColumn


@dataclass(frozen=True)
class SchemaDiff:
    """The operations that turn one schema into another, in the old schema's column order."""

    ops: tuple[SchemaOp, ...] = ()

    @property
    def additive(self) -> bool:
        """Whether ODF allows the change (no operation breaks old data)."""
        return all(op.additive for op in self.ops)

    @property
    def breaking(self) -> tuple[SchemaOp, ...]:
        return tuple(op for op in self.ops if not op.additive)

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops if isinstance(op, AddColumn))

    def problems(self) -> tuple[str, ...]:
        """One phrase per breaking operation (``"removes or renames column 'x'"``)."""
        return tuple(op.describe() for op in self.breaking)

    def __bool__(self) -> bool:
        return bool(self.ops)


def diff_columns(old: pa.Schema, new: pa.Schema) -> SchemaDiff:
    """What ``new`` changes in ``old`` when data is conformed to ``old`` by name.

    Order and nullability (nested nullability too) are left aside: conformed data takes both from
    ``old``, and an engine's nullability depends on its query plan rather than on the data.
    """
    return SchemaDiff(tuple(_by_name(old, new, same_type=_same_ignoring_nullability)))


def diff_schemas(old: pa.Schema, new: pa.Schema) -> SchemaDiff:
    """What ``new`` changes in the stored layout ``old``: names, types, positions and nullability."""
    # An added column inside the old ones shifts them: the moves below say which.
    ops = _by_name(old, new, same_type=lambda a, b: a.equals(b))
    new_positions = {name: i for i, name in enumerate(new.names)}
    for position, field in enumerate(old):
        moved_to = new_positions.get(field.name)
        if moved_to is None:
            continue
        if moved_to != position:
            ops.append(MoveColumn(field.name, position, moved_to))
        other = new.field(moved_to)
        if field.nullable != other.nullable:
            ops.append(ChangeNullability(field.name, other.nullable))
    return SchemaDiff(tuple(_in_old_order(ops, old)))


def _by_name(
    old: pa.Schema, new: pa.Schema, *, same_type: Callable[[pa.DataType, pa.DataType], bool]
) -> list[SchemaOp]:
    old_names, new_names = set(old.names), set(new.names)
    ops: list[SchemaOp] = []
    renamed_to: dict[str, str] = {}
    for field in old:
        if field.name in new_names:
            other = new.field(field.name)
            if not same_type(field.type, other.type):
                ops.append(RetypeColumn(field.name, field.type, other.type))
            continue
        case_twin = next(
            (n for n in new.names if n not in old_names and same_name_ignoring_case(n, field.name)), None
        )
        if case_twin is not None and case_twin not in renamed_to.values():
            renamed_to[field.name] = case_twin
            ops.append(RenameColumn(field.name, case_twin))
        else:
            ops.append(DropColumn(field.name))
    for field in new:
        if field.name in old_names or field.name in renamed_to.values():
            continue
        clash = next((n for n in old.names if same_name_ignoring_case(n, field.name)), None)
        ops.append(AddColumn(field.name, field.type, clash))
    return ops


def _in_old_order(ops: list[SchemaOp], old: pa.Schema) -> list[SchemaOp]:
    """Operations on old columns in the old column order, then the additions; stable otherwise."""
    positions = {name: i for i, name in enumerate(old.names)}

    def key(op: SchemaOp) -> int:
        name = op.old if isinstance(op, RenameColumn) else op.name
        return positions.get(name, len(positions)) if not isinstance(op, AddColumn) else len(positions)

    return sorted(ops, key=key)


def _same_ignoring_nullability(a: pa.DataType, b: pa.DataType) -> bool:
    return nullable_throughout(a).equals(nullable_throughout(b))


def nullable_throughout(t: pa.DataType) -> pa.DataType:
    """``t`` with every nested field nullable (list items, struct fields, map values).

    Data of a type that differs from ``t`` only in nested nullability can always be cast to it when
    ``nullable_throughout(t) == t``.
    """

    def field(f: pa.Field) -> pa.Field:
        return pa.field(f.name, nullable_throughout(f.type), nullable=True)

    if pa.types.is_map(t):
        return pa.map_(t.key_type, field(t.item_field))
    if pa.types.is_large_list(t):
        return pa.large_list(field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(field(t.value_field), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(field(t.value_field))
    if pa.types.is_struct(t):
        return pa.struct([field(t.field(i)) for i in range(t.num_fields)])
    return t
