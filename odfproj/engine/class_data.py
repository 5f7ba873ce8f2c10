"""Class-data sharing for a command's driver JVM: the classes Spark loads, archived once, mapped at each start.

A cold command's JVM loads, parses and verifies some 15,000 classes from PySpark's jars before and while
it runs its first queries; on bench_dag's 50-dataset first run that was about a fifth of the run's CPU
(bench/README.md, "Cold runs"). The JVM can write the classes it loaded to an archive when it exits
(``-XX:ArchiveClassesAtExit``, a dynamic CDS archive over the JDK's own) and map that archive at later
starts (``-XX:SharedArchiveFile``), skipping the parsing and verification.

The archive lives in ``~/.cache/odfproj/class-data`` (``$XDG_CACHE_HOME`` respected), one per JVM build,
Spark jars and heap size (:func:`archive_key`). The first command with no archive has its JVM write one
at exit, under a name of its own; a later start checks it with a throwaway JVM (``-Xshare:on``: a
truncated archive would crash the JVM that maps it) and only then renames it into place, so a command
never maps an archive that was not proven whole. Everything falls back silently: a stale archive (the
JDK or a jar changed) is refused by the JVM itself (``-Xshare:auto``, its messages off); an archive that
cannot be made (a non-empty configuration folder on the class path, no base archive in the JDK) or
fails its check three times is not tried again; ``ODFPROJ_CLASS_DATA=off`` turns the whole thing off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: ``off`` (or ``0``, ``false``, ``no``): no archive is used or written.
SWITCH_ENV = "ODFPROJ_CLASS_DATA"

#: Bump when the way archives are made changes: older ones are then never looked at.
FORMAT = "1"

#: The JVM's own messages about archives (a refused stale archive, classes it cannot archive) go
#: nowhere: the JVM writes them to stdout, which is the user's terminal.
QUIET = "-Xlog:cds*=off"

#: Settings and environment variables that put more on the driver's class path: the archive records
#: the class path, and a configuration folder with files on it cannot be archived at all.
_CLASS_PATH_ENV = ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH", "SPARK_CLASSPATH")
_CLASS_PATH_CONF = ("spark.driver.extraClassPath",)

#: How many times an archive of one key may fail its check before none is made for that key again.
_MAX_FAILURES = 3

#: A written archive with no record of its JVM (the command died before it wrote one) is removed after this.
_ORPHAN_AGE_S = 3600.0

#: How many archives (keys) the folder keeps: each is about 200 MB.
_KEEP = 2


@dataclass(frozen=True)
class ClassData:
    """The JVM options for one driver start, and the archive that start writes at its exit, if any."""

    options: tuple[str, ...] = ()
    writes: Path | None = None

    def started(self, jvm_pid: int, classpath: str, java: str) -> None:
        """Record which JVM writes :attr:`writes` and how to check it, for the start that promotes it."""
        if self.writes is None:
            return
        record = {"pid": jvm_pid, "classpath": classpath, "java": java}
        sidecar = _sidecar(self.writes)
        part = sidecar.with_name(sidecar.name + ".part")
        with contextlib.suppress(OSError):
            part.write_text(json.dumps(record), encoding="utf-8")
            os.replace(part, sidecar)


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/odfproj/class-data``, else ``~/.cache/odfproj/class-data``."""
    env = os.environ if env is None else env
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "odfproj" / "class-data"


