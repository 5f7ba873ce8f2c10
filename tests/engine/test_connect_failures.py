"""A Spark Connect client's exception says what a local session's says (JVM-free).

A local session's error carries its Java cause chain (py4j); a Connect client's carries the server's stack
trace as text, each cause on a ``Caused by: CLASS: MESSAGE`` line. ``describe_spark_error`` reads both
into the same one line: a malformed JSON line read by the warm engine's ``ingest`` named only the outer
"error while reading file" until it read the causes too.
"""

from __future__ import annotations

from odfproj.engine.spark import describe_spark_error

OUTER = (
    "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///data/x.json.  SQLSTATE: KD001"
)
MALFORMED = (
    "[MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are detected in record parsing: "
    "[null,null]."
)
JACKSON = "Unexpected character ('n' (code 110)): was expecting double-quote to start field name"


class _ConnectError(Exception):
    """The two methods odfproj reads of ``pyspark.errors.exceptions.connect.SparkException``."""

    def __init__(self, message: str, trace: str | None) -> None:
        super().__init__(message)
        self.message, self.trace = message, trace

    def getMessage(self) -> str:
        return self.message

    def getStackTrace(self) -> str | None:
        return self.trace


_ConnectError.__module__ = "pyspark.errors.exceptions.connect"

TRACE = f"""org.apache.spark.SparkException
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(QueryExecutionErrors.scala:1)
Caused by: org.apache.spark.SparkException: {MALFORMED}
Parse Mode: FAILFAST. To process malformed records as null result, try setting the option 'mode' as 'PERMISSIVE'.
\tat org.apache.spark.sql.catalyst.util.FailureSafeParser.parse(FailureSafeParser.scala:2)
Caused by: com.fasterxml.jackson.core.JsonParseException: {JACKSON}
\tat com.fasterxml.jackson.core.JsonParser._constructError(JsonParser.java:3)"""


class _Throwable:
    """A py4j Java exception: what a local session's error chain is made of."""

    def __init__(self, name: str, message: str, cause: _Throwable | None = None) -> None:
        self.name, self.message, self.cause = name, message, cause

    def getMessage(self) -> str:
        return self.message

    def getCause(self) -> _Throwable | None:
        return self.cause

    def getClass(self) -> _Throwable:
        return self

    def getSimpleName(self) -> str:
        return self.name


class _LocalError(Exception):
    java_exception = _Throwable(
        "SparkException",
        OUTER,
        _Throwable(
            "SparkException", MALFORMED + "\nParse Mode: FAILFAST.", _Throwable("JsonParseException", JACKSON)
        ),
    )


_LocalError.__module__ = "py4j.protocol"


def test_a_connect_error_names_its_causes_as_a_local_one_does() -> None:
    connect = describe_spark_error(_ConnectError(OUTER + "\n\nJVM stacktrace:\n" + TRACE, TRACE))
    assert connect == describe_spark_error(_LocalError())
    assert connect.message == f"{MALFORMED.rstrip('.')}: JsonParseException: {JACKSON}"


def test_a_connect_error_without_a_trace_is_its_first_line() -> None:
    assert describe_spark_error(_ConnectError(OUTER, None)).message == OUTER.split("  SQLSTATE")[0]
