"""Apply one dataset's pending definition before data is pushed into it (``odfproj ingest``).

``odfproj run`` applies the manifests before it ingests; ``odfproj ingest NAME FILE`` into a dataset
whose manifest was never applied must do the same, under the same rules: the plan of that one dataset
is made (its changed queries checked when a checker is given) and a refused change refuses the ingest
before anything is written. A dataset without a manifest in the project is left to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from odfproj.plan.queries import QueryChecker
from odfproj.plan.sources import plan_project
from odfproj.project.config import ProjectConfig
from odfproj.project.loader import PlanRequest
from odfproj.run.apply import ApplyResult, apply_plan, check_plan
from odfproj.storage.workspace import Workspace

__all__ = ["apply_pending"]


def apply_pending(
    config: ProjectConfig,
    dataset: str,
    request: PlanRequest,
    *,
    query_checker: QueryChecker | None = None,
    environ: Mapping[str, str] | None = None,
    lock_timeout: float | None = None,
) -> ApplyResult | None:
    """Apply the pending changes of ``dataset``'s manifest; ``None`` when there were none.

    Raises ``PlanError`` when the plan refuses a change (nothing is applied then).
    """
    plan, snapshot = plan_project(
        config, replace(request, select=(dataset,), exclude=()), environ=environ, query_checker=query_checker
    )
    if not plan.has_changes and not plan.has_refusals:
        return None  # up to date, or no manifest of that name
    workspace = Workspace(snapshot.workspace, odf_version=config.odf_version)
    with workspace.lock(purpose="odfproj ingest", timeout=lock_timeout):
        check_plan(plan, workspace)
        return apply_plan(plan, workspace) if plan.has_changes else None
