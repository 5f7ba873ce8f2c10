"""Validate a root's ingest in the plan: the preprocess query over an empty input with the read step's schema.

``plan`` must refuse what would fail on the first run without fetching anything: the read step's
declared schema stands in for the data (``read_files`` with no files gives an empty DataFrame of that
schema), the preprocess query is analysed over it exactly as ingest runs it (``preprocess_batch``,
so the same translation and checks), and the merge's primary key must be among the result's columns.
The result also gives the data schema the first ingest would write, so a new derivative of a new root
can be checked before either has data.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.spark import SparkEngine, translating_errors
from odfproj.engine.types import arrow_schema_from_spark
from odfproj.ingest.pipeline import preprocess_batch, primary_key, with_event_time
from odfproj.ingest.read import read_files
from odfproj.odf import data_schema, model
from odfproj.odf.data_schema import EVENT_TIME, TIMESTAMP_TYPE, Vocab

__all__ = ["source_data_schema"]

#: Any instant will do: the event time of an empty batch is never looked at, only its type.
_ANY_TIME = datetime(1970, 1, 1, tzinfo=UTC)


def source_data_schema(
    engine: SparkEngine,
    source: model.SetPollingSource | model.AddPushSource,
    vocab: model.SetVocab | None,
    *,
    where: str,
) -> pa.Schema | None:
    """The data schema the first ingest from ``source`` would commit; ``None`` if the read step declares none.

    Raises ``InvalidQueryError`` when the preprocess query is refused or its result lacks a primary
    key column (the message names neither the dataset nor ``where``: the caller's step does),
    ``EngineError`` when the engine itself fails.
    """
    if not source.read.schema:
        return None
    names = Vocab.of(vocab)
    with translating_errors(f"{where}: checking the preprocess query", InvalidQueryError):
        batch = read_files(engine.session, source.read, [], materialize=False)
        try:
            batch = preprocess_batch(engine, batch, source.preprocess, where)
        except InvalidQueryError as e:
            raise InvalidQueryError(f"the preprocess {e}") from None
        missing = [k for k in primary_key(source.merge) if k not in batch.columns]
        if missing:
            raise InvalidQueryError(
                f"the merge's primaryKey column(s) {', '.join(missing)} are not among the "
                f"{'preprocess query' if source.preprocess else 'read schema'}'s columns "
                f"({', '.join(batch.columns)})"
            )
        batch, _ = with_event_time(batch, names, _ANY_TIME)
        user = arrow_schema_from_spark(batch.schema)
    system = data_schema.system_fields()[:3]
    columns = [f.with_nullable(True) for f in user if f.name != EVENT_TIME]
    return pa.schema([*system, pa.field(names.event_time, TIMESTAMP_TYPE), *columns])
