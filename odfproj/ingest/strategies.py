"""One entry for every merge strategy: which function turns a batch into records, by the strategy's kind.

The strategies live in :mod:`odfproj.ingest.merge` (Append, Ledger, Snapshot and their shared rules)
and :mod:`odfproj.ingest.cdc` (ChangelogStream and UpsertStream, built on those rules); this module
only chooses, so that neither of them has to import the other's callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from odfproj.ingest.cdc import RecordOrigin, merge_changelog_stream, merge_upsert_stream
from odfproj.ingest.merge import MergeError, _check_history_has, merge_append, merge_ledger, merge_snapshot
from odfproj.odf import model
from odfproj.state.projections import current_state

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["merge"]


def merge(
    strategy: model.MergeStrategy,
    batch: DataFrame,
    history: DataFrame | None,
    *,
    compare_event_time: bool = False,
    state: DataFrame | None = None,
    check_unique: bool = True,
    origin: RecordOrigin | None = None,
) -> DataFrame:
    """The records ``strategy`` appends for ``batch`` given ``history`` (the contract: :mod:`odfproj.ingest.merge`).

    ``state``: the current state, when the caller has it (used by Snapshot instead of ``history``).
    ``check_unique``: whether a first Snapshot checks its keys itself (:func:`~odfproj.ingest.merge.merge_snapshot`).
    ``origin``: where the batch's records come from, for the CDC merges' refusals (:class:`~odfproj.ingest.cdc.RecordOrigin`).
    """
    match strategy:
        case model.MergeStrategyAppend():
            return merge_append(batch)
        case model.MergeStrategyLedger(primary_key=primary_key):
            return merge_ledger(batch, history, primary_key)
        case model.MergeStrategySnapshot(primary_key=primary_key, compare_columns=compare_columns):
            return merge_snapshot(
                batch,
                history,
                primary_key,
                compare_columns,
                compare_event_time=compare_event_time,
                state=state,
                check_unique=check_unique,
            )
        case model.MergeStrategyChangelogStream(primary_key=primary_key):
            return merge_changelog_stream(
                batch,
                _state_of(state, history, primary_key),
                primary_key,
                compare_event_time=compare_event_time,
                origin=origin,
            )
        case model.MergeStrategyUpsertStream(primary_key=primary_key):
            return merge_upsert_stream(
                batch,
                _state_of(state, history, primary_key),
                primary_key,
                compare_event_time=compare_event_time,
                origin=origin,
            )
        case _:
            raise MergeError(f"merge strategy {type(strategy).__name__} is not supported yet")


def _state_of(
    state: DataFrame | None, history: DataFrame | None, primary_key: Sequence[str]
) -> DataFrame | None:
    """The current state the caller passed, else the one ``history`` ends in; ``None`` before any data."""
    if state is not None or history is None:
        return state
    _check_history_has(history, primary_key)
    return current_state(history, primary_key)
