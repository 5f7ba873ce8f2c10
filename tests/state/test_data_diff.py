"""The data diff of two states (issue 32, point 2), against differences counted by hand."""

from __future__ import annotations

import pytest

from odfproj.state.data_diff import ChangedRow, SchemaChange, diff_states

pytestmark = pytest.mark.spark


def frame(spark, rows, schema="id INT, name STRING, v INT"):
    return spark.createDataFrame(rows, schema)


def test_by_key_rows_are_added_removed_or_changed_and_the_changed_columns_are_named(spark) -> None:
    before = frame(spark, [(1, "a", 1), (2, "b", 2), (3, "c", 3), (5, None, 5)])
    after = frame(spark, [(1, "a", 1), (2, "B", 2), (4, "d", 4), (5, None, 6)])
    diff = diff_states(before, after, ["id"])
    assert (diff.rows_before, diff.rows_after, diff.added, diff.removed, diff.changed) == (4, 4, 1, 1, 2)
    assert diff.added_sample == ({"id": 4, "name": "d", "v": 4},)
    assert diff.removed_sample == ({"id": 3, "name": "c", "v": 3},)
    assert diff.changed_sample == (
        ChangedRow({"id": 2}, {"id": 2, "name": "b", "v": 2}, {"id": 2, "name": "B", "v": 2}, ("name",)),
        ChangedRow({"id": 5}, {"id": 5, "name": None, "v": 5}, {"id": 5, "name": None, "v": 6}, ("v",)),
    )
    assert diff.schema_changes == () and diff.differs


def test_without_a_key_rows_compare_as_multisets(spark) -> None:
    before = frame(spark, [(1, "x", 1), (1, "x", 1), (2, "y", 2)])
    after = frame(spark, [(1, "x", 1), (2, "y", 2), (2, "y", 2), (3, "z", 3)])
    diff = diff_states(before, after)
    assert (diff.rows_before, diff.rows_after, diff.added, diff.removed, diff.changed) == (3, 4, 2, 1, 0)
    assert diff.added_sample == ({"id": 2, "name": "y", "v": 2}, {"id": 3, "name": "z", "v": 3})
    assert diff.removed_sample == ({"id": 1, "name": "x", "v": 1},)


def test_identical_states_do_not_differ(spark) -> None:
    rows = [(1, "a", 1), (2, None, None)]
    assert not diff_states(frame(spark, rows), frame(spark, rows), ["id"]).differs
    assert not diff_states(frame(spark, rows), frame(spark, rows)).differs


def test_schema_changes_are_reported_and_rows_compare_on_the_shared_columns(spark) -> None:
    before = frame(spark, [(1, "a", 1), (2, "b", 2)])
    after = frame(spark, [(1, "1", 9), (2, "b", 9)], "id INT, v STRING, extra INT")
    diff = diff_states(before, after, ["id"])
    assert diff.schema_changes == (
        SchemaChange("v", "int", "string"),
        SchemaChange("extra", None, "int"),
        SchemaChange("name", "string", None),
    )
    # v compares as text: '1' = 1 for id 1; id 2 holds 'b' against 2.
    assert (diff.added, diff.removed, diff.changed) == (0, 0, 1)
    assert diff.changed_sample[0].key == {"id": 2} and diff.changed_sample[0].columns == ("v",)


def test_a_side_without_data_makes_every_row_added_or_removed(spark) -> None:
    rows = frame(spark, [(2, "b", 2), (1, "a", 1)])
    new = diff_states(None, rows, ["id"])
    assert (new.rows_before, new.rows_after, new.added, new.removed) == (0, 2, 2, 0)
    assert [r["id"] for r in new.added_sample] == [1, 2]
    gone = diff_states(rows, None, ["id"])
    assert (gone.rows_before, gone.rows_after, gone.added, gone.removed) == (2, 0, 0, 2)


def test_samples_are_bounded_and_the_first_by_key(spark) -> None:
    before = frame(spark, [(0, "z", 0)])
    after = frame(spark, [(0, "z", 0)] + [(i, "n", i) for i in range(20, 0, -1)])
    diff = diff_states(before, after, ["id"], sample=3)
    assert diff.added == 20
    assert [r["id"] for r in diff.added_sample] == [1, 2, 3]
