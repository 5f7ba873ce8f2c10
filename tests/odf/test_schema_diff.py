"""The one schema-evolution rule: typed operations, which of them are additive, and the name rule."""

from __future__ import annotations

import pyarrow as pa
import pytest

from odfproj.odf.schema_diff import (
    AddColumn,
    ChangeNullability,
    DropColumn,
    MoveColumn,
    RenameColumn,
    RetypeColumn,
    diff_columns,
    diff_schemas,
)

BASE = pa.schema([pa.field("id", pa.int64(), nullable=False), ("city", pa.string()), ("n", pa.int64())])


def _with(*fields: pa.Field | tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema(list(fields))


@pytest.mark.parametrize(
    ("new", "ops", "additive"),
    [
        (BASE, (), True),
        (BASE.append(pa.field("total", pa.float64())), (AddColumn("total", pa.float64()),), True),
        (_with(BASE.field(0), BASE.field(1)), (DropColumn("n"),), False),
        (_with(BASE.field(0), BASE.field(1), ("N", pa.int64())), (RenameColumn("n", "N"),), False),
        (
            _with(BASE.field(0), BASE.field(1), ("n", pa.int32())),
            (RetypeColumn("n", pa.int64(), pa.int32()),),
            False,
        ),
        (BASE.append(pa.field("City", pa.string())), (AddColumn("City", pa.string(), "city"),), False),
    ],
    ids=["same", "added", "dropped", "case-only-rename", "retyped", "case-clash"],
)
def test_operations_and_whether_they_are_additive(new, ops, additive) -> None:
    for diff in (diff_columns(BASE, new), diff_schemas(BASE, new)):
        assert diff.ops == ops
        assert diff.additive is additive


def test_a_stored_layout_also_fixes_positions_and_may_only_widen_nullability() -> None:
    moved = _with(BASE.field(0), BASE.field(2), BASE.field(1))
    assert diff_schemas(BASE, moved).ops == (MoveColumn("city", 1, 2), MoveColumn("n", 2, 1))
    assert diff_columns(BASE, moved).ops == ()  # conformed data takes the stored order
    widened = BASE.set(0, BASE.field(0).with_nullable(True))
    assert diff_schemas(BASE, widened).ops == (ChangeNullability("id", True),)
    assert diff_schemas(BASE, widened).additive
    narrowed = diff_schemas(widened, BASE)
    assert not narrowed.additive
    assert narrowed.problems() == ("makes column 'id' NOT NULL",)


def test_nested_nullability_matters_to_a_layout_but_not_to_conformed_data() -> None:
    old = _with(("tags", pa.list_(pa.field("item", pa.string(), nullable=True))))
    new = _with(("tags", pa.list_(pa.field("item", pa.string(), nullable=False))))
    assert diff_columns(old, new).ops == ()
    assert isinstance(diff_schemas(old, new).ops[0], RetypeColumn)


def test_every_breaking_operation_says_what_it_does_in_one_phrase() -> None:
    new = _with(("ID", pa.int64()), ("n", pa.string()), ("city", pa.string()))
    assert diff_columns(BASE, new).problems() == (
        "renames column 'id' to 'ID' (a change of case is a rename: column names are case-sensitive "
        "in ODF data)",
        "changes the type of column 'n' from int64 to string",
    )
