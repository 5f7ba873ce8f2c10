"""The join path: a derivative update over its inputs' new records and, where a join needs them, the
other inputs' rows they meet; never the derivative's own records.

A ``join`` query (:mod:`odfproj.transform.modes`: inner, left and right equi-joins of stateless
pipelines, no input on both sides of a join) is *linear in each input taken alone*: with the other
inputs fixed, every row of the input contributes its output rows independently of its other rows.
(A left join is linear in its preserved side only: whether a left row is padded with nulls depends on
the whole right side, so the right side's inputs are the mode's ``fixed_inputs``.) For inputs
``A_1..A_n`` that change by signed multisets ``dA_i`` the difference telescopes::

    Q(A_1', ..., A_n') - Q(A_1, ..., A_n)
        = sum over i of  Q(A_1', ..., A_{i-1}', dA_i, A_{i+1}, ..., A_n)

(primes: the states after the new records). A term whose input did not change is zero, so only the
inputs with new records run one; when only the fact table grows, the update is ``Q(d events, dims)``
and reads the events' new records and the dimension's state, never the events' history. Each
``dA_i`` runs as two queries, over the rows it adds and the rows it withdraws (as the stateless path
does), and the two multisets end in the same :func:`odfproj.transform.incremental.stateless.signed_changes` as
every incremental path: the block is the full path's, record for record, so ``verify --reproduce``
reproduces it and the result does not depend on how the inputs' records were split into blocks.

With the derivative's join index (:mod:`odfproj.transform.incremental.join_sides`), a term reads of an input
joined to the changed one by an equality only the rows whose join key occurs in the change; the
other inputs' states come from their changelogs, as without it.

:func:`join_delta` returns the signed rows (added, withdrawn) before netting, so a grouped
aggregation over a join can consume them; :func:`join_changes` nets them into records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.spark import SparkEngine
from odfproj.odf import model
from odfproj.odf.data_schema import Vocab
from odfproj.state.projections import query_state, signed_states
from odfproj.transform.incremental.join_sides import JoinSides
from odfproj.transform.incremental.stateless import signed_changes
from odfproj.transform.modes import QueryMode, query_mode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["JoinDelta", "JoinInput", "SignedRows", "join_changes", "join_delta"]


@dataclass(frozen=True)
class JoinInput:
    """One input of a join query: its new records, and its changelog before and after them, read on demand.

    ``before``/``after`` build (lazily) the input's changelog up to the consumed offset and up to the
    new one, its files' column names, under its current data schema. They are only called for a term
    that needs that input's whole state: the inputs that did not change, and the other changed ones.
    """

    alias: str
    vocab: Vocab
    #: The records after the consumed offset (its files' column names); ``None``: no new records.
    new_records: DataFrame | None
    before: Callable[[], DataFrame]
    after: Callable[[], DataFrame]
    #: Whether the new records may withdraw rows (``False``: appends only, its terms withdraw nothing).
    withdraws: bool = True
    #: Whether every record up to the new offset is an append (its states need no netting); asked only
    #: when a term reads the input's whole state, as it looks at the footers of all its files.
    appends_only: Callable[[], bool] = lambda: False


@dataclass(frozen=True)
class SignedRows:
    """A query's change as two multisets of its output rows: the rows it gains and the rows it loses."""

    added: DataFrame
    withdrawn: DataFrame
    #: ``False``: ``withdrawn`` is empty, as every changed input's new records are appends.
    withdraws: bool = True


@dataclass(frozen=True)
class JoinDelta:
    """What :func:`join_delta` found: the signed rows, or why the full path must run (``rows`` None).

    ``why_full`` is ``None`` when the query is not a join at all (another path decides), a few words
    for the run's report when it is one whose update cannot be incremental this time.
    """

    rows: SignedRows | None
    why_full: str | None = None


def _other_states(
    inputs: Sequence[JoinInput],
    term: int,
    changed: Sequence[int],
    signed: tuple[DataFrame, DataFrame],
    sides: JoinSides | None,
) -> dict[str, DataFrame]:
    """What the term of input ``term`` (its rows ``signed``: added, withdrawn) sees of every other
    input: the state after the new records for the changed inputs before it, before them for those
    after it, the one state for unchanged inputs. Through ``sides`` (the join index), only the rows
    whose join key occurs in the term's rows, for every input joined to it by an equality."""
    states = {}
    for position, source in enumerate(inputs):
        if position == term:
            continue
        after = position not in changed or position < term
        if sides is not None:
            extra = source.new_records if after and position in changed else None
            found = sides.restricted(inputs[term].alias, *signed, source.alias, extra)
            if found is not None:
                states[source.alias] = found
                continue
        history = source.after() if after else source.before()
        states[source.alias] = query_state(history, source.vocab, appends_only=source.appends_only())
    return states


