"""Where the workspace's ``odf_version`` and a dataset's chain disagree, said in one plan line each.

A chain keeps the form of its Seed (``odf.odf_versions``): a dataset created under ``odf_version:
"0.35"`` goes on being written as 0.35 after the setting says ``"0.39"``, and the other way round. That
is never done silently: the plan names each selected dataset whose chain is in another form than the
setting, so a user who changed the setting knows which chains it does not reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odfproj.odf.odf_versions import block_version_for, odf_version_of
from odfproj.plan.diff import ChainView


def odf_version_warnings(odf_version: str, views: Mapping[str, ChainView], names: Iterable[str]) -> list[str]:
    """One line per dataset of ``names`` whose chain (its plan view, keyed by lower-case name) is not in
    the ``odf_version`` form. Reads nothing: the view recorded the chain's block version."""
    wanted = block_version_for(odf_version)
    lines = []
    for name in sorted(names):
        view = views.get(name.lower())
        version = view.block_version if view is not None else None
        if version is not None and version != wanted:
            lines.append(
                f"{name}: its chain is in the ODF {odf_version_of(version)} form (manifest version {version}); "
                f'the workspace writes new chains as {odf_version} (odf_version: "{odf_version}" in '
                f"odfproj.yaml); blocks appended to {name} stay ODF {odf_version_of(version)}"
            )
    return lines
