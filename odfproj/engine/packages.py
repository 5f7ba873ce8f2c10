"""The JVM packages odfproj loads into Spark: its own pinned list, resolved from Maven Central into a cache once.

Which jars reach the JVM is odfproj's choice alone, never a manifest's or odfproj.yaml's: a jar is code
that runs with the driver's rights (``spark.jars`` is not an allowed setting, see ``engine.settings``).
So the list is here, each package pinned to the versions that match the installed PySpark, whose own
jars say which Spark, Scala and Hadoop it is (:func:`installed_build`):

- ``sedona``: Apache Sedona's SQL functions (``ST_*``) for ``engine: spark`` queries
  (``engine.gis`` loads it into a running session when a query first names one);
- ``s3a``: Hadoop's S3A connector (``hadoop-aws`` at the Hadoop version of PySpark's ``hadoop-client``
  jars, with the AWS SDK bundle that Hadoop release was built against), for ``s3://`` data: resolved
  here, loaded only when a caller asks for it (:func:`session_jars`).

Resolution happens once, ahead of time (``./dev``, or ``python -m odfproj.engine.packages fetch``):
the jars are copied into a flat cache folder, ``$ODFPROJ_JAR_CACHE`` or ``~/.cache/odfproj/jars``, and
sessions are handed plain file paths. Nothing is resolved while a session starts, so a cached package
costs no network and works offline; a missing one is a one-line error saying how to fetch it. The
fetch runs the Ivy that ships inside PySpark (``java -jar ivy.jar``, no Spark started), so a fresh
machine needs nothing more; Maven (``mvn dependency:copy``) is the alternative (``--tool mvn``). Measured
on an empty cache (bench/README.md, "GIS functions"): Ivy 18 s, Maven 71 s (it first fetches its own
dependency plugin); both keep their repository under the cache folder and check the SHA-1 sums Maven
Central publishes, and once the jars are cached neither runs again. Each artifact is fetched alone (no transitive resolution): the list
names every jar a package needs, so what loads is exactly what is written here.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from odfproj.errors import EngineError

__all__ = [
    "CACHE_ENV",
    "Artifact",
    "JvmPackage",
    "PackageUnavailableError",
    "SparkBuild",
    "cache_dir",
    "fetch",
    "installed_build",
    "package",
    "resolved_jars",
    "s3a",
    "sedona",
    "session_jars",
]

#: The environment variable that moves the jar cache (CI, a shared machine).
CACHE_ENV = "ODFPROJ_JAR_CACHE"

#: How to fetch the jars, for the messages.
FETCH_HINT = "run ./dev, or: python -m odfproj.engine.packages fetch"


class PackageUnavailableError(EngineError):
    """A JVM package that is not in the cache, has no build for this Spark, or could not be fetched."""


@dataclass(frozen=True)
class Artifact:
    """One jar on Maven Central, by its coordinate."""

    group: str
    name: str
    version: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def file_name(self) -> str:
        """The jar's name in the cache (Maven's own naming, so that the version is in sight)."""
        return f"{self.name}-{self.version}.jar"


@dataclass(frozen=True)
class JvmPackage:
    """A named set of jars odfproj loads together, and what it is for (the messages say it)."""

    name: str
    purpose: str
    artifacts: tuple[Artifact, ...]


@dataclass(frozen=True)
class SparkBuild:
    """The Spark, Scala and Hadoop versions of the installed PySpark, read from its bundled jars."""

    spark: str
    scala: str
    hadoop: str

    @property
    def spark_major(self) -> str:
        return self.spark.split(".", 1)[0]


_JAR_VERSION = re.compile(
    r"^(?P<name>spark-core|hadoop-client-api)(?:_(?P<scala>\d+\.\d+))?-(?P<version>[\d.]+)\.jar$"
)


@functools.lru_cache(maxsize=1)
def installed_build() -> SparkBuild:
    """The versions of the installed PySpark's Spark (``spark-core_SCALA-VERSION.jar``) and Hadoop
    (``hadoop-client-api-VERSION.jar``); nothing is started."""
    return build_of(pyspark_jars())


def build_of(jars: Path) -> SparkBuild:
    """The :class:`SparkBuild` of a folder of Spark's jars."""
    found: dict[str, tuple[str, str | None]] = {}
    for jar in jars.glob("*.jar"):
        match = _JAR_VERSION.match(jar.name)
        if match:
            found[match["name"]] = (match["version"], match["scala"])
    if "spark-core" not in found or "hadoop-client-api" not in found:
        raise PackageUnavailableError(f"cannot tell the Spark and Hadoop versions from the jars in {jars}")
    spark, scala = found["spark-core"]
    return SparkBuild(spark=spark, scala=scala or "", hadoop=found["hadoop-client-api"][0])


