"""The driver's class-data archive: made once, proven before use, never in the way (engine/class_data.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from odfproj.engine import class_data
from odfproj.engine.class_data import ClassData, for_driver

JAVA = shutil.which("java")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "SPARK_CONF_DIR",
        "HADOOP_CONF_DIR",
        "YARN_CONF_DIR",
        "SPARK_DIST_CLASSPATH",
        "SPARK_CLASSPATH",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(class_data.SWITCH_ENV, raising=False)
    return tmp_path / "class-data"


def _key() -> str:
    java, home = class_data._java(), class_data._spark_home()
    assert java is not None and home is not None
    key = class_data.archive_key(java, home, "1g")
    if key is None:
        pytest.skip("this JDK has no base CDS archive")
    return key


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    return int(done.stdout)


def _written(folder: Path, key: str, archive: bytes | None, pid: int, classpath: str = ".") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{key}.1-1.tmp"
    if archive is not None:
        target.write_bytes(archive)
    ClassData(writes=target).started(pid, classpath, JAVA or "java")
    return target


def test_with_no_archive_a_command_s_driver_writes_one_at_exit_and_a_long_lived_one_does_not(
    folder: Path,
) -> None:
    _key()
    sharing = for_driver({}, may_write=True, folder=folder)
    assert sharing.writes is not None and sharing.writes.parent == folder
    assert f"-XX:ArchiveClassesAtExit={sharing.writes}" in sharing.options
    assert class_data.QUIET in sharing.options  # the JVM's messages about it never reach the terminal
    assert for_driver({}, may_write=False, folder=folder) == ClassData()


def test_an_archive_in_place_is_mapped(folder: Path) -> None:
    key = _key()
    folder.mkdir(parents=True)
    (folder / f"{key}.jsa").write_bytes(b"archive")
    sharing = for_driver({}, may_write=True, folder=folder)
    assert sharing == ClassData((f"-XX:SharedArchiveFile={folder / f'{key}.jsa'}", class_data.QUIET))
    assert for_driver({"spark.driver.memory": "4g"}, may_write=False, folder=folder) == ClassData()


@pytest.mark.parametrize("where", ["switch", "conf dir", "class path"])
def test_nothing_where_it_cannot_apply(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    conf: dict[str, str] = {}
    if where == "switch":
        monkeypatch.setenv(class_data.SWITCH_ENV, "off")
    elif where == "conf dir":  # a folder with files on the class path cannot be archived
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / "spark-defaults.conf").write_text("", encoding="utf-8")
        monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    else:
        conf["spark.driver.extraClassPath"] = "/opt/extra.jar"
    assert for_driver(conf, may_write=True, folder=folder) == ClassData()


def test_while_a_jvm_writes_the_archive_no_other_writes_one(folder: Path) -> None:
    key = _key()
    _written(folder, key, None, os.getpid())  # a live process: still running, or writing as it exits
    assert for_driver({}, may_write=True, folder=folder) == ClassData()


def test_a_broken_archive_is_dropped_never_mapped_and_given_up_after_three(folder: Path) -> None:
    key = _key()
    for attempt in range(3):
        written = _written(folder, key, b"not an archive", _dead_pid())
        sharing = for_driver({}, may_write=True, folder=folder)
        assert not written.exists() and not (folder / f"{key}.jsa").exists()
        assert not any("SharedArchiveFile" in option for option in sharing.options)
        assert (sharing.writes is None) == (attempt == 2)
    assert for_driver({}, may_write=True, folder=folder) == ClassData()


@pytest.mark.skipif(JAVA is None, reason="needs java")
def test_a_whole_archive_is_proven_by_a_jvm_then_put_in_place(folder: Path, tmp_path: Path) -> None:
    key = _key()
    folder.mkdir(parents=True)
    made = tmp_path / "made.jsa"
    classpath = str(tmp_path)  # an empty folder: what the JVM archives here is the JDK's own classes
    done = subprocess.run(
        [JAVA, f"-XX:ArchiveClassesAtExit={made}", "-cp", classpath, "-version"], capture_output=True
    )
    if done.returncode != 0 or not made.is_file():
        pytest.skip("this JDK cannot write a dynamic archive")
    written = _written(folder, key, made.read_bytes(), _dead_pid(), classpath)
    half = made.read_bytes()[: made.stat().st_size // 2]
    truncated = _written(folder.parent / "other", key, half, _dead_pid(), classpath)

    sharing = for_driver({}, may_write=True, folder=folder)
    assert sharing.options[0] == f"-XX:SharedArchiveFile={folder / f'{key}.jsa'}"
    assert not written.exists() and not Path(f"{written}.json").exists()
    # Half an archive would crash the JVM that maps it: it is proven broken and removed instead.
    assert "SharedArchiveFile" not in " ".join(
        for_driver({}, may_write=True, folder=truncated.parent).options
    )
    assert not truncated.exists()
    assert not Path(f"{truncated}.json").exists()
