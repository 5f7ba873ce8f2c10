"""The engine contract: what the coordinator may ask of a data engine (spec: Engine Contract).

The operations are shaped as request -> response messages, like the spec's engine protocol, so that the
same contract can later be served over gRPC without changing callers: a response is a value (success,
invalid query, internal error), never an exception, because exceptions do not cross a wire. In-process
callers that prefer exceptions use :func:`raise_for_response`.

``RawQueryRequest``/``RawQueryResponse`` and ``TransformRequest``/``TransformResponse`` are the generated
protocol classes. The spec defines no message for *Validate Query*, so ``ValidateQueryRequest`` and its
responses are defined here in the same style (input schemas are Arrow, as in ``SetDataSchema``).

*Migrate Query* and *Derive Provenance* are not part of the contract yet: the Spark engine is a stateless
batch engine (no checkpoints to migrate) and the spec leaves provenance undesigned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import pyarrow as pa

from odfproj.errors import EngineError
from odfproj.odf import model


class InvalidQueryError(EngineError):
    """The query is wrong (syntax, unknown column, forbidden function): the user must change it."""


@dataclass(frozen=True)
class ValidateQueryRequest:
    """Check a transform against the schemas of its inputs, without data.

    ``inputs`` maps each name the query may use (an input's query alias, or ``input`` for preprocess) to
    that input's Arrow schema. ``prev_transform`` is the query being replaced, when there is one (the
    spec allows it; the Spark engine does not use it yet).
    """

    inputs: Mapping[str, pa.Schema]
    transform: model.TransformSql
    prev_transform: model.TransformSql | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", MappingProxyType(dict(self.inputs)))


@dataclass(frozen=True)
class ValidateQueryResponseSuccess:
    """The query is valid; ``schema`` is the schema of its result."""

    schema: pa.Schema


@dataclass(frozen=True)
class ValidateQueryResponseInvalidQuery:
    """The query is not valid; ``message`` says why, on one line."""

    message: str


@dataclass(frozen=True)
class ValidateQueryResponseInternalError:
    """The engine failed for a reason that is not the query's fault."""

    message: str
    backtrace: str | None = field(default=None, repr=False)


ValidateQueryResponse = (
    ValidateQueryResponseSuccess | ValidateQueryResponseInvalidQuery | ValidateQueryResponseInternalError
)


@runtime_checkable
class Engine(Protocol):
    """A data engine as the coordinator sees it (spec: Engine Contract, Operations)."""

    def validate_query(self, request: ValidateQueryRequest) -> ValidateQueryResponse:
        """Output schema of ``request.transform`` over the input schemas, or why it is invalid."""
        ...

    def execute_raw_query(self, request: model.RawQueryRequest) -> model.RawQueryResponse:
        """Run a query over raw input files (the ingest preprocess step) and write its result."""
        ...

    def execute_transform(self, request: model.TransformRequest) -> model.TransformResponse:
        """Perform the next step of a derivative transformation and write the new data slice."""
        ...


def raise_for_response(
    response: ValidateQueryResponse | model.RawQueryResponse | model.TransformResponse,
) -> None:
    """Turn an invalid-query or internal-error response into ``InvalidQueryError`` / ``EngineError``."""
    if isinstance(
        response,
        ValidateQueryResponseInvalidQuery
        | model.RawQueryResponseInvalidQuery
        | model.TransformResponseInvalidQuery,
    ):
        raise InvalidQueryError(response.message)
    if isinstance(
        response,
        ValidateQueryResponseInternalError
        | model.RawQueryResponseInternalError
        | model.TransformResponseInternalError,
    ):
        raise EngineError(response.message)
