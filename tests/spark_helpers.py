"""Helpers for tests that use the shared SparkSession (the ``spark`` fixture of tests/conftest.py)."""

from __future__ import annotations

from odfproj.engine.session import SparkSettings


class RecordingHolder:
    """A SparkSessionHolder over the shared test session that records whether anyone asked for it.

    Lets a test prove that a code path started no Spark work (``created`` stays False) while still
    running real Spark when it does. ``stop`` does nothing: the shared session outlives every test.
    """

    def __init__(self, spark) -> None:
        self._spark = spark
        self.settings = SparkSettings(
            master="local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
        )
        self.created = False

    def get(self):
        self.created = True
        return self._spark

    def size_work_by(self, work_bytes) -> None:
        """The shared session is started already: the size of the work changes nothing."""

    def stop(self) -> None:
        pass
