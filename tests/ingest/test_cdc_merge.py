"""The CDC merge strategies of ODF 0.37 (ChangelogStream, UpsertStream) against changelogs written by
hand from the spec, the bad input they refuse, and batch independence (hypothesis).

Rows are golden tuples as in test_merge: ``(op code, *user columns, event day)``, read in the output's
order, which is the offset order the merge promises.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odfproj.ingest.cdc import merge_changelog_stream, merge_upsert_stream
from odfproj.ingest.merge import MergeError
from odfproj.state.projections import current_state
from tests.ingest.test_merge import changelog, records, state

pytestmark = pytest.mark.spark

ROWS = "id INT, name STRING, v INT"


def cdc(spark, rows, op_type="STRING"):
    """A CDC batch: ``rows`` are ``(op, id, name, v, day)``; ``op`` as the source wrote it."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(rows, f"op {op_type}, {ROWS}, day STRING")
    return df.withColumn("event_time", F.to_timestamp(F.concat(F.lit("2024-01-"), "day"))).drop("day")


def stored(spark, rows):
    """The current state of a history of ``(op code, id, name, v, day)`` records."""
    return current_state(changelog(spark, rows), ["id"])


HISTORY = [("+A", 1, "x", 1, "01"), ("+A", 2, "y", 2, "01"), ("+A", 3, "z", 3, "01")]


# --- ChangelogStream -----------------------------------------------------------------------------


def test_a_changelog_stream_is_appended_as_it_is_key_by_key_in_the_batch_order(spark) -> None:
    batch = cdc(
        spark,
        [
            ("+A", 2, "y", 2, "01"),
            ("+A", 1, "x", 1, "01"),
            ("-C", 1, "x", 1, "01"),
            ("+C", 1, "x2", 10, "02"),
            ("-R", 2, "y", 2, "01"),
            ("+A", 2, "y-again", 3, "03"),
        ],
    )
    assert records(merge_changelog_stream(batch, None, ["id"])) == [
        ("+A", 1, "x", 1, "01"),
        ("-C", 1, "x", 1, "01"),
        ("+C", 1, "x2", 10, "02"),
        ("+A", 2, "y", 2, "01"),
        ("-R", 2, "y", 2, "01"),
        ("+A", 2, "y-again", 3, "03"),
    ]


def test_a_changelog_stream_continues_the_stored_state_and_takes_ops_as_numbers(spark) -> None:
    batch = cdc(
        spark,
        [(1, 2, "y", 2, "01"), (2, 1, "x", 1, "01"), (3, 1, "x2", 5, "04"), (0, 4, "w", 4, "04")],
        "INT",
    )
    out = merge_changelog_stream(batch, stored(spark, HISTORY), ["id"])
    assert records(out) == [
        ("-C", 1, "x", 1, "01"),
        ("+C", 1, "x2", 5, "04"),
        ("-R", 2, "y", 2, "01"),
        ("+A", 4, "w", 4, "04"),
    ]


@pytest.mark.parametrize(
    ("rows", "refusal"),
    [
        ([("+A", 1, "x", 1, "01")], r"record 1 \(id=1\): \+A of a key that already has a current row"),
        (
            [("+A", 5, "n", 5, "02"), ("-R", 9, "q", 9, "02")],
            r"record 2 \(id=9\): -R of a key with no current row",
        ),
        (
            [("-R", 1, "x", 99, "01")],
            r"record 1 \(id=1\): -R carries values other than the key's current row",
        ),
        ([("-R", 1, "x", 1, "02")], r"-R carries values other than"),  # the event time is data too
        (
            [("-C", 1, "x", 1, "01"), ("+A", 7, "s", 7, "02")],
            r"record 1 \(id=1\): -C without its \+C right after it",
        ),
        ([("+C", 1, "x", 3, "02")], r"record 1 \(id=1\): \+C without the -C before it"),
        ([("+A", 6, "u", 6, "02"), ("~X", 6, "u", 6, "02")], r"record 2 \(id=6\): unknown op ~X"),
        ([(None, 6, "u", 6, "02")], r"record 1 \(id=6\): a record without an op"),
    ],
)
def test_a_broken_changelog_is_refused_naming_the_record_and_its_key(spark, rows, refusal) -> None:
    with pytest.raises(MergeError, match=refusal):
        merge_changelog_stream(cdc(spark, rows), stored(spark, HISTORY), ["id"])


def test_a_refusal_names_the_first_three_records_and_counts_the_rest(spark) -> None:
    rows = [("-R", k, "gone", k, "02") for k in range(10, 15)]
    with pytest.raises(
        MergeError, match=r"record 1 \(id=10\).*record 2 \(id=11\).*record 3 \(id=12\).* \(and 2 more\)$"
    ):
        merge_changelog_stream(cdc(spark, rows), stored(spark, HISTORY), ["id"])


