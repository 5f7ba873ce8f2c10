"""Hostile pull requests, Spark settings: odfproj.yaml cannot make plan (or run) execute, read or connect.

Issue 13 showed ``spark.driver.memory: 24m`` + ``spark.driver.extraJavaOptions:
-XX:OnOutOfMemoryError='touch MARKER'`` in a target running a command during ``plan``, and a
``spark://`` master making plan connect out. Two defences are proven here:

- the allowlist: a project's ``spark_conf`` key outside the tuning keys, a value that is not of the
  key's kind, or a master that is not local or a cluster manager is refused when odfproj.yaml is loaded,
  as one line naming the key, the file and the target: before a JVM could start (a java that records
  every call proves no JVM was started);
- the sandbox: even allowed settings never reach the analysis session of ``plan`` (a java that records
  its options proves the JVM got none of them; a listener proves plan did not connect to the master).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odfproj.engine.session import SparkSettings
from odfproj.engine.settings import ALLOWED_SPARK_CONF, analysis_settings, target_settings
from odfproj.errors import EngineError
from odfproj.plan.engine_checks import query_checker
from odfproj.plan.model import Action
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import CONFIG_FILE, ProjectError, load_project, parse_config
from odfproj.run.run import run_project
from odfproj.storage.workspace import Workspace
from tests.conftest import REPO_DIR
from tests.plan.test_query_evolution import ROOT
from tests.security.sec_engine_helpers import SilentListener, java_witness, odfproj, odfproj_each
from tests.spark_helpers import RecordingHolder

BY_CITY = """\
kind: DatasetSnapshot
version: 1
content:
  name: by-city
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: sales
          alias: s
      transform:
        kind: Sql
        engine: spark
        query: SELECT max(CAST(day AS TIMESTAMP)) AS event_time, city, count(*) AS n FROM s GROUP BY city
