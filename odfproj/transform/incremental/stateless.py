"""The stateless path: a derivative update that reads only its inputs' new records.

A stateless query (:mod:`odfproj.transform.modes`: projections, filters, deterministic scalar
functions, ``UNION ALL``) is linear over signed multisets: ``Q(S + D) = Q(S) + Q(D)`` for any signed
change ``D`` of its inputs. The derivative's stored state is ``Q(S)`` (every earlier block made it so),
so the records that turn it into ``Q(S + D)`` are exactly ``Q(D)``: the query over the rows the new
records add, minus the query over the rows they withdraw (a query cannot carry a sign column
through, so it runs twice). Those net counts per output row go through the same
:func:`odfproj.transform.execute.net_changes` as the full recomputation's, and ``write_changes``
numbers them the same way: the block is the one the full path would write, record for record, so
``verify --reproduce`` (which recomputes in full) reproduces it and batch independence holds.

Neither the inputs' history up to the consumed offsets nor the derivative's own records are read.
The caller falls back to the full path when this returns ``None``: a query that is not stateless, or
whose output columns are not exactly the stored ones (Schema Evolution re-appends every row).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.columns import literal
from odfproj.engine.spark import SparkEngine
from odfproj.engine.types import arrow_schema_from_spark, spark_schema_from_arrow
from odfproj.odf import model
from odfproj.odf.data_schema import OFFSET, OP, SYSTEM_TIME, Op, Vocab
from odfproj.odf.schema_diff import diff_columns
from odfproj.state.projections import grouping_values, signed_states
from odfproj.transform.execute import check_result, net_changes, net_counts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SignedInputs", "signed_changes", "signed_inputs", "stateless_changes", "stored_columns"]


def stored_columns(declared: pa.Schema, vocab: Vocab) -> pa.Schema:
    """The derivative's state columns (standard names, stored order) as Spark reads its files."""
    from pyspark.sql import types as T

    standard = vocab.to_standard()
    fields = [
        T.StructField(standard.get(f.name, f.name), f.dataType, f.nullable)
        for f in spark_schema_from_arrow(declared).fields
    ]
    return arrow_schema_from_spark(
        T.StructType([f for f in fields if f.name not in (OFFSET, OP, SYSTEM_TIME)])
    )


@dataclass(frozen=True)
class SignedInputs:
    """The inputs' new records as the query sees them, per alias: the rows they add and the rows they
    withdraw (:func:`odfproj.state.projections.signed_states`); an input without new records has two
    empty frames. Built once per update: the query's classification and every incremental path read
    the same frames."""

    added: Mapping[str, DataFrame]
    withdrawn: Mapping[str, DataFrame]
    #: Whether any input's new records may withdraw rows; ``False``: every ``withdrawn`` frame is empty.
    withdraws: bool = True


def signed_inputs(
    new_records: Mapping[str, DataFrame],
    input_vocabs: Mapping[str, Vocab],
    appends_only: Collection[str] = (),
) -> SignedInputs:
    """``new_records`` (each input's records after the consumed offset, its files' column names) split
    into the rows they add and withdraw, each input under its own vocabulary; the inputs named in
    ``appends_only`` withdraw nothing (:func:`odfproj.state.frames.only_appends`)."""
    signed = {
        alias: signed_states(frame, input_vocabs.get(alias, Vocab()), withdraws=alias not in appends_only)
        for alias, frame in new_records.items()
    }
    return SignedInputs(
        {alias: parts[0] for alias, parts in signed.items()},
        {alias: parts[1] for alias, parts in signed.items()},
        withdraws=any(alias not in appends_only for alias in new_records),
    )


def stateless_changes(
    engine: SparkEngine,
    transform: model.TransformSql,
    inputs: SignedInputs,
    added: DataFrame,
    declared: pa.Schema,
    *,
    where: str,
    vocab: Vocab | None = None,
    constants: bool = True,
) -> DataFrame | None:
    """The records that bring a stateless derivative up to date from its inputs' new records only.

    ``added`` is the query over ``inputs.added``, which the caller classified ``stateless``
    (:func:`odfproj.transform.modes.query_mode`); ``declared`` is the derivative's data schema;
    ``constants`` whether the query reads a constant relation (the mode's
    :attr:`~odfproj.transform.modes.QueryMode.constants`). Returns ``op`` and the stored columns
    (standard names), like :func:`odfproj.transform.execute.compute_changes`, or ``None`` when the
    full path must be taken.
    """
    # Q(empty inputs) is empty for a stateless query without constants: no second query when nothing
    # is withdrawn. A constant's rows are in both queries' results and cancel only if both run.
    if not inputs.withdraws and not constants:
        return signed_changes(added, None, declared, where=where, vocab=vocab or Vocab())
    withdrawn = engine.query(inputs.withdrawn, transform)
    return signed_changes(added, withdrawn, declared, where=where, vocab=vocab or Vocab())


def signed_changes(
    added: DataFrame, withdrawn: DataFrame | None, declared: pa.Schema, *, where: str, vocab: Vocab
) -> DataFrame | None:
    """``op`` + the stored columns from a query's rows added and withdrawn by an update: net per row.

    The one ending of every incremental path (stateless, join): the counts in ``added`` minus those
    in ``withdrawn`` go through the full path's :func:`net_changes`, so the records are the ones the
    full recomputation writes. ``withdrawn`` ``None``: the update withdraws nothing (its inputs' new
    records are appends only), every added row is one ``+A`` record and nothing needs netting; its
    values are normalised as the netting's grouping would (:func:`grouping_values`), so the records
    are still the full path's. ``None`` when the query's output columns are not exactly the stored
    ones (the full path re-appends every row then).
    """
    added = check_result(added, where, vocab)
    stored = stored_columns(declared, vocab)
    if (
        set(added.columns) != set(stored.names)
        or diff_columns(stored, arrow_schema_from_spark(added.schema)).problems()
    ):
        return None
    columns = list(stored.names)  # the full path's order: the stored one
    values = grouping_values(added, columns) if withdrawn is None else None
    if values is not None:
        return added.select(literal(int(Op.APPEND)).cast("int").alias(OP), *values)
    if withdrawn is None:
        withdrawn = added.limit(0)
    withdrawn = check_result(withdrawn, where, vocab)
    return net_changes(net_counts(added, withdrawn, columns), columns)