def test_a_changelog_stream_needs_its_op_column(spark) -> None:
    batch = cdc(spark, [("+A", 1, "x", 1, "01")]).drop("op")
    with pytest.raises(MergeError, match="needs an 'op' column"):
        merge_changelog_stream(batch, None, ["id"])


# --- UpsertStream --------------------------------------------------------------------------------


def test_an_upsert_stream_becomes_appends_corrections_and_retractions_against_the_state(spark) -> None:
    batch = cdc(
        spark,
        [
            ("+A", 1, "x", 1, "05"),  # unchanged values (a later event time alone is no change)
            ("+C", 2, "y2", 20, "05"),  # changed
            ("-R", 3, "ignored", None, "05"),  # a deletion: the -R carries the stored row
            ("-R", 9, "absent", None, "05"),  # deleting an absent key: nothing (idempotent)
            ("+A", 4, "w", 4, "05"),  # new
            ("+A", 5, "first", 5, "05"),
            ("+C", 5, "last wins", 6, "06"),
        ],
    )
    assert records(merge_upsert_stream(batch, stored(spark, HISTORY), ["id"])) == [
        ("-C", 2, "y", 2, "01"),
        ("+C", 2, "y2", 20, "05"),
        ("-R", 3, "z", 3, "01"),
        ("+A", 4, "w", 4, "05"),
        ("+A", 5, "last wins", 6, "06"),
    ]


def test_an_upsert_stream_without_an_op_column_is_all_upserts(spark) -> None:
    batch = cdc(spark, [("+A", 1, "x-new", 1, "05"), ("+A", 8, "h", 8, "05")]).drop("op")
    assert records(merge_upsert_stream(batch, stored(spark, HISTORY), ["id"])) == [
        ("-C", 1, "x", 1, "01"),
        ("+C", 1, "x-new", 1, "05"),
        ("+A", 8, "h", 8, "05"),
    ]


def test_a_correct_from_in_an_upsert_stream_is_refused(spark) -> None:
    with pytest.raises(MergeError, match=r"record 1 \(id=1\): unknown op -C \(an upsert stream has"):
        merge_upsert_stream(cdc(spark, [("-C", 1, "x", 1, "01")]), stored(spark, HISTORY), ["id"])


# --- batch independence --------------------------------------------------------------------------

#: Events over three keys: (key, None) deletes, (key, value) upserts.
EVENTS = st.lists(
    st.tuples(st.integers(1, 3), st.one_of(st.none(), st.integers(0, 2))), min_size=1, max_size=8
)


def _apply(spark, merge, batches):
    """Merge ``batches`` one after another, each against the state of the records so far; the final state."""
    log: list[tuple] = []
    for batch in batches:
        current = stored(spark, log) if log else None
        log.extend(records(merge(cdc(spark, batch), current, ["id"])))
    return state(changelog(spark, log), ["id"]) if log else []


def _changelog_of(events):
    """The valid ChangelogStream records of upserts/deletions: +A, -C/+C, -R, each carrying exact values."""
    live: dict[int, int] = {}
    rows = []
    for key, value in events:
        old = live.get(key)
        if value is None and old is not None:
            rows.append(("-R", key, f"k{key}", old, "01"))
            del live[key]
        elif value is not None and old is None:
            rows.append(("+A", key, f"k{key}", value, "01"))
            live[key] = value
        elif value is not None and old != value:
            rows += [("-C", key, f"k{key}", old, "01"), ("+C", key, f"k{key}", value, "01")]
            live[key] = value
    return rows


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS, cut=st.integers(0, 8))
def test_cdc_merges_are_batch_independent(spark, events, cut) -> None:
    """One batch or two (cut anywhere, a correction's pair kept together) give the same final state."""
    upserts = [("-R" if v is None else "+A", k, f"k{k}", v, "01") for k, v in events]
    at = min(cut, len(upserts))
    assert _apply(spark, merge_upsert_stream, [upserts]) == _apply(
        spark, merge_upsert_stream, [upserts[:at], upserts[at:]] if 0 < at < len(upserts) else [upserts]
    )

    log = _changelog_of(events)
    if not log:
        return
    at = min(cut, len(log))
    if 0 < at < len(log) and log[at - 1][0] == "-C":
        at += 1  # a -C and its +C come in one batch
    whole = _apply(spark, merge_changelog_stream, [log])
    split = _apply(spark, merge_changelog_stream, [log[:at], log[at:]] if 0 < at < len(log) else [log])
    assert whole == split == sorted((k, f"k{k}", v, "01") for k, v in _final(events).items())


def _final(events):
    live: dict[int, int] = {}
    for key, value in events:
        if value is None:
            live.pop(key, None)
        else:
            live[key] = value
    return live
