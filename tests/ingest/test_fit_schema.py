"""New data laid out as the dataset's schema, under the one schema rule (odf.schema_diff); no JVM."""

from __future__ import annotations

import pyarrow as pa
import pytest

from odfproj.ingest.errors import IngestError
from odfproj.ingest.pipeline import _fit_schema

STORED = pa.schema([pa.field("id", pa.int64(), nullable=False), ("city", pa.string())])


def test_columns_keep_the_stored_order_missing_ones_are_null_and_new_ones_are_added_last() -> None:
    data = pa.table({"extra": [1.5], "id": [7]})
    out, new_schema = _fit_schema(data, STORED, "w")
    assert out.column_names == ["id", "city", "extra"] and out.column("city").null_count == 1
    assert new_schema == out.schema


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (pa.table({"id": [1], "City": ["Oslo"]}), "renames column 'city' to 'City' (a change of case"),
        (pa.table({"id": [1], "city": ["x"], "CITY": ["y"]}), "adds column 'CITY', whose name differs"),
        (pa.table({"id": pa.array([1], pa.int32())}), "column 'id' is int32 in the new data but int64"),
        (pa.table({"city": ["x"]}), "has no column 'id', which the dataset requires"),
    ],
    ids=["case-only-rename", "case-clash", "retyped", "required-missing"],
)
def test_what_the_rule_refuses_is_refused_with_its_reason(data: pa.Table, message: str) -> None:
    with pytest.raises(IngestError, match=message.replace("(", r"\(")):
        _fit_schema(data, STORED, "w")


def test_nested_nullability_is_cast_only_into_a_type_that_allows_nulls() -> None:
    narrow = pa.list_(pa.field("item", pa.string(), nullable=False))
    wide = pa.list_(pa.string())
    out, new_schema = _fit_schema(
        pa.table({"tags": pa.array([["a"]], narrow)}), pa.schema([("tags", wide)]), "w"
    )
    assert out.schema.field("tags").type == wide and new_schema is None
    with pytest.raises(IngestError, match="allows no nulls inside it"):
        _fit_schema(pa.table({"tags": pa.array([["a", None]], wide)}), pa.schema([("tags", narrow)]), "w")
