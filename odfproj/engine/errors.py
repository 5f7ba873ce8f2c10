"""The engine's own error: a query the user must change (the engine failing is ``odfproj.errors.EngineError``)."""

from __future__ import annotations

from odfproj.errors import EngineError

__all__ = ["InvalidQueryError"]


class InvalidQueryError(EngineError):
    """The query is wrong (syntax, unknown column, forbidden function): the user must change it."""
