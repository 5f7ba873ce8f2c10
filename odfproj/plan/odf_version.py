"""Where the workspace's ``odf_version`` and a dataset's chain disagree, said in one plan line each.

A chain keeps the form of its Seed (``odf.odf_versions``): a dataset created under ``odf_version:
"0.35"`` goes on being written as 0.35 after the setting says ``"0.39"``, and the other way round. That
is never done silently: the plan names each selected dataset whose chain is in another form than the
setting, so a user who changed the setting knows which chains it does not reach.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from odfproj.errors import OdfprojError
from odfproj.odf.odf_versions import block_version_for, odf_version_of


def odf_version_warnings(odf_version: str, workspace: Path, names: Iterable[str]) -> list[str]:
    """One line per dataset of ``names`` in ``workspace`` whose chain is not in the ``odf_version`` form."""
    from odfproj.storage.workspace import Workspace

    wanted = block_version_for(odf_version)
    if not (workspace / "datasets").is_dir():
        return []
    opened = Workspace(workspace)
    lines = []
    selected = {n.lower() for n in names}
    for name in sorted(n for n in opened.list_datasets() if n.lower() in selected):
        try:
            version = opened.open(name, recover=False).block_version()
        except (OdfprojError, KeyError):
            continue  # an unreadable chain is reported by the plan's own checks
        if version != wanted:
            lines.append(
                f"{name}: its chain is in the ODF {odf_version_of(version)} form (manifest version {version}); the workspace "
                f'writes new chains as {odf_version} (odf_version: "{odf_version}" in odfproj.yaml); '
                f"blocks appended to {name} stay ODF {odf_version_of(version)}"
            )
    return lines