def join_delta(
    engine: SparkEngine,
    transform: model.TransformSql,
    inputs: Sequence[JoinInput],
    sides: JoinSides | None = None,
    known: QueryMode | None = None,
) -> JoinDelta:
    """The rows a ``join`` query's result gains and loses from its inputs' new records (the module's rule).

    ``JoinDelta(None)`` when the query is not ``join``; ``JoinDelta(None, why)`` when an input with new
    records is one the query is not linear in (the optional side of an outer join). ``sides``: the
    derivative's join index (:mod:`odfproj.transform.incremental.join_sides`), through which a term reads only the
    other inputs' rows its join keys meet; without it, their whole states. Lazy, but for the index's
    small lookups (the buckets a term's keys fall in). ``known``: the query's mode, classified by an
    earlier update over inputs of the same schemas; without it the first term's plan is classified.
    """
    changed = [i for i, source in enumerate(inputs) if source.new_records is not None]
    mode = known
    if mode is not None:
        refused = _refused(mode, inputs, changed)
        if refused is not None:  # decided before a term is built
            return refused
    added: list[DataFrame] = []
    withdrawn: list[DataFrame] = []
    for term in changed:
        source = inputs[term]
        assert source.new_records is not None
        plus, minus = signed_states(source.new_records, source.vocab, withdraws=source.withdraws)
        others = _other_states(inputs, term, changed, (plus, minus), sides)
        gained = engine.query({**others, source.alias: plus}, transform)
        if mode is None:  # the first term's plan is the query's plan: classify it
            mode = query_mode(transform, gained)
            refused = _refused(mode, inputs, changed)
            if refused is not None:
                return refused
        added.append(gained)
        # A term over no withdrawn rows is empty (linear in its input), but for the rows of constant
        # relations, which are in both of its queries and cancel only if both run.
        if source.withdraws or mode.constants:
            withdrawn.append(engine.query({**others, source.alias: minus}, transform))
    if not added:
        return JoinDelta(None)
    gained_rows = _union(added)
    if not withdrawn:
        return JoinDelta(SignedRows(gained_rows, gained_rows.limit(0), withdraws=False))
    return JoinDelta(SignedRows(gained_rows, _union(withdrawn)))


def _refused(mode: QueryMode, inputs: Sequence[JoinInput], changed: Sequence[int]) -> JoinDelta | None:
    """Why the join rule cannot take this update (``JoinDelta`` without rows), or ``None`` if it can."""
    if not mode.is_join:
        return JoinDelta(None)
    fixed = sorted(inputs[i].alias for i in changed if inputs[i].alias.lower() in mode.fixed_inputs)
    if fixed:
        return JoinDelta(
            None, f"input {', '.join(fixed)} on the optional side of an outer join has new records"
        )
    return None


def _union(frames: list[DataFrame]) -> DataFrame:
    """The terms' rows together: by position, as every term is the same query (its output may even
    repeat a column name, which ``check_result`` then refuses with the query's own error)."""
    result = frames[0]
    for frame in frames[1:]:
        result = result.union(frame)
    return result


def join_changes(
    engine: SparkEngine,
    transform: model.TransformSql,
    inputs: Sequence[JoinInput],
    declared: pa.Schema,
    *,
    where: str,
    vocab: Vocab | None = None,
    sides: JoinSides | None = None,
    known: QueryMode | None = None,
) -> tuple[DataFrame | None, str | None]:
    """The records that bring a ``join`` derivative up to date (``op`` + stored columns), or ``None``
    and why the full path must run (``None`` too when another path decides: not a join query, or
    output columns other than the stored ones). ``known``: as for :func:`join_delta`."""
    delta = join_delta(engine, transform, inputs, sides, known)
    if delta.rows is None:
        return None, delta.why_full
    rows = delta.rows
    withdrawn = rows.withdrawn if rows.withdraws else None
    changes = signed_changes(rows.added, withdrawn, declared, where=where, vocab=vocab or Vocab())
    return changes, None
