"""Spark's own log records go to the run's log file, not to the console (issue 14, point 8).

The JVM's stderr is routed line by line by ``_forward_stderr``; these tests feed it what a JVM writes
(with the pattern of resources/spark/log4j2.properties) and need no JVM.
"""

from __future__ import annotations

import io
import logging
import os
import threading
import time

import pytest

from odfproj.engine.session import SPARK_LOGGER, _forward_stderr

JVM_STDERR = b"""WARNING: Using incubator modules: jdk.incubator.vector
26/11/23 21:40:01 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform
26/11/23 21:40:09 ERROR Executor: Exception in task 0.0 in stage 3.0 (TID 3)
org.apache.spark.SparkDateTimeException: [CANNOT_PARSE_TIMESTAMP] Text 'pending' could not be parsed
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.ansiDateTimeParseError(QueryExecutionErrors.scala:1)
\t... 17 more
Caused by: java.time.format.DateTimeParseException: Text 'pending' could not be parsed
SLF4J: Failed to load class "org.slf4j.impl.StaticLoggerBinder".
SLF4J: Defaulting to no-operation (NOP) logger implementation
SLF4J: See http://www.slf4j.org/codes.html#StaticLoggerBinder for further details.
java.lang.OutOfMemoryError is not a log record
"""


@pytest.fixture
def records(caplog):
    with caplog.at_level(logging.DEBUG, logger=SPARK_LOGGER.name):
        yield caplog


class _Stderr(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.buffer = io.BytesIO()


def _route(monkeypatch, verbose: bool) -> str:
    """What reaches the console when a JVM writes ``JVM_STDERR`` to the pipe the forwarder reads."""
    err = _Stderr()
    monkeypatch.setattr("sys.stderr", err)
    read, write = os.pipe()
    os.write(write, JVM_STDERR)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        _forward_stderr(stream, verbose)
    return err.buffer.getvalue().decode()


def test_log_records_go_to_the_log_and_other_lines_to_the_console(monkeypatch, records):
    console = _route(monkeypatch, verbose=False)
    logged = [(r.levelno, r.getMessage()) for r in records.records if r.name == SPARK_LOGGER.name]
    assert [level for level, _ in logged] == [logging.WARNING, logging.ERROR]
    assert "NativeCodeLoader" in logged[0][1]
    error = logged[1][1]
    assert "Exception in task" in error and "\tat org.apache" in error and "Caused by:" in error
    # The start-up noise (and SLF4J's, at the S3A connector's first use) is dropped; a line that is no
    # log record (a crash message) is still shown.
    assert console == "java.lang.OutOfMemoryError is not a log record\n"


def test_verbose_also_shows_every_line_on_the_console(monkeypatch, records):
    console = _route(monkeypatch, verbose=True)
    assert console == JVM_STDERR.decode()
    assert len([r for r in records.records if r.name == SPARK_LOGGER.name]) == 2


def test_spark_records_never_reach_the_last_resort_handler(monkeypatch, capsys):
    """With no run log listening, Python would print a WARNING to stderr; the NullHandler prevents it."""
    _route(monkeypatch, verbose=False)
    assert "NativeCodeLoader" not in capsys.readouterr().err


def test_a_lone_warning_is_logged_without_waiting_for_the_next_line(records):
    """The run closes its log when it ends; the JVM's last warning must be in it by then."""
    read, write = os.pipe()
    with os.fdopen(read, "rb") as stream:
        forwarder = threading.Thread(target=_forward_stderr, args=(stream, False), daemon=True)
        forwarder.start()
        os.write(write, b"26/11/23 21:40:01 WARN WindowExec: No Partition Defined for Window operation!\n")
        deadline = time.monotonic() + 30
        while not records.records and time.monotonic() < deadline:
            time.sleep(0.05)
        messages = [r.getMessage() for r in records.records]
        os.close(write)
        forwarder.join(timeout=30)
    assert len(messages) == 1 and messages[0].endswith(
        "WARN WindowExec: No Partition Defined for Window operation!"
    )
