"""ODF's evolution rules as small pure functions, each answering "allowed?" with a reason.

The spec (Dataset Evolution) allows schemas to grow by added columns only, forbids changing what a dataset
is (Root vs Derivative), and a root's merge strategy defines how its existing history was built, so it may
not change once there is data. Query changes need the engine to tell the new output schema; that check
lives in ``plan.queries``, which applies :func:`schema_change` to what the engine reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfproj.errors import InvalidValueError

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


OK = Verdict(True)


def schema_change(old: pa.Schema, new: pa.Schema, what: str) -> Verdict:
    """Only added columns are allowed (the rule and its words: :func:`odfproj.odf.schema_diff.diff_columns`)."""
    # The schema modules import pyarrow (0.1 s), which a plan with no changed schema never needs.
    from odfproj.odf.schema_diff import diff_columns

    reasons = tuple(f"{what} {problem}" for problem in diff_columns(old, new).problems())
    return Verdict(not reasons, reasons)


def _read_schema(event: object) -> pa.Schema | None:
    read = getattr(event, "read", None)
    columns = getattr(read, "schema", None)
    if not columns:
        return None
    from odfproj.odf.ddl import parse_ddl_schema

    try:
        return parse_ddl_schema(list(columns))
    except InvalidValueError:
        return None  # validation reports bad DDL; here it only means there is nothing to compare


def source_change(old: object, new: object, *, has_data: bool) -> Verdict:
    """Rules for replacing a polling or push source definition."""
    reasons: list[str] = []
    old_merge, new_merge = getattr(old, "merge", None), getattr(new, "merge", None)
    if has_data and old_merge is not None and old_merge != new_merge:
        reasons.append(
            f"merge strategy changes from {_merge_label(old_merge)} to {_merge_label(new_merge)} "
            "on a dataset that already has data (its history was built with the old one)"
        )
    old_schema, new_schema = _read_schema(old), _read_schema(new)
    if old_schema is not None and new_schema is not None:
        reasons.extend(schema_change(old_schema, new_schema, "the read schema").reasons)
    elif old_schema is not None and new_schema is None and has_data:
        reasons.append("the read schema is removed from a dataset that has data")
    return Verdict(not reasons, tuple(reasons))


def _merge_label(merge: object) -> str:
    name = type(merge).__name__.removeprefix("MergeStrategy")
    keys = getattr(merge, "primary_key", None)
    return f"{name}({', '.join(keys)})" if keys else name
