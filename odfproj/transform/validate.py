"""Validate Query for derivatives: the data schema a query would produce, from its inputs' schemas only.

``plan`` uses it (:mod:`odfproj.plan.engine_checks`) to check a changed query before anything is
appended (spec: Query Evolution): the
query is analysed over *empty* inputs that have the inputs' schemas, so no data is read and nothing a
manifest names is executed. The checks are the ones a live update makes (statement kind, forbidden
functions, ``event_time``, reserved and duplicate names), because both go through the same engine
scope and :func:`odfproj.transform.execute.check_result`; the schema is normalised exactly as a
written data file's (:func:`odfproj.transform.execute.output_schema`), so it compares equal to the
``SetDataSchema`` a run would commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.spark import SparkEngine, translating_errors
from odfproj.engine.types import (
    UnstorableTypeError,
    arrow_field_from_spark,
    arrow_schema_from_spark,
    spark_schema_from_arrow,
)
from odfproj.odf import data_schema, model
from odfproj.odf.data_schema import EVENT_TIME, OFFSET, OP, SYSTEM_TIME, Vocab
from odfproj.transform.errors import TransformError
from odfproj.transform.execute import check_result, output_schema
from odfproj.transform.incremental.grouped import checked_mode
from odfproj.transform.modes import CheckedQuery, query_mode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["check_derivative_query", "state_schema"]


def state_schema(data: pa.Schema) -> pa.Schema:
    """What a query sees of an input: its data schema without ``offset``, ``op`` and ``system_time``."""
    return pa.schema([f for f in data if f.name not in (OFFSET, OP, SYSTEM_TIME)])


def check_derivative_query(
    engine: SparkEngine,
    transform: model.Transform,
    inputs: Mapping[str, pa.Schema],
    *,
    where: str,
    vocab: Vocab | None = None,
) -> CheckedQuery:
    """The data schema of a derivative whose query is ``transform`` over inputs with these data schemas,
    and the query's execution mode (:mod:`odfproj.transform.modes`, from the same analysed plan).

    ``inputs`` maps each query alias to that input's data schema (system columns included, as in its
    ``SetDataSchema``). ``event_time_column`` is the derivative's ``SetVocab.eventTimeColumn``: the
    query outputs its event time under that name, and the schema keeps it. Raises ``InvalidQueryError``
    for a query the engine refuses and ``EngineError`` when the engine itself fails (no Java runtime).
    """
    if not isinstance(transform, model.TransformSql):
        raise TransformError(f"{where}: only Sql transforms are supported, not {type(transform).__name__}")
    with translating_errors(f"validating the query of {where}"), engine.scope() as scope:
        for alias, schema in inputs.items():
            empty = scope.session.createDataFrame([], spark_schema_from_arrow(state_schema(schema)))
            scope.register(alias, empty)
        analysed = scope.run(transform)
        mode = checked_mode(query_mode(transform, analysed), transform, scope.run)
        result = check_result(analysed, where, vocab)
        _refuse_unstorable(result, where)
        columns = [EVENT_TIME, *(c for c in result.columns if c != EVENT_TIME)]
        user = arrow_schema_from_spark(result.select(*[f"`{c.replace('`', '``')}`" for c in columns]).schema)
    vocab = vocab or Vocab()
    system = data_schema.system_fields(vocab)[:3]
    user = pa.schema([user.field(0).with_name(vocab.event_time), *list(user)[1:]])
    return CheckedQuery(output_schema(pa.schema([*system, *user]), None, vocab), mode)


def _refuse_unstorable(result: DataFrame, where: str) -> None:
    """An output column of a type ODF data cannot hold (``variant``, intervals) makes the query invalid.

    It is the query that must change, so this is that dataset's refusal, not an engine failure that
    would abort the whole plan.
    """
    for column in result.schema.fields:
        try:
            arrow_field_from_spark(column)
        except UnstorableTypeError:
            raise InvalidQueryError(
                f"{where}: the query outputs column {column.name!r} of type "
                f"{column.dataType.simpleString()}, which ODF data cannot store; cast or convert it "
                "(for example to_json(...) for a variant)"
            ) from None
