"""The requests the warm engine's server answers on its socket (the plan's query checks, ``sql``), and
its entry point.

``plan`` (and ``apply`` re-planning) checks a changed query in the analysis sandbox: a local JVM with
fixed, locked-down settings, started for that one command. With the warm engine, the same checks run in
the warm server's JVM instead (``engine.warm``): :class:`WarmChecks` sends each one there and the server
runs :class:`~odfproj.plan.engine_checks.EngineChecks` itself, on its classic session with the sandbox's
settings (``engine.settings.analysis_settings``: nothing from the project, no master, no ``spark_conf``).
The checks, the schema and the execution mode are therefore the ones a cold plan finds, by construction.

``odfproj sql`` is sent there whole (:func:`warm_sql`): the server runs ``state.views.run_sql`` on its
classic session with the target's settings, the very code a cold ``sql`` runs, and sends the rows back;
the command imports no Spark client at all.

The server's entry point, which adds ``run`` to these requests, is ``run.warm_server``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from odfproj.engine.session import SparkSessionHolder, SparkSettings
from odfproj.engine.settings import analysis_settings
from odfproj.engine.spark import CHECK_QUERY, SparkEngine, check_in_sandbox
from odfproj.engine.warm.client import WarmSessionHolder, call
from odfproj.engine.warm.server import Handler
from odfproj.odf import model
from odfproj.plan.engine_checks import EngineChecks
from odfproj.plan.queries import DerivativeCheck
from odfproj.state.views import run_sql
from odfproj.storage.workspace import Workspace
from odfproj.transform.modes import CheckedQuery

__all__ = ["WarmChecks", "handlers", "warm_sql"]

_DERIVATIVE = "check_derivative"
_SOURCE = "check_source"
_SQL = "run_sql"


@dataclass(frozen=True)
class WarmChecks:
    """A ``plan.queries.QueryChecker`` whose checks run in the warm server; it is found (or started) on
    the first check, so a plan without a changed query starts nothing.

    Each check is sent as it was called, and the server answers it by calling
    :class:`~odfproj.plan.engine_checks.EngineChecks` the same way, so the checks' parameters are
    stated once, by ``plan.queries.QueryChecker`` (a derivative's as one ``DerivativeCheck`` value).
    """

    holder: WarmSessionHolder

    def __call__(self, *arguments: Any, **keywords: Any) -> CheckedQuery:
        return call(self.holder.server(), _DERIVATIVE, arguments, keywords)

    def source_schema(self, *arguments: Any, **keywords: Any) -> pa.Schema | None:
        return call(self.holder.server(), _SOURCE, arguments, keywords)


def warm_sql(
    holder: WarmSessionHolder, workspace: Workspace, query: str, *, as_at: datetime | None, limit: int | None
) -> pa.Table:
    """``state.views.run_sql`` run by the warm server, with the target's settings of ``holder``."""
    target = holder.target
    return call(
        holder.server(), _SQL, target.master, dict(target.conf), str(workspace.root), query, as_at, limit
    )


def _run_sql(
    session: object,
    master: str,
    conf: Mapping[str, str],
    workspace: str,
    query: str,
    as_at: datetime | None,
    limit: int | None,
) -> pa.Table:
    """In the server: the query over the workspace's datasets, each scope with the target's SQL settings."""
    settings = SparkSettings(master=master, conf=MappingProxyType(dict(conf)))
    engine = SparkEngine(SparkSessionHolder(settings, session))  # type: ignore[arg-type]
    return run_sql(engine, Workspace(Path(workspace)), query, as_at=as_at, limit=limit)


def _sandbox_checks(session: object) -> EngineChecks:
    """The checks a cold plan makes, on the server's session with the analysis sandbox's settings."""
    return EngineChecks(SparkEngine(SparkSessionHolder(analysis_settings(), session)))  # type: ignore[arg-type]


def _check_derivative(
    session: object, arguments: tuple[Any, ...], keywords: Mapping[str, Any]
) -> CheckedQuery:
    return _sandbox_checks(session)(*arguments, **keywords)


def _check_source(
    session: object, arguments: tuple[Any, ...], keywords: Mapping[str, Any]
) -> pa.Schema | None:
    return _sandbox_checks(session).source_schema(*arguments, **keywords)


def handlers() -> dict[str, Handler]:
    """Every request the warm server answers besides ``ping`` and ``stop``."""
    return {
        CHECK_QUERY: check_in_sandbox,
        _DERIVATIVE: _check_derivative,
        _SOURCE: _check_source,
        _SQL: _run_sql,
    }


def warm_up(session: object) -> None:
    """A derivative's check once, so that the first plan finds the analysis code loaded."""
    transform = model.TransformSql(
        engine="spark", query="SELECT event_time, k, count(*) AS n FROM a GROUP BY event_time, k"
    )
    inputs = {"a": pa.schema([("event_time", pa.timestamp("ms", tz="UTC")), ("k", pa.string())])}
    _sandbox_checks(session)(DerivativeCheck("warm-up", transform, inputs))
