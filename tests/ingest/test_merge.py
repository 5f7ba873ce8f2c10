"""Merge strategies against golden changelogs written from the spec (Merge Strategies; Retractions and
Corrections; RFC-015). Rows are read back as ``(op, *user columns, event day)`` in the frame's order,
which is the offset order the merge promises."""

from __future__ import annotations

import pytest

from odfproj.ingest.merge import MergeError, merge_append, merge_ledger, merge_snapshot
from odfproj.ingest.strategies import merge
from odfproj.odf import model
from odfproj.odf.data_schema import Op
from odfproj.state.projections import ChangelogError, current_state

pytestmark = pytest.mark.spark

CODES = {op.code: int(op) for op in Op}
ROWS = "id INT, name STRING, v INT"
LEDGER = "id INT, v STRING"


# --- helpers -------------------------------------------------------------------------------------


def frame(spark, rows, schema=ROWS):
    """A batch: ``rows`` are tuples of the user columns followed by the event day (``'01'`` = 2024-01-01)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(rows, f"{schema}, day STRING")
    return df.withColumn("event_time", F.to_timestamp(F.concat(F.lit("2024-01-"), "day"))).drop("day")


def changelog(spark, rows, schema=ROWS):
    """A history with the full common data schema: ``rows`` are ``(op code, *user columns, day)``, offsets 0..n-1."""
    from pyspark.sql import functions as F

    data = [(i, CODES[op], *rest) for i, (op, *rest) in enumerate(rows)]
    df = spark.createDataFrame(data, f"offset BIGINT, op INT, {schema}, day STRING")
    user = [c for c in df.columns if c not in ("offset", "op", "day")]
    return df.select(
        "offset",
        "op",
        F.to_timestamp(F.lit("2030-01-01")).alias("system_time"),
        F.to_timestamp(F.concat(F.lit("2024-01-"), "day")).alias("event_time"),
        *user,
    )


def records(df):
    """The merge output as golden tuples ``(op code, *user columns, day)``, read in the frame's order."""
    from pyspark.sql import functions as F

    assert df.columns[:2] == ["op", "event_time"]
    assert dict(df.dtypes)["op"] == "int"
    user = df.columns[2:]
    day = F.date_format("event_time", "dd").alias("day")
    return [(Op(r[0]).code, *r[1:]) for r in df.select("op", *user, day).collect()]


def _sorted(rows):
    return sorted((tuple(r) for r in rows), key=lambda t: [(v is not None, v) for v in t])


def state(history, key):
    from pyspark.sql import functions as F

    df = current_state(history, key)
    user = [c for c in df.columns if c != "event_time"]
    return _sorted(df.select(*user, F.date_format("event_time", "dd").alias("day")).collect())


def snapshot_steps(spark, steps, key, schema=ROWS, **options):
    """Runs consecutive snapshots, each against the changelog of the records so far; returns each step's records."""
    log, out = [], []
    for rows in steps:
        history = changelog(spark, log, schema) if log else None
        recs = records(merge_snapshot(frame(spark, rows, schema), history, key, **options))
        out.append(recs)
        log.extend(recs)
    return out


# --- Append --------------------------------------------------------------------------------------


def test_append_emits_every_row_as_append_stably_sorted_by_event_time(spark) -> None:
    batch = frame(spark, [(3, "z", 3, "02"), (2, "y", 2, "01"), (1, "x", 1, "02"), (3, "z", 3, "02")])
    assert records(merge_append(batch)) == [
        ("+A", 2, "y", 2, "01"),
        ("+A", 3, "z", 3, "02"),
        ("+A", 1, "x", 1, "02"),
        ("+A", 3, "z", 3, "02"),
    ]


def test_append_ignores_history(spark) -> None:
    history = changelog(spark, [("+A", 1, "x", 1, "01")])
    out = merge(model.MergeStrategyAppend(), frame(spark, [(1, "x", 1, "01")]), history)
    assert records(out) == [("+A", 1, "x", 1, "01")]


def test_output_columns_lead_with_op_and_event_time(spark) -> None:
    from pyspark.sql import functions as F

    batch = frame(spark, [(1, "x", 1, "01")]).select("event_time", "v", "id", "name")
    out = merge_append(batch.withColumn("z", F.lit(1)))
    assert out.columns == ["op", "event_time", "v", "id", "name", "z"]


# --- Ledger --------------------------------------------------------------------------------------


