"""Whether a command uses the warm engine, where its files live, and whether a target fits it.

The switches (``--warm``/``--cold``, ``ODFPROJ_WARM_ENGINE``, ``CI``), the idle timeout and the folder are
read here, once, by every command; so is the rule of which targets the server can honour: the
server's one JVM is local and fixed, so a target needing another master or JVM settings runs cold.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odfproj.engine.session import (
    SparkSettings,
    is_connect,
)
from odfproj.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: ``on``/``off``: use the warm engine or not (default: on, except where ``CI`` is set).
SWITCH_ENV = "ODFPROJ_WARM_ENGINE"


#: Seconds the server stays up with no command using it (default :data:`DEFAULT_IDLE_S`).
IDLE_ENV = "ODFPROJ_WARM_IDLE"


#: Where the server's files are (default: under the user's cache folder, see :func:`engine_dir`).
DIR_ENV = "ODFPROJ_ENGINE_DIR"


DEFAULT_IDLE_S = 900.0


_ON = frozenset({"1", "on", "true", "yes"})


_OFF = frozenset({"0", "off", "false", "no"})


@dataclass(frozen=True)
class WarmChoice:
    """Whether commands use the warm engine, and what decided it (shown by ``odfproj engine status``)."""

    enabled: bool
    reason: str


def warm_choice(flag: bool | None = None, environ: Mapping[str, str] | None = None) -> WarmChoice:
    """``--warm``/``--cold`` first, then ``ODFPROJ_WARM_ENGINE``, then off where ``CI`` is set, else on."""
    env = os.environ if environ is None else environ
    if flag is not None:
        return WarmChoice(flag, "--warm" if flag else "--cold")
    value = env.get(SWITCH_ENV, "").strip().lower()
    if value in _ON:
        return WarmChoice(True, f"{SWITCH_ENV}={value}")
    if value in _OFF:
        return WarmChoice(False, f"{SWITCH_ENV}={value}")
    if value:
        raise EngineError(f"{SWITCH_ENV}={env[SWITCH_ENV]!r}: expected on or off")
    if env.get("CI", "").strip():
        return WarmChoice(False, "CI is set (ask with --warm or ODFPROJ_WARM_ENGINE=on)")
    return WarmChoice(True, "the default")


def idle_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds of disuse after which the server stops: ``ODFPROJ_WARM_IDLE``, else 15 minutes."""
    env = os.environ if environ is None else environ
    text = env.get(IDLE_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise EngineError(f"{IDLE_ENV}={text!r}: expected a positive number of seconds")
    return value


def engine_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The server's folder: ``ODFPROJ_ENGINE_DIR``, else one per Python environment, PySpark and odfproj
    version under the user's cache folder, so that a server is only ever reused by the installation that
    made it (an upgrade starts a new one; the old one stops when idle)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    env = os.environ if environ is None else environ
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV]).expanduser()
    try:
        pyspark = version("pyspark")
    except PackageNotFoundError:  # pragma: no cover - pyspark is a dependency
        pyspark = "none"
    from odfproj import __version__

    key = hashlib.sha256(f"{sys.prefix}\0{pyspark}\0{__version__}".encode()).hexdigest()[:12]
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "odfproj" / "engine" / key


def warm_eligible(settings: SparkSettings) -> bool:
    """Whether a target can run on the warm engine (see :func:`warm_refusal`)."""
    return warm_refusal(settings) is None


def warm_refusal(settings: SparkSettings) -> str | None:
    """Why a target cannot run on the warm engine, or ``None``: it needs a local master, and no setting
    the server's JVM could not honour (a ``spark_conf`` key outside ``spark.sql.*``, such as driver
    memory, asks for a JVM of its own, so such a target runs cold)."""
    master = settings.master.strip()
    if is_connect(master) or not master.startswith("local"):
        return f"the target's master {master} is not local"
    if settings.s3a_connector:
        return "the data is on S3, which needs the S3A connector in a JVM of its own"
    jvm = sorted(key for key in settings.conf if not key.startswith("spark.sql."))
    if jvm:
        return f"the target's spark_conf sets {', '.join(jvm)}, which needs a JVM of its own"
    return None


def session_refusal(session: SparkSession, settings: SparkSettings) -> str | None:
    """In the server: why its session cannot take the target's SQL settings, or ``None``.

    A run's child session gets every ``spark.sql.*`` setting of the target; a *static* one (fixed when
    the JVM started) can only be honoured if the server already has that value.
    """
    fixed = sorted(
        key
        for key, value in settings.conf.items()
        if key.startswith("spark.sql.")
        and not session.conf.isModifiable(key)
        and session.conf.get(key, None) != str(value)
    )
    if fixed:
        return (
            f"the target's spark_conf sets {', '.join(fixed)}, which the warm engine's session cannot "
            "change (static settings)"
        )
    return None
