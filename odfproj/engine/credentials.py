"""Which Spark setting holds a credential: refused in a project's ``spark_conf``, hidden wherever conf is shown.

A secret in ``odfproj.yaml`` would be a secret in git, in every clone and CI log of the project; and a
Spark setting travels further still (PySpark passes every setting to ``spark-submit`` on its command
line, which any user of the machine can list). So credentials never reach Spark as settings: S3A reads
them from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``) or a
credential provider (an instance role, web identity, a profile), see docs/guide/cluster.md. One rule,
:func:`is_credential_key`, decides both the refusal (``engine.settings``) and the redaction of a conf
shown anywhere (:func:`redacted`); Spark's own logs redact by its ``spark.redaction.regex``, which
odfproj's sessions set to cover the same keys (:data:`SPARK_REDACTION_REGEX`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "CREDENTIALS_HINT",
    "REDACTED",
    "SPARK_REDACTION_REGEX",
    "credential_refusal",
    "is_credential_key",
    "redacted",
]

#: What a shown conf has instead of a credential's value.
REDACTED = "*********(redacted)"

#: Where credentials go instead of a setting, for the refusal's message.
CREDENTIALS_HINT = (
    "credentials never go in odfproj.yaml: give them to Spark through the environment "
    "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or a credential provider "
    "(an instance role, web identity, a profile; spark.hadoop.fs.s3a.aws.credentials.provider), "
    "see docs/guide/cluster.md"
)

#: A key that names a credential: S3A's access, secret and session keys (also per bucket), SSE-C's
#: encryption key, an Azure account key, and any password, secret or token of any component.
_CREDENTIAL = re.compile(
    r"(^|\.)(access\.key|secret\.key|session\.token|encryption\.key|server-side-encryption\.key)$"
    r"|\.account\.key(\.|$)"
    r"|password|secret|token|credential(s)?$",
    re.IGNORECASE,
)

#: What Spark itself hides wherever it shows its conf (``spark.redaction.regex``: the event log, the UI,
#: ``spark.logConf``, ``spark-submit --verbose``): its default, ``secret|password|token|access[.]key``,
#: and the encryption and account keys it misses. A conf only holds one when the machine's own Spark
#: defaults (``SPARK_CONF_DIR``) put it there: a project cannot (:func:`credential_refusal`).
SPARK_REDACTION_REGEX = r"(?i)secret|password|token|access[.]key|encryption[.]key|account[.]key"

#: Keys that only name how credentials are found, never hold one.
_NOT_A_CREDENTIAL = frozenset({"spark.hadoop.fs.s3a.aws.credentials.provider"})


def is_credential_key(key: str) -> bool:
    """Whether the Spark setting ``key`` holds a credential (its value must be neither set nor shown)."""
    return key.strip() not in _NOT_A_CREDENTIAL and _CREDENTIAL.search(key.strip()) is not None


def credential_refusal(key: str) -> str | None:
    """Why ``key`` may not be set in a project's ``spark_conf`` because it is a credential, or ``None``."""
    return f"a credential ({CREDENTIALS_HINT})" if is_credential_key(key) else None


def redacted(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` as it may be shown (logs, messages, a repr): every credential's value replaced."""
    return {str(k): (REDACTED if is_credential_key(str(k)) else str(v)) for k, v in conf.items()}
