"""A small project with data tests, shared by the quality tests: two roots, a derivative, a test file."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.run.test_run import DERIVATIVE  # the same one-input derivative

ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/{name}/*.csv
      read:
        kind: Csv
        header: true
        schema: [{schema}]
      merge:
        kind: Ledger
        primaryKey: [{key}]
"""


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


def make_project(root: Path, tests: str = TESTS) -> Path:
    """The project in ``root``: odfproj.yaml, three manifests, their CSV data and tests/data.yaml."""
    (root / "datasets").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "odfproj.yaml").write_text("name: quality\n")
    manifests = {
        "cities": ROOT.format(name="cities", schema="name STRING, country STRING", key="name"),
        "visits": ROOT.format(name="visits", schema="id BIGINT, city STRING, amount BIGINT", key="id"),
        "visits.copy": DERIVATIVE.format(name="visits.copy", input="visits"),
    }
    for name, text in manifests.items():
        (root / "datasets" / f"{name}.yaml").write_text(text)
    data = {
        "cities": "name,country\nOslo,NO\nLima,PE\n",
        "visits": "id,city,amount\n1,Oslo,10\n2,Lima,-5\n3,Atlantis,7\n",
    }
    for name, text in data.items():
        (root / "data" / name).mkdir(parents=True)
        (root / "data" / name / "1.csv").write_text(textwrap.dedent(text))
    (root / "tests" / "data.yaml").write_text(tests)
    return root