def enabled(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(SWITCH_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def for_driver(conf: Mapping[str, str], *, may_write: bool, folder: Path | None = None) -> ClassData:
    """The class-data options for a driver JVM about to start with ``conf`` (nothing when they do not apply).

    With an archive for this JVM, Spark and heap: map it. Without one and ``may_write``: have this JVM
    write one at exit, unless another JVM is writing it now. Never raises: a problem means no archive.
    """
    if not enabled():
        return ClassData()
    try:
        return _for_driver(conf, may_write, folder or cache_dir())
    except (OSError, ValueError):
        return ClassData()


def _for_driver(conf: Mapping[str, str], may_write: bool, folder: Path) -> ClassData:
    if any(os.environ.get(name) for name in _CLASS_PATH_ENV) or any(
        conf.get(key) for key in _CLASS_PATH_CONF
    ):
        return ClassData()
    java = _java()
    spark_home = _spark_home()
    if java is None or spark_home is None or not _empty_or_missing(_conf_dir(spark_home)):
        return ClassData()
    key = archive_key(java, spark_home, conf.get("spark.driver.memory", "1g"))
    if key is None:
        return ClassData()
    writing = _settle(folder, key)
    final = folder / f"{key}.jsa"
    if final.is_file():
        return ClassData((f"-XX:SharedArchiveFile={final}", QUIET))
    if not may_write or writing or _failures(folder, key) >= _MAX_FAILURES:
        return ClassData()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = folder / f"{key}.{os.getpid()}-{time.time_ns()}.tmp"
    return ClassData((f"-XX:ArchiveClassesAtExit={target}", QUIET), target)


def archive_key(java: Path, spark_home: Path, driver_memory: str) -> str | None:
    """What an archive depends on: the JVM's build, its base archive, every jar of Spark's class path, the heap.

    The JVM checks all of this itself and refuses an archive that does not fit; the key only keeps
    archives of different installations apart, so that each is made once and kept.
    """
    home = java.resolve().parent.parent
    base = home / "lib" / "server" / "classes.jsa"
    if not base.is_file():  # a dynamic archive sits on the JDK's own: without it there is nothing to share
        return None
    digest = hashlib.sha256(FORMAT.encode())
    for path in (java.resolve(), home / "lib" / "server" / "libjvm.so", base):
        digest.update(_stamp(path))
    jars = spark_home / "jars"
    for jar in sorted(jars.iterdir()) if jars.is_dir() else ():
        digest.update(_stamp(jar))
    digest.update(f"\0{spark_home.resolve()}\0{driver_memory}".encode())
    return digest.hexdigest()[:24]


def _stamp(path: Path) -> bytes:
    try:
        st = path.stat()
    except OSError:
        return f"\0{path}:-".encode()
    return f"\0{path}:{st.st_size}:{st.st_mtime_ns}".encode()


def _settle(folder: Path, key: str) -> bool:
    """Promote or drop the archives of ``key`` that JVMs wrote at exit; whether one is being written now."""
    if not folder.is_dir():
        return False
    writing = False
    for sidecar in sorted(folder.glob(f"{key}.*.tmp.json")):
        written = sidecar.with_name(sidecar.name.removesuffix(".json"))
        record = _record(sidecar)
        if record is not None and _alive(int(record["pid"])):
            writing = True  # its JVM still runs (or is writing the archive as it exits)
            continue
        if (
            record is not None
            and written.is_file()
            and _proven(written, str(record["classpath"]), str(record["java"]))
        ):
            os.replace(written, folder / f"{key}.jsa")
            _prune(folder)
        else:
            _count_failure(folder, key)
            _remove(written)
        _remove(sidecar)
    for written in folder.glob(f"{key}.*.tmp"):  # no record of its JVM: its command died as it started
        if not _sidecar(written).exists() and time.time() - _mtime(written) > _ORPHAN_AGE_S:
            _remove(written)
    return writing


def _proven(archive: Path, classpath: str, java: str) -> bool:
    """Whether a throwaway JVM maps ``archive`` whole (``-Xshare:on`` fails rather than go without it)."""
    command = [
        java,
        f"-XX:SharedArchiveFile={archive}",
        "-Xshare:on",
        "-Xlog:disable",
        "-XX:ErrorFile=/dev/null",  # half an archive crashes it: no hs_err file in the user's folder
        "-XX:-CreateCoredumpOnCrash",
        "-cp",
        classpath,
        "-version",
    ]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
            cwd=archive.parent,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _prune(folder: Path) -> None:
    """Keep the :data:`_KEEP` newest archives (a mapped one stays valid: removing it frees no open file)."""
    archives = sorted(folder.glob("*.jsa"), key=_mtime, reverse=True)
    for old in archives[_KEEP:]:
        _remove(old)


def _failures(folder: Path, key: str) -> int:
    try:
        return int((folder / f"{key}.failed").read_text(encoding="utf-8").strip() or 0)
    except (OSError, ValueError):
        return 0


def _count_failure(folder: Path, key: str) -> None:
    with contextlib.suppress(OSError):
        (folder / f"{key}.failed").write_text(str(_failures(folder, key) + 1), encoding="utf-8")


def _record(sidecar: Path) -> dict | None:
    try:
        record = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not {"pid", "classpath", "java"} <= set(record):
        return None
    return record if isinstance(record["pid"], int) else None


def _sidecar(written: Path) -> Path:
    return written.with_name(written.name + ".json")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not reaped, does not)."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat[stat.rindex(")") + 2 :].split(" ", 1)[0] not in ("Z", "X")


def _java() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found) if found and Path(found).is_file() else None


def _spark_home() -> Path | None:
    from pyspark.find_spark_home import _find_spark_home

    try:
        return Path(_find_spark_home())
    except SystemExit:  # PySpark exits when it finds no Spark: the launch fails later with its own message
        return None


def _conf_dir(spark_home: Path) -> Path:
    return Path(os.environ.get("SPARK_CONF_DIR") or spark_home / "conf")


def _empty_or_missing(folder: Path) -> bool:
    if not folder.is_dir():
        return True
    return next(folder.iterdir(), None) is None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