"""


def _config(target_yaml: str) -> str:
    return f"name: hostile\ntargets:\n  dev:\n{target_yaml}"


def _conf_yaml(conf: dict[str, str], master: str = "local[2]") -> str:
    lines = [f"    spark_master: {master!r}", "    spark_conf:"]
    lines += [f"      {key}: {value!r}" for key, value in conf.items()]
    return "\n".join(lines) + "\n"


# --- the allowlist, at load time (no JVM can start before it) --------------------------------------------

#: Keys a project must never set: each executes code, loads code, reads or names files, or reaches hosts.
HOSTILE_KEYS = {
    "spark.driver.extraJavaOptions": "-XX:OnOutOfMemoryError='touch {marker}'",
    "spark.executor.extraJavaOptions": "-XX:OnOutOfMemoryError='touch {marker}'",
    "spark.driver.defaultJavaOptions": "-XX:OnError='touch {marker}'",
    "spark.driver.extraClassPath": "{tmp}/evil.jar",
    "spark.driver.extraLibraryPath": "{tmp}/lib",
    "spark.jars": "file://{tmp}/evil.jar",
    "spark.jars.packages": "org.evil:evil:1.0",
    "spark.jars.repositories": "{listener}",
    "spark.jars.ivySettings": "{tmp}/ivysettings.xml",
    "spark.plugins": "org.evil.Plugin",
    "spark.extraListeners": "org.evil.Listener",
    "spark.sql.queryExecutionListeners": "org.evil.Listener",
    "spark.sql.runSQLOnFiles": "true",
    "spark.sql.extensions": "org.evil.Extensions",
    "spark.sql.catalogImplementation": "hive",
    "spark.sql.catalog.evil": "org.evil.Catalog",
    "spark.sql.warehouse.dir": "{tmp}/warehouse",
    "spark.hadoop.fs.defaultFS": "{listener}",
    "spark.files": "/etc/passwd",
    "spark.submit.pyFiles": "{tmp}/evil.py",
    "spark.driver.host": "evil.example",
    "spark.eventLog.dir": "{listener}",
    "spark.sql.session.timeZone": "America/Lima",
    "spark.serializer": "org.evil.Serializer",
}

#: Allowed keys with values that are not of the key's kind (a class name, options smuggled in a size).
HOSTILE_VALUES = {
    "spark.driver.memory": "24m -XX:OnOutOfMemoryError=touch {marker}",
    "spark.io.compression.codec": "org.evil.Codec",
    "spark.sql.parquet.compression.codec": "../../{marker}",
    "spark.sql.shuffle.partitions": "2 --conf spark.jars={tmp}/evil.jar",
}

HOSTILE_MASTERS = [
    "local-cluster[1,1,512]",
    "mesos://127.0.0.1:5050",
    "local[2] --conf spark.jars=/tmp/evil.jar",
    "file:///etc/passwd",
    "sc://127.0.0.1:15002/;token=secret",
]


def _expand(value: str, tmp: Path) -> str:
    return value.format(marker=tmp / "MARKER", tmp=tmp, listener="http://127.0.0.1:9")


@pytest.mark.parametrize("key", sorted(HOSTILE_KEYS))
def test_hostile_spark_conf_key_is_refused_when_the_project_loads(tmp_path, key) -> None:
    text = _config(_conf_yaml({key: _expand(HOSTILE_KEYS[key], tmp_path)}))
    with pytest.raises(ProjectError) as info:
        parse_config(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message
    assert str(tmp_path / CONFIG_FILE) in message and "target 'dev'" in message and key in message
    assert "not an allowed Spark setting" in message
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("key", sorted(HOSTILE_VALUES))
def test_hostile_value_of_an_allowed_key_is_refused(tmp_path, key) -> None:
    value = _expand(HOSTILE_VALUES[key], tmp_path)
    with pytest.raises(ProjectError) as info:
        parse_config(tmp_path, _config(_conf_yaml({key: value})))
    message = str(info.value)
    assert "\n" not in message and key in message and "target 'dev'" in message and "is not" in message


@pytest.mark.parametrize("master", HOSTILE_MASTERS)
def test_hostile_spark_master_is_refused(tmp_path, master) -> None:
    with pytest.raises(ProjectError) as info:
        parse_config(tmp_path, _config(_conf_yaml({}, master=master)))
    message = str(info.value)
    assert "\n" not in message and "spark_master" in message and "target 'dev'" in message


def test_allowed_settings_load_and_yaml_booleans_read_as_spark_does(tmp_path) -> None:
    text = _config(
        "    spark_master: spark://spark-master.internal:7077\n"
        "    spark_conf:\n"
        "      spark.sql.adaptive.enabled: false\n"
        "      spark.driver.memory: 4g\n"
        "      spark.sql.shuffle.partitions: 8\n"
        "      spark.sql.autoBroadcastJoinThreshold: -1\n"
    )
    target = parse_config(tmp_path, text).target()
    assert dict(target.spark_conf) == {
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
    }
    settings = target.spark_settings()
    assert settings.master == "spark://spark-master.internal:7077"
    assert settings.effective_conf()["spark.driver.memory"] == "4g"


def test_a_library_caller_cannot_bypass_the_allowlist() -> None:
    with pytest.raises(EngineError, match=r"spark\.jars"):
        target_settings("local[2]", {"spark.jars": "/tmp/evil.jar"})
    with pytest.raises(EngineError, match="spark_master"):
        target_settings("local-cluster[1,1,512]", {})


def test_the_analysis_sandbox_takes_nothing_from_a_target() -> None:
    sandbox = analysis_settings().effective_conf()
    assert analysis_settings().master == "local[2]"
    assert sandbox["spark.sql.runSQLOnFiles"] == "false"
    assert sandbox["spark.sql.catalogImplementation"] == "in-memory"
    # odfproj's own JVM options (log configuration, JIT) and nothing else.
    assert (
        sandbox["spark.driver.extraJavaOptions"]
        == SparkSettings().effective_conf()["spark.driver.extraJavaOptions"]
    )
    assert "OnOutOfMemoryError" not in sandbox["spark.driver.extraJavaOptions"]
    assert not any(k in sandbox for k in ("spark.jars", "spark.jars.packages", "spark.plugins"))
    assert not set(sandbox) & (set(ALLOWED_SPARK_CONF) - set(SparkSettings().effective_conf()))


def test_every_allowed_key_is_documented() -> None:
    """docs/guide/spark-settings.md is the allowlist's reference: it must name every key the code allows."""
    doc = (REPO_DIR / "docs" / "guide" / "spark-settings.md").read_text(encoding="utf-8")
    missing = [key for key in ALLOWED_SPARK_CONF if f"`{key}`" not in doc]
    assert not missing


# --- end to end: the CLI on a project whose changed query makes plan start the engine ---------------------


@pytest.fixture(scope="module")
def sec_engine_built(spark, tmp_path_factory) -> Path:
    """``sales`` run once (on the shared session) so that a new derivative's query makes plan start Spark."""
    root = tmp_path_factory.mktemp("sec-engine") / "proj"
    (root / "datasets").mkdir(parents=True)
    (root / "data").mkdir()
    (root / CONFIG_FILE).write_text("name: hostile\n")
    (root / "datasets" / "sales.yaml").write_text(ROOT)
    (root / "data" / "1.csv").write_text("id,city,amount,day\n1,Oslo,1.5,2026-01-01\n2,Lima,2.5,2026-01-02\n")
    result = run_project(load_project(root), PlanRequest(), holder=RecordingHolder(spark))
    assert result.ok, [r.message for r in result.results]
    return root


@pytest.fixture
def sec_engine_project(sec_engine_built, tmp_path) -> Path:
    """A copy of the built project with a new derivative: plan must validate its query with Spark."""
    root = Path(shutil.copytree(sec_engine_built, tmp_path / "proj"))
    (root / "datasets" / "by-city.yaml").write_text(BY_CITY)
    return root


@pytest.mark.spark
def test_java_witness_control(sec_engine_project, tmp_path) -> None:
    """Without this the no-JVM tests prove nothing: with an allowed conf, plan does call java."""
    env, calls = java_witness(tmp_path / "java", passthrough=False)
    (sec_engine_project / CONFIG_FILE).write_text(_config(_conf_yaml({"spark.sql.shuffle.partitions": "3"})))
    proc = odfproj(["plan"], sec_engine_project, env)
    assert calls.exists(), proc.stdout + proc.stderr


