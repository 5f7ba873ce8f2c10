"""The plan's query checks on a Spark engine of the command's own: a derivative's query and a root's ingest.

:func:`query_checker` is the ``plan.queries.QueryChecker`` the CLI, ``run`` and ``watch`` hand the
planner (``plan.served_checks.WarmChecks`` sends the same checks to the warm engine's server, which
runs this one). It composes two layers' checks that know nothing of each other, which is why it
lives above both: a derivative's query over empty inputs (``transform.validate``) and a root's read
schema through its preprocess query (``ingest.validate``). Importing it starts no JVM, and neither does
building it: the engine's session starts on the first check, so a plan without a changed query
starts none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa

from odfproj.engine.errors import InvalidQueryError
from odfproj.engine.spark import SparkEngine
from odfproj.errors import EngineError
from odfproj.ingest.validate import source_data_schema
from odfproj.odf import model
from odfproj.plan.queries import DerivativeCheck
from odfproj.transform.modes import CheckedQuery
from odfproj.transform.validate import check_derivative_query

__all__ = ["EngineChecks", "query_checker"]


@dataclass(frozen=True)
class EngineChecks:
    """A ``plan.queries.QueryChecker``: a derivative's query (called) and a root's ingest (``source_schema``).

    The engine's session starts on the first check, so a plan without a changed query starts no JVM.
    """

    engine: SparkEngine

    def __call__(self, check: DerivativeCheck) -> CheckedQuery:
        with _validating(check.dataset):
            return check_derivative_query(
                self.engine,
                check.transform,
                check.inputs,
                where=f"dataset {check.dataset}",
                vocab=check.vocab,
            )

    def source_schema(
        self,
        dataset: str,
        source: model.SetPollingSource | model.AddPushSource,
        vocab: model.SetVocab | None,
    ) -> pa.Schema | None:
        """The root's first data schema from its read schema and preprocess query (see ingest.validate)."""
        with _validating(dataset):
            return source_data_schema(self.engine, source, vocab, where=f"dataset {dataset}")


@contextmanager
def _validating(dataset: str) -> Iterator[None]:
    """An invalid query stays the dataset's refusal; any other engine failure says the check could not run."""
    try:
        yield
    except InvalidQueryError:
        raise
    except EngineError as e:
        raise EngineError(
            f"dataset {dataset}: cannot validate its query: {e} (--no-validate-queries plans without the engine)"
        ) from None


def query_checker(engine: SparkEngine) -> EngineChecks:
    """A ``plan.queries.QueryChecker`` on ``engine``: its session starts on the first changed query."""
    return EngineChecks(engine)
