"""A construct of ODF 0.36-0.39 with no 0.35 event stops only what needs it (issue 34, point 1).

The refusal of a CDC merge strategy or a type without a 0.35 equivalent is a problem of its manifest like
any other: outside ``--select``/``--exclude`` a warning, inside it (or with no selector) an error, in one
line naming file, dataset, construct, version and setting. The project loader, no JVM.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.errors import ManifestError
from odfproj.project.config import load_project
from odfproj.project.loader import PlanRequest, load_manifests_of, load_selected
from tests import manifests


def push_root(name: str, value_type: str, merge: dict) -> str:
    """A push-source root whose read schema is in the ODF 0.38 DataSchema form."""
    fields = [{"name": "id", "type": "Int64"}, {"name": "v", "type": value_type}]
    source = {
        "kind": "AddPushSource",
        "sourceName": "main",
        "read": {"kind": "NdJson", "schema": {"fields": fields}},
    }
    return manifests.snapshot(name, "Root", [{**source, "merge": merge}])


FILES = {
    "datasets/orders.yaml": push_root("com.example.orders", "String", {"kind": "Append"}),
    "datasets/cdc.yaml": push_root(
        "com.example.cdc", "String", {"kind": "ChangelogStream", "primaryKey": ("id",)}
    ),
    "datasets/half.yaml": push_root("com.example.half", "Float16", {"kind": "Append"}),
}

CDC_LINE = (
    "datasets/cdc.yaml:18:15: com.example.cdc: merge strategy ChangelogStream needs ODF 0.37 "
    '(odf_version: "0.39" in odfproj.yaml)'
)
HALF_LINE = (
    "datasets/half.yaml:16:21: com.example.half: read.schema field 'v': type Float16 needs ODF 0.38 "
    '(odf_version: "0.39" in odfproj.yaml)'
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    for rel, text in {"odfproj.yaml": "name: p\n", **FILES}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def selected(root: Path, **request):
    config = load_project(root)
    asked = PlanRequest(**request)
    return load_selected(config, asked, load_manifests_of(config, asked), known_ids={})


def test_without_a_selector_each_refusal_stops_the_project_in_one_line(project):
    with pytest.raises(ManifestError) as raised:
        selected(project)
    assert sorted(raised.value.problems) == [CDC_LINE, HALF_LINE]


def test_outside_the_selection_the_refusals_are_warnings(project):
    loaded = selected(project, select=("com.example.orders",))
    assert loaded.selection.names == ("com.example.orders",)
    assert sorted(loaded.selection.warnings) == [
        f"{CDC_LINE} (not selected: skipped)",
        f"{HALF_LINE} (not selected: skipped)",
    ]


def test_inside_the_selection_a_refusal_stops_it(project):
    with pytest.raises(ManifestError) as raised:
        selected(project, exclude=("com.example.half",))
    assert raised.value.problems == [CDC_LINE]


def test_the_upgraded_root_loads_as_its_035_event(project):
    loaded = selected(project, select=("com.example.orders",))
    snapshot = loaded.manifests.get("com.example.orders").snapshot
    assert snapshot.metadata[0].read.schema == ("id BIGINT NOT NULL", "v STRING NOT NULL")


def test_a_039_workspace_runs_cdc_merges_and_refuses_the_rest_as_not_supported_yet(project):
    """The loader passes odfproj.yaml's odf_version to the one decision: a 0.39 workspace records a CDC
    merge as it is, and refuses what odfproj cannot run yet."""
    (project / "odfproj.yaml").write_text('name: p\nodf_version: "0.39"\n')
    with pytest.raises(ManifestError) as raised:
        selected(project)
    assert sorted(raised.value.problems) == [
        "datasets/half.yaml:16:21: com.example.half: read.schema field 'v': type Float16 (ODF 0.38) "
        "is not supported yet by odfproj",
    ]
    assert selected(project, select=("com.example.cdc",)).selection.names == ("com.example.cdc",)
    # The 0.38 forms with a 0.35 meaning load in a 0.39 workspace too.
    assert selected(project, select=("com.example.orders",)).selection.names == ("com.example.orders",)
