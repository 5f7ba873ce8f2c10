"""A small project with data tests, shared by the quality tests: two roots, a derivative, a test file."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.manifests import derivative, ledger, root

#: cities pass all their tests; visits has a city that is not a city (a blocking failure) and a
#: negative amount (a warning).
TESTS = """\
cities:
  - not_null: name
  - unique: [name]
  - row_count: {min: 2, max: 10}
  - freshness: {max_age: 1d, of: ingest}
visits:
  - not_null: [id, city]
  - accepted_values: {column: city, values: [Oslo, Lima, Atlantis]}
  - relationships: {column: city, to: cities, field: name}
  - sql: SELECT * FROM `visits` WHERE amount < 0
    name: no_negative_amounts
    severity: warn
"""


def make_project(folder: Path, tests: str = TESTS) -> Path:
    """The project in ``folder``: odfproj.yaml, three manifests, their CSV data and tests/data.yaml."""
    (folder / "datasets").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "odfproj.yaml").write_text("name: quality\n")
    manifests = {
        "cities": root(
            "cities", path="data/cities/*.csv", schema=["name STRING", "country STRING"], merge=ledger("name")
        ),
        "visits": root(
            "visits",
            path="data/visits/*.csv",
            schema=["id BIGINT", "city STRING", "amount BIGINT"],
            merge=ledger("id"),
        ),
        "visits.copy": derivative("visits.copy", {"src": "visits"}, "SELECT * FROM src"),
    }
    for name, text in manifests.items():
        (folder / "datasets" / f"{name}.yaml").write_text(text)
    data = {
        "cities": "name,country\nOslo,NO\nLima,PE\n",
        "visits": "id,city,amount\n1,Oslo,10\n2,Lima,-5\n3,Atlantis,7\n",
    }
    for name, text in data.items():
        (folder / "data" / name).mkdir(parents=True)
        (folder / "data" / name / "1.csv").write_text(textwrap.dedent(text))
    (folder / "tests" / "data.yaml").write_text(tests)
    return folder