def test_ledger_dedupes_within_batch_first_by_event_time_then_input_order(spark) -> None:
    batch = frame(
        spark,
        [
            (2, "b", "02"),
            (1, "a", "03"),
            (1, "a-earlier", "01"),
            (3, "z-first", "02"),
            (3, "a-second", "02"),
            (None, "z-first", "02"),
            (None, "a-second", "02"),
        ],
        LEDGER,
    )
    assert records(merge_ledger(batch, None, ["id"])) == [
        ("+A", 1, "a-earlier", "01"),
        ("+A", 2, "b", "02"),
        ("+A", 3, "z-first", "02"),
        ("+A", None, "z-first", "02"),
    ]


def test_ledger_drops_keys_seen_in_history(spark) -> None:
    history = changelog(
        spark,
        [
            ("+A", 1, "a", "01"),
            ("+A", 2, "b", "01"),
            ("-R", 2, "b", "01"),  # retracted, but seen: a ledger never re-adds it
            ("+A", None, "n", "01"),
        ],
        LEDGER,
    )
    batch = frame(
        spark,
        [(1, "a", "01"), (2, "b", "01"), (5, "e", "03"), (None, "n", "01"), (4, "d", "02"), (4, "d2", "02")],
        LEDGER,
    )
    out = merge(model.MergeStrategyLedger(primary_key=("id",)), batch, history)
    assert records(out) == [("+A", 4, "d", "02"), ("+A", 5, "e", "03")]


def test_ledger_composite_key_with_nulls(spark) -> None:
    schema = "a STRING, b INT, v STRING"
    history = changelog(spark, [("+A", "x", None, "old", "01")], schema)
    batch = frame(
        spark, [("x", None, "again", "02"), (None, None, "new", "02"), ("x", 1, "new2", "02")], schema
    )
    assert records(merge_ledger(batch, history, ["a", "b"])) == [
        ("+A", None, None, "new", "02"),
        ("+A", "x", 1, "new2", "02"),
    ]


def test_ledger_errors(spark) -> None:
    batch = frame(spark, [(1, "a", "01")], LEDGER)
    with pytest.raises(MergeError, match="'nope' is not in the new data"):
        merge_ledger(batch, None, ["nope"])
    with pytest.raises(MergeError, match="at least one column"):
        merge_ledger(batch, None, [])
    with pytest.raises(MergeError, match="has no column 'id'"):
        merge_ledger(batch, changelog(spark, [("+A", "a", "01")], "v STRING"), ["id"])


# --- Snapshot ------------------------------------------------------------------------------------


def test_snapshot_inserts_updates_deletes_and_reinserts(spark) -> None:
    steps = [
        [(3, "c", 30, "01"), (1, "a", 10, "01"), (2, "b", 20, "01")],
        # 1 unchanged, 2 changed, 3 gone, 4 new
        [(4, "d", 40, "02"), (2, "b", 21, "02"), (1, "a", 10, "02")],
        # 3 comes back after its retraction
        [(1, "a", 10, "03"), (2, "b", 21, "03"), (3, "c", 33, "03"), (4, "d", 40, "03")],
        # everything vanishes: each -R carries the retracted row, its event time included
        [],
    ]
    out = snapshot_steps(spark, steps, ["id"])
    # The state after the third snapshot is that snapshot, each row with the event time it was last set at.
    after_third = changelog(spark, out[0] + out[1] + out[2])
    assert state(after_third, ["id"]) == [
        (1, "a", 10, "01"),
        (2, "b", 21, "02"),
        (3, "c", 33, "03"),
        (4, "d", 40, "02"),
    ]
    assert state(changelog(spark, [r for step in out for r in step]), ["id"]) == []
    assert out == [
        [("+A", 1, "a", 10, "01"), ("+A", 2, "b", 20, "01"), ("+A", 3, "c", 30, "01")],
        [
            ("-C", 2, "b", 20, "01"),
            ("+C", 2, "b", 21, "02"),
            ("-R", 3, "c", 30, "01"),
            ("+A", 4, "d", 40, "02"),
        ],
        [("+A", 3, "c", 33, "03")],
        [
            ("-R", 1, "a", 10, "01"),
            ("-R", 2, "b", 21, "02"),
            ("-R", 3, "c", 33, "03"),
            ("-R", 4, "d", 40, "02"),
        ],
    ]