@pytest.mark.spark
def test_the_reported_out_of_memory_command_does_not_run_in_plan(sec_engine_project, tmp_path) -> None:
    marker = tmp_path / "MARKER"
    conf = {
        "spark.driver.memory": "24m",
        "spark.driver.extraJavaOptions": f"-XX:OnOutOfMemoryError='touch {marker}'",
    }
    (sec_engine_project / CONFIG_FILE).write_text(_config(_conf_yaml(conf)))
    env, calls = java_witness(tmp_path / "java", passthrough=False)
    commands = [["plan"], ["validate"], ["run"], ["apply", "--auto-approve"]]
    for command, proc in zip(commands, odfproj_each(commands, sec_engine_project, env), strict=True):
        assert proc.returncode == 1, (command, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (command, proc.stderr)
        assert "spark.driver.extraJavaOptions" in lines[0] and CONFIG_FILE in lines[0]
        assert "target 'dev'" in lines[0]
    assert not calls.exists(), "a JVM was started before the setting was refused"
    assert not marker.exists()
    assert not (sec_engine_project / ".odf" / "by-city").exists()


@pytest.mark.spark
@pytest.mark.parametrize(
    ("key", "value"),
    [("spark.sql.runSQLOnFiles", "true"), ("spark.jars", "/tmp/evil.jar"), ("spark.plugins", "a.B")],
)
def test_refused_before_a_jvm_starts(sec_engine_project, tmp_path, key, value) -> None:
    (sec_engine_project / CONFIG_FILE).write_text(_config(_conf_yaml({key: value})))
    env, calls = java_witness(tmp_path / "java", passthrough=False)
    proc = odfproj(["plan"], sec_engine_project, env)
    assert proc.returncode == 1 and key in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not calls.exists()


@pytest.mark.spark
def test_plan_analyses_in_the_sandbox_whatever_the_target_says(sec_engine_project, tmp_path) -> None:
    """Allowed settings and a cluster master apply to run, never to plan: the JVM gets none of them."""
    listener = SilentListener()
    try:
        conf = {"spark.driver.memory": "24m", "spark.sql.shuffle.partitions": "7"}
        master = f"spark://127.0.0.1:{listener.port}"
        (sec_engine_project / CONFIG_FILE).write_text(_config(_conf_yaml(conf, master=master)))
        env, calls = java_witness(tmp_path / "java", passthrough=True)
        proc = odfproj(["plan", "--format", "json"], sec_engine_project, env)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    assert '"n int64"' in proc.stdout, "the query was validated (its output schema is shown)"
    assert listener.received == [], "plan connected to the target's master"
    jvm_args = calls.read_text()
    assert (
        "24m" not in jvm_args
        and str(listener.port) not in jvm_args
        and "shuffle.partitions=7" not in jvm_args
    )


@pytest.mark.spark
def test_a_run_with_allowed_settings_works_and_uses_them(sec_engine_project, tmp_path) -> None:
    """The allowlist is not a wall: `odfproj run` starts its JVM with the target's allowed settings."""
    conf = {
        "spark.driver.memory": "700m",
        "spark.sql.parquet.compression.codec": "zstd",
        "spark.sql.shuffle.partitions": "3",
    }
    (sec_engine_project / CONFIG_FILE).write_text(_config(_conf_yaml(conf)))
    env, calls = java_witness(tmp_path / "java", passthrough=True)
    proc = odfproj(["run"], sec_engine_project, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-Xmx700m" in calls.read_text(), "the target's driver memory reached the JVM"
    files = list(Workspace(sec_engine_project / ".odf").open("by-city").layout.data_dir.iterdir())
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 2, "by-city has its two cities"


@pytest.mark.spark
def test_a_variant_output_refuses_that_step_and_plans_the_rest(sec_engine_project, engine) -> None:
    """Issue 13, point 7: a query whose output ODF cannot store is one refused step, not an aborted plan.

    (It lives here for this module's built project; the SQL vectors are in test_sql_allowlist.py.)
    """
    variant = BY_CITY.replace("by-city", "as-variant").replace(
        "SELECT max(CAST(day AS TIMESTAMP)) AS event_time, city, count(*) AS n FROM s GROUP BY city",
        "SELECT CAST(day AS TIMESTAMP) AS event_time, parse_json(city) AS v FROM s",
    )
    (sec_engine_project / "datasets" / "as-variant.yaml").write_text(variant)
    plan, _ = plan_project(
        load_project(sec_engine_project), PlanRequest(), query_checker=query_checker(engine)
    )
    steps = {s.dataset: s for s in plan.definitions}
    assert steps["by-city"].action is Action.CREATE
    refused = steps["as-variant"]
    assert refused.action is Action.REFUSED
    assert any("'v'" in r and "variant" in r and "\n" not in r for r in refused.reasons), refused.reasons