def pyspark_jars() -> Path:
    """The folder of jars the installed PySpark runs Spark from."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


# --- the list --------------------------------------------------------------------------------------------

#: Apache Sedona builds, by (Spark major version, Scala version): the Spark line Sedona's artifact is
#: named after, Sedona's version, and the GeoTools wrapper released with it. Sedona 1.8.0 is the only
#: release for Spark 4 on Maven Central; kamu's Spark engine ships 1.5.1 (for Spark 3.5), whose
#: functions are the ones odfproj allows (``engine.gis``).
SEDONA_BUILDS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("4", "2.13"): ("4.0", "1.8.0", "1.8.0-33.1"),
}

#: The AWS SDK v2 bundle and the S3 analytics accelerator each Hadoop release was built against
#: (``hadoop-project``'s pom: ``aws-java-sdk-v2.version``, ``amazon-s3-analyticsaccelerator-s3.version``).
S3A_BUILDS: dict[str, tuple[str, str]] = {
    "3.5.0": ("2.35.4", "1.3.1"),
}


def sedona(build: SparkBuild) -> JvmPackage:
    """Apache Sedona for ``build``: its shaded Spark jar and the GeoTools wrapper it needs."""
    pinned = SEDONA_BUILDS.get((build.spark_major, build.scala))
    if pinned is None:
        raise PackageUnavailableError(
            f"Apache Sedona has no build odfproj knows for Spark {build.spark} (Scala {build.scala})"
        )
    line, version, geotools = pinned
    return JvmPackage(
        "sedona",
        "the GIS functions (ST_*) of engine: spark queries",
        (
            Artifact("org.apache.sedona", f"sedona-spark-shaded-{line}_{build.scala}", version),
            Artifact("org.datasyslab", "geotools-wrapper", geotools),
        ),
    )


def s3a(build: SparkBuild) -> JvmPackage:
    """Hadoop's S3A connector at the Hadoop version of ``build``, with the AWS SDK it was built against."""
    pinned = S3A_BUILDS.get(build.hadoop)
    if pinned is None:
        raise PackageUnavailableError(f"odfproj knows no AWS SDK pin for Hadoop {build.hadoop} (S3A)")
    sdk, accelerator = pinned
    return JvmPackage(
        "s3a",
        "s3:// data through Hadoop's S3A connector",
        (
            Artifact("org.apache.hadoop", "hadoop-aws", build.hadoop),
            Artifact("software.amazon.awssdk", "bundle", sdk),
            Artifact("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", accelerator),
        ),
    )


#: Every package odfproj may load, by name.
_PACKAGES = {"sedona": sedona, "s3a": s3a}


def package(name: str, build: SparkBuild | None = None) -> JvmPackage:
    """The package ``name`` (``sedona``, ``s3a``) for ``build`` (default: the installed PySpark)."""
    make = _PACKAGES.get(name)
    if make is None:
        raise PackageUnavailableError(f"unknown JVM package {name!r} (known: {', '.join(_PACKAGES)})")
    return make(build or installed_build())


# --- the cache -------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where fetched jars are kept: ``$ODFPROJ_JAR_CACHE``, else ``~/.cache/odfproj/jars``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "odfproj" / "jars"


def resolved_jars(pkg: JvmPackage, cache: Path | None = None) -> tuple[Path, ...]:
    """The cached jars of ``pkg``; a one-line ``PackageUnavailableError`` naming what is missing if any is."""
    folder = cache or cache_dir()
    paths = tuple(folder / a.file_name for a in pkg.artifacts)
    missing = [a.coordinate for a, p in zip(pkg.artifacts, paths, strict=True) if not p.is_file()]
    if missing:
        raise PackageUnavailableError(
            f"the {pkg.name} jars ({pkg.purpose}) are not in {folder} ({', '.join(missing)}): "
            f"{FETCH_HINT} {pkg.name}"
        )
    return paths


def session_jars(*, s3a_connector: bool = False, cache: Path | None = None) -> tuple[Path, ...]:
    """The jars to put on a session's classpath when it starts: the S3A connector's when asked for.

    Sedona is not among them: ``engine.gis`` adds it to a running session when a query needs it.
    """
    return resolved_jars(package("s3a"), cache) if s3a_connector else ()


# --- fetching --------------------------------------------------------------------------------------------


