"""``publish --recompute``: what publish refused, applied and run on production instead."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from odfproj.engine.session import SparkSessionHolder
from odfproj.project.config import ProjectConfig
from odfproj.project.loader import PlanRequest
from odfproj.run.run import RunEvent, RunResult, run_project

__all__ = ["recompute_on_production"]


def recompute_on_production(
    config: ProjectConfig,
    target: str | None,
    names: Iterable[str],
    *,
    holder: SparkSessionHolder,
    on_event: Callable[[RunEvent], None] | None = None,
) -> RunResult:
    """``publish --recompute``: apply and run the datasets publish refused, on production, as
    ``odfproj run --select`` them would (their downstream is refused with them, so it is among them)."""
    production = config.in_environment(None)
    return run_project(
        production, PlanRequest(target=target, select=tuple(names)), holder=holder, on_event=on_event
    )
