"""Which query engines a plan may run: Spark SQL only, until other dialects are translated.

A manifest written for the reference implementation may name ``engine: datafusion``, ``flink`` or
``risingwave``. Their SQL is not Spark SQL: run as is, ``SELECT "id" FROM input`` reads a string
literal where DataFusion reads a column, and a Ledger merge then commits wrong data without an
error. So the plan refuses such a dataset, naming the file, the step and the engine, before
anything runs (translation of those dialects replaces this refusal).
"""

from __future__ import annotations

from odfproj.odf import model

__all__ = ["RUNNABLE_ENGINES", "engine_refusals"]

#: Engines whose SQL odfproj runs as written.
RUNNABLE_ENGINES = ("spark",)


def engine_refusals(snapshot: model.DatasetSnapshot) -> tuple[str, ...]:
    """One reason per query of ``snapshot`` written for an engine odfproj cannot run as written."""
    reasons = []
    for event in snapshot.metadata:
        if isinstance(event, model.SetPollingSource | model.AddPushSource):
            query, where = event.preprocess, "preprocess"
        elif isinstance(event, model.SetTransform):
            query, where = event.transform, "transform"
        else:
            continue
        if isinstance(query, model.TransformSql) and query.engine.lower() not in RUNNABLE_ENGINES:
            reasons.append(
                f"the {where} query is written for engine {query.engine!r}; odfproj runs Spark SQL and "
                f"does not translate {query.engine} SQL, so it refuses to run it as Spark SQL "
                "(the meaning could differ silently)"
            )
    return tuple(reasons)
