"""New data's schema laid out as the dataset's, under the one schema rule (odf.schema_diff); no JVM.

The rows themselves are cast in Spark (``pipeline._laid_out``); here only the schema decision is tested.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from odfproj.ingest.errors import IngestError
from odfproj.ingest.pipeline import _fit_schema

STORED = pa.schema([pa.field("id", pa.int64(), nullable=False), ("city", pa.string())])


def test_columns_keep_the_stored_order_missing_ones_are_null_and_new_ones_are_added_last() -> None:
    data = pa.schema([("extra", pa.float64()), ("id", pa.int64())])
    out, new_schema = _fit_schema(data, STORED, "w")
    assert out.names == ["id", "city", "extra"] and out.field("city").nullable
    assert new_schema == out


def test_an_unchanged_schema_commits_no_new_schema() -> None:
    out, new_schema = _fit_schema(pa.schema([("city", pa.string()), ("id", pa.int64())]), STORED, "w")
    assert out == STORED and new_schema is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            pa.schema([("id", pa.int64()), ("City", pa.string())]),
            "renames column 'city' to 'City' (a change of case",
        ),
        (
            pa.schema([("id", pa.int64()), ("city", pa.string()), ("CITY", pa.string())]),
            "adds column 'CITY', whose name differs",
        ),
        (pa.schema([("id", pa.int32())]), "column 'id' is int32 in the new data but int64"),
        (pa.schema([("city", pa.string())]), "has no column 'id', which the dataset requires"),
    ],
    ids=["case-only-rename", "case-clash", "retyped", "required-missing"],
)
def test_what_the_rule_refuses_is_refused_with_its_reason(data: pa.Schema, message: str) -> None:
    with pytest.raises(IngestError, match=message.replace("(", r"\(")):
        _fit_schema(data, STORED, "w")


def test_nested_nullability_is_cast_only_into_a_type_that_allows_nulls() -> None:
    narrow = pa.list_(pa.field("item", pa.string(), nullable=False))
    wide = pa.list_(pa.string())
    out, new_schema = _fit_schema(pa.schema([("tags", narrow)]), pa.schema([("tags", wide)]), "w")
    assert out.field("tags").type == wide and new_schema is None
    with pytest.raises(IngestError, match="allows no nulls inside it"):
        _fit_schema(pa.schema([("tags", wide)]), pa.schema([("tags", narrow)]), "w")
