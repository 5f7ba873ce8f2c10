"""``odfproj diff --since``: a real project run twice on the shared Spark session, its tables diffed
(issue 32, point 2), against the rows changed by hand between the runs."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from tests import manifests
from tests.cli_inprocess import cli_in

pytestmark = pytest.mark.spark

FIRST = "id,city,pop\n1,Oslo,700\n2,Rome,2800\n3,Lima,9700\n"
#: Rome changed, Lima gone, Kyiv new.
SECOND = "id,city,pop\n1,Oslo,700\n2,Rome,2900\n4,Kyiv,2900\n"


@pytest.fixture(scope="module")
def diffed(spark, tmp_path_factory):
    """A project whose keyed snapshot root and keyless derivative ran twice; the moment between the runs."""
    root = tmp_path_factory.mktemp("diff") / "p"
    (root / "datasets").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "odfproj.yaml").write_text("name: diff\nmanifests: [datasets/*.yaml]\n")
    (root / "datasets" / "cities.yaml").write_text(
        manifests.root(
            "cities",
            path="data/cities-*.csv",
            schema=["id BIGINT", "city STRING", "pop BIGINT"],
            merge={"kind": "Snapshot", "primaryKey": ["id"]},
        )
    )
    (root / "datasets" / "big.yaml").write_text(
        manifests.derivative("big", ["cities"], "SELECT event_time, city FROM cities WHERE pop > 1000")
    )
    (root / "data" / "cities-1.csv").write_text(FIRST)
    return root


def test_diff_names_the_rows_added_removed_and_changed_since_a_moment(diffed, spark, monkeypatch) -> None:
    odfproj = cli_in(spark, monkeypatch, lambda: diffed)
    code, out = odfproj("run")
    assert code == 0, out
    time.sleep(0.01)
    between = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    time.sleep(0.01)
    (diffed / "data" / "cities-2.csv").write_text(SECOND)  # the next full snapshot
    code, out = odfproj("run")
    assert code == 0, out

    code, out = odfproj("diff", "cities", "--since", between)
    assert code == 0, out
    assert out.splitlines()[0] == "cities: 3 -> 3 rows: +1 added, -1 removed, ~1 changed (by key id)"
    lines = out.splitlines()
    assert lines[1].startswith("  + event_time=") and lines[1].endswith(", id=4, city=Kyiv, pop=2900")
    assert lines[2].startswith("  - event_time=") and lines[2].endswith(", id=3, city=Lima, pop=9700")
    # The snapshot's time is the row's event time: a changed row's moves with it.
    assert lines[3].startswith("  ~ id=2: event_time: ") and lines[3].endswith(", pop: 2800 -> 2900")

    code, out = odfproj("diff", "--since", between, "--format", "json")
    assert code == 0, out
    by_name = {d["dataset"]: d for d in json.loads(out)["datasets"]}
    cities, big = by_name["cities"], by_name["big"]
    assert (cities["added"], cities["removed"], cities["changed"]) == (1, 1, 1)
    # No primary key: rows compare as multisets. Lima left and Kyiv came; Rome's row moved to the new
    # snapshot's event time, so it is one row removed and one added.
    assert big["key"] == []
    assert (big["rows_before"], big["rows_after"], big["added"], big["removed"]) == (2, 2, 2, 2)
    assert [r["city"] for r in big["added_sample"]] == ["Kyiv", "Rome"]
    assert [r["city"] for r in big["removed_sample"]] == ["Lima", "Rome"]

    code, out = odfproj("diff", "--since", between, "--format", "markdown")
    assert code == 0, out
    assert "| `cities` | 3 | 3 | 1 | 1 | 1 |  |" in out and "| `big` | 2 | 2 | 2 | 2 | n/a |  |" in out

    # Before anything was ingested: every current row is added.
    code, out = odfproj("diff", "cities", "--since", "2000-01-01T00:00:00Z")
    assert code == 0 and out.startswith("cities: 0 -> 3 rows: +3 added, -0 removed, ~0 changed"), out


def test_diff_refuses_bad_input_in_one_line(diffed, spark, monkeypatch) -> None:
    odfproj = cli_in(spark, monkeypatch, lambda: diffed)
    code, out = odfproj("diff", "cities")
    assert (
        code != 0
        and out.strip().endswith(
            "--since TIME (an RFC 3339 system time) or --env NAME (an environment against production)"
        )
        and "Traceback" not in out
    )
    code, out = odfproj("diff", "nowhere", "--since", "2000-01-01T00:00:00Z")
    assert code != 0 and "nowhere" in out and "Traceback" not in out and len(out.strip().splitlines()) == 1
    code, out = odfproj("diff", "--since", "yesterday")
    assert code != 0 and "expected an RFC 3339 time" in out