def test_snapshot_nulls_in_keys_and_compared_columns(spark) -> None:
    schema = "k1 STRING, k2 INT, v STRING"
    steps = [
        [(None, 1, "x", "01"), ("a", None, "y", "01"), (None, None, "z", "01"), ("a", 1, None, "01")],
        [
            (None, 1, "x2", "02"),  # changed
            (None, None, "z", "02"),  # unchanged
            ("a", 1, None, "02"),  # unchanged: null equals null
            ("b", None, None, "02"),  # new; ("a", null) vanished
        ],
        [
            (None, 1, None, "03"),  # value -> null
            (None, None, "z", "03"),
            ("a", 1, "v", "03"),  # null -> value
            ("b", None, None, "03"),
        ],
    ]
    out = snapshot_steps(spark, steps, ["k1", "k2"], schema)
    assert out == [
        [
            ("+A", None, None, "z", "01"),
            ("+A", None, 1, "x", "01"),
            ("+A", "a", None, "y", "01"),
            ("+A", "a", 1, None, "01"),
        ],
        [
            ("-C", None, 1, "x", "01"),
            ("+C", None, 1, "x2", "02"),
            ("-R", "a", None, "y", "01"),
            ("+A", "b", None, None, "02"),
        ],
        [
            ("-C", None, 1, "x2", "02"),
            ("+C", None, 1, None, "03"),
            ("-C", "a", 1, None, "01"),
            ("+C", "a", 1, "v", "03"),
        ],
    ]


def test_snapshot_compare_columns_decide_alone(spark) -> None:
    schema = "id INT, name STRING, v INT, version INT"
    steps = [
        [(1, "a", 10, 1, "01"), (2, "b", 20, 1, "01")],
        [(1, "a-renamed", 11, 1, "02"), (2, "b", 25, 2, "02")],
    ]
    out = snapshot_steps(spark, steps, ["id"], schema, compare_columns=("version",))
    assert out[1] == [("-C", 2, "b", 20, 1, "01"), ("+C", 2, "b", 25, 2, "02")]


def test_snapshot_event_time_alone_is_no_change_unless_asked(spark) -> None:
    history = changelog(spark, [("+A", 1, "a", 10, "01")])
    later = frame(spark, [(1, "a", 10, "02")])
    assert records(merge_snapshot(later, history, ["id"])) == []
    corrected = [("-C", 1, "a", 10, "01"), ("+C", 1, "a", 10, "02")]
    assert records(merge_snapshot(later, history, ["id"], compare_event_time=True)) == corrected
    assert records(merge_snapshot(later, history, ["id"], ["event_time"])) == corrected


def test_snapshot_map_columns_compare_by_entries(spark) -> None:
    from pyspark.sql import functions as F

    def snap(pairs, day):
        base = spark.createDataFrame([(1, day)], "id INT, day STRING")
        entries = F.map_from_arrays(
            F.array(*[F.lit(k) for k, _ in pairs]), F.array(*[F.lit(v) for _, v in pairs])
        )
        return base.select(
            "id", entries.alias("tags"), F.to_timestamp(F.lit(f"2024-01-{day}")).alias("event_time")
        )

    history = snap([("a", 1), ("b", 2)], "01").select(
        F.lit(0).cast("bigint").alias("offset"),
        F.lit(int(Op.APPEND)).alias("op"),
        F.col("event_time").alias("system_time"),
        "*",
    )
    assert merge_snapshot(snap([("b", 2), ("a", 1)], "02"), history, ["id"]).count() == 0
    ops = [r.op for r in merge_snapshot(snap([("a", 1), ("b", 3)], "02"), history, ["id"]).collect()]
    assert ops == [int(Op.CORRECT_FROM), int(Op.CORRECT_TO)]


def test_snapshot_with_empty_history_frame_is_all_appends(spark) -> None:
    empty = changelog(spark, [])
    out = merge(model.MergeStrategySnapshot(primary_key=("id",)), frame(spark, [(2, "b", 2, "01")]), empty)
    assert records(out) == [("+A", 2, "b", 2, "01")]


def test_snapshot_duplicate_keys_are_an_error_naming_the_key(spark) -> None:
    batch = frame(spark, [(1, "a", 1, "01"), (1, "b", 2, "01"), (2, "c", 3, "01")])
    with pytest.raises(MergeError, match=r"primary key id=1 \(2 rows\)"):
        merge_snapshot(batch, None, ["id"])
    nulls = frame(spark, [(None, "a", 1, "01"), (None, "a", 1, "01")])
    with pytest.raises(MergeError, match=r"id=null"):
        merge_snapshot(nulls, None, ["id"])
    composite = frame(spark, [(1, "a", 1, "01"), (1, "a", 2, "01"), (1, "b", 2, "01")])
    with pytest.raises(MergeError, match=r"id=1, name='a' \(2 rows\)"):
        merge_snapshot(composite, None, ["id", "name"])


def test_snapshot_configuration_errors(spark) -> None:
    batch = frame(spark, [(1, "a", 1, "01")])
    history = changelog(spark, [("+A", 1, "a", 1, "01")])
    with pytest.raises(MergeError, match="compareColumns names 'nope'"):
        merge_snapshot(batch, history, ["id"], ["nope"])
    with pytest.raises(MergeError, match="compareColumns is empty"):
        merge_snapshot(batch, history, ["id"], [])
    with pytest.raises(MergeError, match="new columns extra"):
        merge_snapshot(batch.withColumn("extra", batch.v), history, ["id"])
    with pytest.raises(MergeError, match="missing columns name"):
        merge_snapshot(batch.drop("name"), history, ["id"])


