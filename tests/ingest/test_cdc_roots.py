"""CDC roots end to end (issue 34, point 4): ChangelogStream and UpsertStream sources of a 0.39 workspace,
run on the shared Spark session; their state as the state index serves it, and bad input refused in one
line naming the file and the record's line, leaving the dataset as it was."""

from __future__ import annotations

import pytest

from odfproj.project.config import load_project
from odfproj.storage.workspace import Workspace
from tests import manifests
from tests.cli_inprocess import cli_in

pytestmark = pytest.mark.spark

SCHEMA = ["op STRING", "id BIGINT", "name STRING"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("cdc") / "p"
    for folder in ("datasets", "data/log", "data/ups"):
        (root / folder).mkdir(parents=True)
    (root / "odfproj.yaml").write_text('name: cdc\nmanifests: [datasets/*.yaml]\nodf_version: "0.39"\n')
    (root / "datasets" / "log.yaml").write_text(
        manifests.root(
            "log",
            path="data/log/*.csv",
            schema=SCHEMA,
            merge={"kind": "ChangelogStream", "primaryKey": ["id"]},
        )
    )
    (root / "datasets" / "ups.yaml").write_text(
        manifests.root(
            "ups", path="data/ups/*.csv", schema=SCHEMA, merge={"kind": "UpsertStream", "primaryKey": ["id"]}
        )
    )
    return root


def state(project, name):
    out = Workspace(load_project(project).workspace()).open(name)
    from odfproj.state.read import read_state

    table = read_state(out)
    return sorted(zip(table.column("id").to_pylist(), table.column("name").to_pylist(), strict=True))


def test_cdc_roots_keep_their_state_across_batches_and_refuse_a_broken_one(project, spark, monkeypatch):
    odfproj = cli_in(spark, monkeypatch, lambda: project)
    (project / "data/log/1.csv").write_text("op,id,name\n+A,1,a\n+A,2,b\n+A,3,c\n")
    (project / "data/ups/1.csv").write_text("op,id,name\n+A,1,a\n+A,2,b\n+A,3,c\n")
    code, out = odfproj("run")
    assert code == 0, out
    (project / "data/log/2.csv").write_text("op,id,name\n-C,2,b\n+C,2,B\n-R,3,c\n+A,4,d\n")
    (project / "data/ups/2.csv").write_text("op,id,name\n+C,2,B\n-R,3,\n-R,9,\n+A,4,d\n+A,1,a\n")
    code, out = odfproj("run")
    assert code == 0, out
    expected = [(1, "a"), (2, "B"), (4, "d")]
    assert state(project, "log") == expected and state(project, "ups") == expected
    head = Workspace(load_project(project).workspace()).open("log").head()

    (project / "data/log/3.csv").write_text("op,id,name\n+A,5,e\n-R,1,not-a\n")
    code, out = odfproj("run", "--select", "log")
    assert code != 0
    failure = next(line for line in out.splitlines() if "refused the new data" in line)
    assert "log" in failure and "data/log/3.csv line 3 (id=1): -R carries values other than" in failure
    assert "Traceback" not in out
    assert Workspace(load_project(project).workspace()).open("log").head() == head
    code, out = odfproj("verify", "--integrity")
    assert code == 0, out
