"""Every manifest kamu-contrib publishes loads, or is refused in one line (issue 34, point 1).

The manifests are verbatim copies of kamu-contrib at its head (tests/fixtures/kamu-contrib/SOURCES.md),
loaded as one project by the project loader, in a 0.35 and a 0.39 workspace: nothing is fetched or run,
no JVM. A refusal must name the file, the dataset, the construct, the ODF version it needs and the
setting that accepts it, or say that odfproj never runs it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from odfproj.odf.validation import check_manifest
from odfproj.project.config import parse_config
from odfproj.project.manifests import load_manifests

CONTRIB = Path(__file__).parents[1] / "fixtures" / "kamu-contrib" / "15059c7"

#: One line: file:line:col: dataset: construct, then why: the version it needs and the setting that accepts
#: it, not supported yet (a 0.39 workspace), or never run by odfproj.
REFUSAL = re.compile(
    r"^(?P<file>[^:\n]+\.yaml):\d+:\d+: (?P<dataset>[A-Za-z0-9.-]+): (?P<construct>[^\n]+?) "
    r"(needs ODF 0\.3[6-9] \(odf_version: \"0\.39\" in odfproj\.yaml\)"
    r"|\(ODF 0\.3[6-9]\) is not supported yet by odfproj"
    r"|\(ODF 0\.3[6-9]\) is not one odfproj runs: [^\n]+)$"
)

#: kamu-contrib's manifests whose fetch step is EthereumLogs (ODF 0.36): refused in any workspace.
ETHEREUM_LOGS = {
    "net.rocketpool/reth.mint-burn-2in1.yaml",
    "net.rocketpool/reth.tokens-burned.yaml",
    "net.rocketpool/reth.tokens-minted.yaml",
    "xyz.peaq/did.add-attribute.yaml",
}


@pytest.fixture(scope="module", params=["0.35", "0.39"])
def contrib(request, tmp_path_factory):
    """The manifests loaded as one project in a workspace of each ODF version (a copy: loading may leave
    a cache in the project)."""
    root = tmp_path_factory.mktemp("kamu-contrib") / "project"
    shutil.copytree(CONTRIB, root)
    config = f"name: kamu-contrib\nmanifests: ['**/*.yaml']\nodf_version: '{request.param}'\n"
    return load_manifests(parse_config(root, config))


def test_every_kamu_contrib_manifest_loads_or_is_refused_in_one_line(contrib):
    files = sorted(p.relative_to(CONTRIB).as_posix() for p in CONTRIB.rglob("*.yaml"))
    assert [m.rel_path for m in contrib.manifests] == files and len(files) == 73
    refused = {}
    for manifest in contrib.manifests:
        if manifest.ok:
            continue
        assert len(manifest.problems) == 1, [str(p) for p in manifest.problems]
        refused[manifest.rel_path] = str(manifest.problems[0])
    assert set(refused) == ETHEREUM_LOGS
    for rel_path, line in refused.items():
        match = REFUSAL.match(line)
        assert match is not None, line
        assert match["file"] == rel_path and match["dataset"] == contrib_name(rel_path)
        assert "EthereumLogs" in match["construct"]


def test_upgraded_kamu_contrib_manifests_load_as_ddl_schemas(contrib):
    """The 0.38 DataSchema forms load as 0.35 DDL lists: every loaded read step holds strings."""
    upgraded = 0
    for manifest in contrib.manifests:
        if not manifest.ok:
            continue
        for event in manifest.snapshot.metadata:
            read = getattr(event, "read", None)
            if read is not None and getattr(read, "schema", None) is not None:
                assert all(isinstance(column, str) for column in read.schema), manifest.rel_path
                upgraded += "fields:" in manifest.source_text
    assert upgraded >= 20  # kamu-contrib moved 25 manifests to the DataSchema form in 15059c7


@pytest.mark.parametrize("odf_version", ["0.35", "0.39"])
def test_the_ethereum_logs_roots_are_refused_in_every_workspace(odf_version):
    for rel_path in sorted(ETHEREUM_LOGS):
        problems = check_manifest(
            (CONTRIB / rel_path).read_bytes(), rel_path, odf_version=odf_version
        ).problems
        assert len(problems) == 1 and REFUSAL.match(str(problems[0])), [str(p) for p in problems]
        assert "EthereumLogs (ODF 0.36) is not one odfproj runs" in problems[0].message


def contrib_name(rel_path: str) -> str:
    text = (CONTRIB / rel_path).read_text()
    return re.search(r"^  name: (\S+)$", text, re.MULTILINE)[1]