def test_batch_with_system_columns_or_without_event_time_is_rejected(spark) -> None:
    batch = frame(spark, [(1, "a", 1, "01")])
    with pytest.raises(MergeError, match="system column \\('offset'\\)"):
        merge_append(batch.withColumn("offset", batch.id))
    with pytest.raises(MergeError, match="no 'event_time' column"):
        merge_append(batch.drop("event_time"))


def test_unknown_strategy_is_not_supported(spark) -> None:
    with pytest.raises(MergeError, match="not supported yet"):
        merge(object(), frame(spark, [(1, "a", 1, "01")]), None)  # type: ignore[arg-type]


# --- Determinism ---------------------------------------------------------------------------------


def test_same_inputs_give_the_same_records_in_the_same_order(spark) -> None:
    history = changelog(
        spark,
        [("+A", i, f"n{i}", i, "01") for i in range(20)] + [("-R", 3, "n3", 3, "01")],
    )
    rows = [(i, f"n{i}", i + (i % 3 == 0), "02") for i in range(5, 30)] + [(None, "null", 0, "02")]
    batch = frame(spark, rows)
    snapshot = model.MergeStrategySnapshot(primary_key=("id",))
    for strategy in (model.MergeStrategyAppend(), model.MergeStrategyLedger(primary_key=("id",)), snapshot):
        first = records(merge(strategy, batch, history))
        assert first
        if strategy is not snapshot:
            assert first == records(merge(strategy, batch, history))
    # Same snapshot again, its inputs partitioned and ordered differently: the order does not change.
    shuffled = frame(spark, list(reversed(rows))).repartition(3)
    assert records(merge(snapshot, shuffled, history.repartition(3))) == first


def test_output_is_sorted_across_partitions_and_numbers_offsets_in_order(spark) -> None:
    """The contract the caller relies on: ``number_rows`` gives offsets 0..n-1 in the merge's order."""
    from odfproj.engine.slices import number_rows

    history = changelog(spark, [("+A", i, "x", i, "01") for i in range(0, 40, 2)]).repartition(3)
    batch = frame(spark, [(i, "y" if i % 4 == 0 else "x", i, "02") for i in range(30, 0, -1)]).repartition(3)
    out = merge_snapshot(batch, history, ["id"])
    numbered = number_rows(out, "offset", 0)
    assert numbered.count == out.count()
    rows = numbered.frame.select("offset", "op", "id").collect()
    assert sorted(r.offset for r in rows) == list(range(len(rows)))
    keys = [(r.id, r.op) for r in sorted(rows, key=lambda r: r.offset)]
    assert keys == sorted(keys)
    assert {r.op for r in rows} == {int(op) for op in Op}


# --- current_state -------------------------------------------------------------------------------

HISTORY = [
    ("+A", 1, "a", 10, "01"),
    ("+A", 2, "b", 20, "01"),
    ("+A", 3, "c", 30, "01"),
    ("-C", 1, "a", 10, "01"),
    ("+C", 1, "a", 11, "02"),
    ("-R", 2, "b", 20, "01"),
    ("-C", 3, "c", 30, "01"),
    ("+C", 5, "c", 30, "02"),  # a correction that moves the row to another key
    ("+A", 2, "b", 22, "03"),  # re-inserted after its retraction
    ("+A", None, "n", 0, "03"),
    ("-C", 1, "a", 11, "02"),
    ("+C", 1, "a", 12, "04"),
    ("+A", 6, "f", 60, "04"),
    ("-R", 6, "f", 60, "04"),
]
STATE = [(None, "n", 0, "03"), (1, "a", 12, "04"), (2, "b", 22, "03"), (5, "c", 30, "02")]


def test_current_state_applies_retractions_and_corrections_in_offset_order(spark) -> None:
    history = changelog(spark, HISTORY)
    assert current_state(history, ["id"]).columns == ["event_time", "id", "name", "v"]
    assert state(history, ["id"]) == STATE
    # Physical row order does not matter, only offsets.
    assert state(history.orderBy(history["offset"].desc()).repartition(3), ["id"]) == STATE


def test_current_state_needs_offset_op_and_key(spark) -> None:
    history = changelog(spark, HISTORY)
    with pytest.raises(ChangelogError, match="no column 'op'"):
        current_state(history.drop("op"), ["id"])
    with pytest.raises(ChangelogError, match="no column 'nope'"):
        current_state(history, ["nope"])