def fetch(pkg: JvmPackage, cache: Path | None = None, *, tool: str | None = None) -> tuple[Path, ...]:
    """Make sure every jar of ``pkg`` is in the cache, fetching the missing ones from Maven Central.

    ``tool``: ``ivy`` (the default: PySpark's own, always there) or ``mvn``.
    A jar is moved into the cache only once complete, so an interrupted fetch leaves nothing half-written.
    """
    folder = cache or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    missing = [a for a in pkg.artifacts if not (folder / a.file_name).is_file()]
    chosen = tool or "ivy"
    for artifact in missing:
        with tempfile.TemporaryDirectory(dir=folder, prefix=".fetch-") as scratch:
            got = _FETCHERS[chosen](artifact, folder, Path(scratch))
            os.replace(got, folder / artifact.file_name)
        # the tool's own copy is not needed again (the cached jar is never fetched twice): half the space
        shutil.rmtree(_tool_copy(chosen, folder, artifact), ignore_errors=True)
    return resolved_jars(pkg, folder)


def _tool_copy(tool: str, cache: Path, artifact: Artifact) -> Path:
    """Where ``tool``'s repository under ``cache`` keeps its copy of ``artifact``."""
    if tool == "mvn":
        return cache / ".m2" / Path(*artifact.group.split(".")) / artifact.name / artifact.version
    return cache / ".ivy" / artifact.group / artifact.name


#: Why a fetch failed, in the words of Ivy's and Maven's output, most telling first: the network
#: (offline, a proxy), then the artifact, then any error line.
_FAILURE_REASONS = (
    re.compile(r"Host \S+ not found|UnknownHostException[^\n]*|Network is unreachable|Connection refused"),
    re.compile(r"connect timed out|Connection timed out|Could not transfer artifact[^\n]*"),
    re.compile(r"module not found: \S+|Could not find artifact \S+"),
    re.compile(r"^.*ERROR.*$", re.MULTILINE),
)


def _run(command: Sequence[str], what: Artifact) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = done.stdout + done.stderr
        found = (match for reason in _FAILURE_REASONS for match in [reason.search(output)] if match)
        detail = next(found, None)
        reason = detail.group(0).strip() if detail else f"exit status {done.returncode}"
        if reason.startswith(("Host ", "UnknownHost", "Network is", "Connection refused")):
            reason += " (offline, or a proxy in the way?)"
        raise PackageUnavailableError(f"could not fetch {what.coordinate} from Maven Central: {reason}")


def _with_maven(artifact: Artifact, cache: Path, scratch: Path) -> Path:
    """``mvn dependency:copy`` of the one artifact, with a local repository inside the cache."""
    _run(
        [
            "mvn",
            "--batch-mode",
            "--quiet",
            f"-Dmaven.repo.local={cache / '.m2'}",
            "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy",
            f"-Dartifact={artifact.coordinate}",
            f"-DoutputDirectory={scratch}",
            "-Dmdep.useBaseVersion=true",
        ],
        artifact,
    )
    return scratch / artifact.file_name


def _with_ivy(artifact: Artifact, cache: Path, scratch: Path) -> Path:
    """PySpark's own Ivy, run alone (no Spark): resolves the one artifact from Maven Central."""
    ivy = sorted(pyspark_jars().glob("ivy-*.jar"))
    if not ivy:
        raise PackageUnavailableError(
            f"cannot fetch {artifact.coordinate}: PySpark's jars hold no Ivy (try --tool mvn)"
        )
    _run(
        [
            _java(),
            "-jar",
            str(ivy[-1]),
            "-m2compatible",
            "-notransitive",
            "-cache",
            str(cache / ".ivy"),
            "-dependency",
            artifact.group,
            artifact.name,
            artifact.version,
            "-retrieve",
            f"{scratch}/[artifact]-[revision].[ext]",
            "-types",
            "jar",
        ],
        artifact,
    )
    return scratch / artifact.file_name


_FETCHERS = {"mvn": _with_maven, "ivy": _with_ivy}


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m odfproj.engine.packages fetch [NAME ...]``: what ``./dev`` runs to fill the cache."""
    parser = argparse.ArgumentParser(
        prog="python -m odfproj.engine.packages",
        description="Fetch the JVM packages odfproj loads into Spark into the jar cache "
        f"(${CACHE_ENV} or ~/.cache/odfproj/jars). Default: sedona.",
    )
    parser.add_argument("action", choices=["fetch", "show"])
    parser.add_argument("names", nargs="*", default=["sedona"], help="sedona, s3a")
    parser.add_argument("--tool", choices=sorted(_FETCHERS), help="ivy (default, PySpark's own) or mvn")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        for name in args.names:
            pkg = package(name)
            paths = fetch(pkg, tool=args.tool) if args.action == "fetch" else resolved_jars(pkg)
            print(f"{pkg.name}: " + " ".join(str(p) for p in paths))
    except EngineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through ./dev
    raise SystemExit(main())
