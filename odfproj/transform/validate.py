"""Validate Query for derivatives: the data schema a query would produce, from its inputs' schemas only.

``plan`` uses it to check a changed query before anything is appended (spec: Query Evolution): the
query is analysed over *empty* inputs that have the inputs' schemas, so no data is read and nothing a
manifest names is executed. The checks are the ones a live update makes (statement kind, forbidden
functions, ``event_time``, reserved and duplicate names), because both go through the same engine
scope and :func:`odfproj.transform.execute.check_result`; the schema is normalised exactly as a
written data file's (:func:`odfproj.transform.execute.output_schema`), so it compares equal to the
``SetDataSchema`` a run would commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa

from odfproj.engine.contract import InvalidQueryError
from odfproj.engine.spark import SparkEngine, translating_errors
from odfproj.engine.types import arrow_schema_from_spark, spark_schema_from_arrow
from odfproj.errors import EngineError
from odfproj.odf import data_schema, model
from odfproj.odf.data_schema import EVENT_TIME, OFFSET, OP, SYSTEM_TIME, Vocab
from odfproj.transform.errors import TransformError
from odfproj.transform.execute import check_result, output_schema

__all__ = ["derivative_output_schema", "query_checker", "state_schema"]


def state_schema(data: pa.Schema) -> pa.Schema:
    """What a query sees of an input: its data schema without ``offset``, ``op`` and ``system_time``."""
    return pa.schema([f for f in data if f.name not in (OFFSET, OP, SYSTEM_TIME)])


def derivative_output_schema(
    engine: SparkEngine,
    transform: model.Transform,
    inputs: Mapping[str, pa.Schema],
    *,
    where: str,
    vocab: Vocab | None = None,
) -> pa.Schema:
    """The data schema of a derivative whose query is ``transform`` over inputs with these data schemas.

    ``inputs`` maps each query alias to that input's data schema (system columns included, as in its
    ``SetDataSchema``). Raises ``InvalidQueryError`` for a query the engine refuses and
    ``EngineError`` when the engine itself fails (for example, no Java runtime).
    """
    if not isinstance(transform, model.TransformSql):
        raise TransformError(f"{where}: only Sql transforms are supported, not {type(transform).__name__}")
    with translating_errors(f"validating the query of {where}"), engine.scope() as scope:
        for alias, schema in inputs.items():
            empty = scope.session.createDataFrame([], spark_schema_from_arrow(state_schema(schema)))
            scope.register(alias, empty)
        result = check_result(scope.run(transform), where, vocab)
        columns = [EVENT_TIME, *(c for c in result.columns if c != EVENT_TIME)]
        user = arrow_schema_from_spark(result.select(*[f"`{c.replace('`', '``')}`" for c in columns]).schema)
    vocab = vocab or Vocab()
    system = data_schema.system_fields(vocab)[:3]
    user = pa.schema([user.field(0).with_name(vocab.event_time), *list(user)[1:]])
    return output_schema(pa.schema([*system, *user]), None, vocab)


def query_checker(
    engine: SparkEngine,
) -> Callable[[str, model.Transform, Mapping[str, pa.Schema]], pa.Schema]:
    """A ``plan.queries.QueryChecker`` on ``engine``: its session starts on the first changed query."""

    def check(
        dataset: str, transform: model.Transform, inputs: Mapping[str, pa.Schema], vocab: Vocab | None = None
    ) -> pa.Schema:
        try:
            return derivative_output_schema(
                engine, transform, inputs, where=f"dataset {dataset}", vocab=vocab
            )
        except InvalidQueryError:
            raise
        except EngineError as e:
            raise EngineError(
                f"dataset {dataset}: cannot validate its query: {e} "
                "(--no-validate-queries plans without the engine)"
            ) from None

    return check
