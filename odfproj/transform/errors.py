"""The transform layer's errors: one-line messages that name the derivative dataset (and the block)."""

from __future__ import annotations

from odfproj.errors import OdfprojError

__all__ = ["ReproduceMismatchError", "TransformError"]


class TransformError(OdfprojError):
    """A derivative cannot be brought up to date: unknown input, unsupported transform, changed schema..."""


class ReproduceMismatchError(TransformError):
    """Re-executing a recorded ExecuteTransform gave other data than the block records."""
