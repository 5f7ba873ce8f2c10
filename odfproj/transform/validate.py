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
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from odfproj.engine.contract import InvalidQueryError
from odfproj.engine.dialects import to_spark
from odfproj.engine.spark import SparkEngine, translating_errors
from odfproj.engine.types import arrow_schema_from_spark, spark_schema_from_arrow
from odfproj.errors import EngineError
from odfproj.ingest.validate import source_data_schema
from odfproj.odf import data_schema, model
from odfproj.odf.data_schema import EVENT_TIME, OFFSET, OP, SYSTEM_TIME
from odfproj.transform.errors import TransformError
from odfproj.transform.execute import check_result, output_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["EngineChecks", "derivative_output_schema", "query_checker", "state_schema"]


def state_schema(data: pa.Schema) -> pa.Schema:
    """What a query sees of an input: its data schema without ``offset``, ``op`` and ``system_time``."""
    return pa.schema([f for f in data if f.name not in (OFFSET, OP, SYSTEM_TIME)])


def derivative_output_schema(
    engine: SparkEngine,
    transform: model.Transform,
    inputs: Mapping[str, pa.Schema],
    *,
    where: str,
    event_time_column: str = EVENT_TIME,
) -> pa.Schema:
    """The data schema of a derivative whose query is ``transform`` over inputs with these data schemas.

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
        result = _vocabulary_event_time(scope.run(to_spark(transform)), event_time_column)
        result = check_result(result, where)
        columns = [EVENT_TIME, *(c for c in result.columns if c != EVENT_TIME)]
        user = arrow_schema_from_spark(result.select(*[f"`{c.replace('`', '``')}`" for c in columns]).schema)
    system = data_schema.system_fields()[:3]
    schema = output_schema(pa.schema([*system, *user]), None)
    if event_time_column == EVENT_TIME:
        return schema
    return pa.schema([f.with_name(event_time_column) if f.name == EVENT_TIME else f for f in schema])


def _vocabulary_event_time(result: DataFrame, name: str) -> DataFrame:
    """The query's event time under the standard name, when the dataset's vocabulary renames it."""
    if name != EVENT_TIME and name in result.columns and EVENT_TIME not in result.columns:
        return result.withColumnRenamed(name, EVENT_TIME)
    return result


@dataclass(frozen=True)
class EngineChecks:
    """A ``plan.queries.QueryChecker``: a derivative's query (called) and a root's ingest (``source_schema``)."""

    check: Callable[[str, model.Transform, Mapping[str, pa.Schema], model.SetVocab | None], pa.Schema]
    engine: SparkEngine

    def __call__(
        self,
        dataset: str,
        transform: model.Transform,
        inputs: Mapping[str, pa.Schema],
        vocab: model.SetVocab | None = None,
    ) -> pa.Schema:
        return self.check(dataset, transform, inputs, vocab)

    def source_schema(
        self,
        dataset: str,
        source: model.SetPollingSource | model.AddPushSource,
        vocab: model.SetVocab | None,
    ) -> pa.Schema | None:
        """The root's first data schema from its read schema and preprocess query (see ingest.validate)."""
        try:
            return source_data_schema(self.engine, source, vocab, where=f"dataset {dataset}")
        except InvalidQueryError:
            raise
        except EngineError as e:
            raise _cannot_validate(dataset, e) from None


def _cannot_validate(dataset: str, error: EngineError) -> EngineError:
    return EngineError(
        f"dataset {dataset}: cannot validate its query: {error} (--no-validate-queries plans without the engine)"
    )


def query_checker(engine: SparkEngine) -> EngineChecks:
    """A ``plan.queries.QueryChecker`` on ``engine``: its session starts on the first changed query."""

    def check(
        dataset: str,
        transform: model.Transform,
        inputs: Mapping[str, pa.Schema],
        vocab: model.SetVocab | None = None,
    ) -> pa.Schema:
        event_time = (vocab.event_time_column if vocab is not None else None) or EVENT_TIME
        try:
            return derivative_output_schema(
                engine, transform, inputs, where=f"dataset {dataset}", event_time_column=event_time
            )
        except InvalidQueryError:
            raise
        except EngineError as e:
            raise _cannot_validate(dataset, e) from None

    return EngineChecks(check, engine)
