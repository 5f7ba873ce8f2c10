"""Loading a project: every manifest rendered, validated and parsed; problems collected, never raised."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from odfproj.errors import ManifestError
from odfproj.odf.model import DatasetKind, SetPollingSource, SetTransform
from odfproj.project.config import ProjectConfig
from odfproj.project.manifests import load_manifests
from tests.project.conftest import ALL_DATASETS, derivative_manifest, root_manifest

MakeProject = Callable[[Mapping[str, str]], ProjectConfig]


def test_loads_every_manifest_of_the_project(project: ProjectConfig) -> None:
    loaded = load_manifests(project)
    assert loaded.ok, [str(p) for p in loaded.problems]
    assert [m.rel_path for m in loaded.manifests] == sorted(m.rel_path for m in loaded.manifests)
    assert sorted(m.name for m in loaded.manifests) == list(ALL_DATASETS)
    assert all(m.snapshot is not None and m.ok for m in loaded.manifests)
    orders = loaded.by_name["com.example.orders"]
    assert orders.rel_path == "datasets/sales/orders.yaml"
    assert orders.path == project.root / "datasets/sales/orders.yaml"
    assert orders.snapshot is not None and orders.snapshot.kind is DatasetKind.Root
    source = orders.snapshot.metadata[0]
    assert isinstance(source, SetPollingSource)
    assert source.fetch.path == "/data/landing/orders/*.csv"  # type: ignore[union-attr]
    assert "{{" in orders.source_text and "{{" not in orders.rendered_text


def test_by_name_is_case_insensitive(project: ProjectConfig) -> None:
    loaded = load_manifests(project)
    assert loaded.by_name["COM.Example.Revenue"] is loaded.by_name["com.example.revenue"]
    assert "com.EXAMPLE.orders" in loaded.by_name
    assert loaded.get("nope") is None
    assert sorted(loaded.by_name) == list(ALL_DATASETS)


def test_vars_override_and_target_reach_the_templates(project: ProjectConfig) -> None:
    loaded = load_manifests(
        project, vars_override={"landing": "s3://bucket", "currency": "USD"}, target="prod"
    )
    orders = loaded.by_name["com.example.orders"]
    assert "path: s3://bucket/orders/*.csv" in orders.rendered_text
    fx = loaded.by_name["com.example.fx-rates"].rendered_text
    assert "path: /data/fx/prod/*.csv" in fx
    assert "        - USD\n" in fx


def test_derivative_transform_is_parsed(project: ProjectConfig) -> None:
    revenue = load_manifests(project).by_name["com.example.revenue"]
    assert revenue.snapshot is not None
    transform = revenue.snapshot.metadata[0]
    assert isinstance(transform, SetTransform)
    assert [i.dataset_ref for i in transform.inputs] == [
        "com.example.orders-enriched",
        "com.example.fx-rates",
    ]
    assert transform.transform.query == "SELECT * FROM `com.example.orders-enriched`"  # type: ignore[union-attr]


def test_files_restricts_loading(project: ProjectConfig) -> None:
    loaded = load_manifests(project, files=[Path("datasets/other/weather.yaml")])
    assert [m.name for m in loaded.manifests] == ["org.other.weather"]


def test_macro_files_are_never_manifests(make_project: MakeProject) -> None:
    config = make_project(
        {
            "odfproj.yaml": "name: p\nmanifests: ['**/*.yaml']\n",
            "macros/m.yaml": "{% macro x() %}x{% endmacro %}\n",
            "a.yaml": root_manifest("a"),
        }
    )
    assert [m.rel_path for m in load_manifests(config).manifests] == ["a.yaml"]


def test_validation_problems_point_at_the_rendered_line(make_project: MakeProject) -> None:
    text = root_manifest("a").replace("header: true", "header: {{ var('header') }}")
    config = make_project({"datasets/a.yaml": text})
    loaded = load_manifests(config, vars_override={"header": "'yes please'"})
    manifest = loaded.manifests[0]
    assert manifest.snapshot is None and not manifest.ok
    line = text.splitlines().index("        header: {{ var('header') }}") + 1
    assert [str(p) for p in loaded.problems] == [
        f"datasets/a.yaml:{line}:17: field 'header' must be a boolean, got string 'yes please'"
    ]


def test_template_problems_keep_the_dataset_name(make_project: MakeProject) -> None:
    config = make_project(
        {
            "datasets/a.yaml": root_manifest("a", path="{{ nope }}"),
            "datasets/b.yaml": derivative_manifest("b", ["a"]),
        }
    )
    loaded = load_manifests(config)
    a = loaded.by_name["a"]
    assert a.snapshot is None and a.rendered_text == ""
    line = a.source_text.splitlines().index("        path: {{ nope }}") + 1
    assert [str(p) for p in loaded.problems] == [
        f"datasets/a.yaml:{line}:1: template error: 'nope' is undefined"
    ]


def test_duplicate_names_name_both_files(make_project: MakeProject) -> None:
    config = make_project(
        {
            "datasets/one.yaml": root_manifest("com.example.x"),
            "datasets/two.yaml": root_manifest("COM.example.X"),
        }
    )
    loaded = load_manifests(config)
    assert [str(p) for p in loaded.problems] == [
        "datasets/two.yaml:4:9: dataset 'COM.example.X' is defined twice: in datasets/one.yaml and datasets/two.yaml"
    ]
    assert loaded.by_name["com.example.x"].rel_path == "datasets/one.yaml"
    with pytest.raises(ManifestError, match="defined twice"):
        loaded.raise_for_problems()


def test_unreadable_bytes_and_broken_macros_are_problems(make_project: MakeProject) -> None:
    config = make_project({"datasets/a.yaml": "", "macros/bad.j2": "{% macro %}"})
    (config.root / "datasets/a.yaml").write_bytes(b"kind: DatasetSnapshot\nname: \xff\n")
    problems = [str(p) for p in load_manifests(config).problems]
    assert problems == [
        "macros/bad.j2:1:1: template syntax error: expected token 'name', got 'end of statement block'",
        "datasets/a.yaml:2:7: not valid UTF-8: byte 0xff at offset 28 (invalid start byte); "
        "manifests must be UTF-8 encoded",
    ]


def test_missing_file_is_a_problem(project: ProjectConfig) -> None:
    loaded = load_manifests(project, files=[Path("datasets/nope.yaml")])
    assert [str(p) for p in loaded.problems] == ["datasets/nope.yaml:1:1: no such file"]


PARALLEL_CHECK = """
import os, sys
from pathlib import Path
import odfproj.project.manifests as m
from odfproj.project.config import load_project

config = load_project(Path(sys.argv[1]))
serial = m.load_manifests(config)
m.PARALLEL_MIN_MANIFESTS = 1
pools = []

class CountingPool(m.ProcessPoolExecutor):
    def __init__(self, *args, **kwargs):
        pools.append(args)
        super().__init__(*args, **kwargs)

m.ProcessPoolExecutor = CountingPool
parallel = m.load_manifests(config)
assert parallel.manifests == serial.manifests, "different manifests"
assert parallel.problems == serial.problems and parallel.problems, "different problems"
if len(os.sched_getaffinity(0)) > 1:
    assert pools, "the parallel path was not taken"
print("same")
"""


def test_parallel_loading_gives_the_same_result_as_serial(project: ProjectConfig) -> None:
    """Large projects are loaded by forked workers; what they return must equal a serial load.

    Run in a fresh interpreter: this test process has threads (Spark, servers), and loading
    deliberately stays serial in a threaded process, where fork is unsafe.
    """
    broken = project.root / "datasets" / "zz-broken.yaml"
    broken.write_text("kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {{ var('nope') }}\n")
    proc = subprocess.run(
        [sys.executable, "-c", PARALLEL_CHECK, str(project.root)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "same", proc.stderr
