"""Which environment variables templates may read, which are secret, and how secrets are kept out of output.

Plan runs in CI on pull requests, where the environment may hold tokens. So ``env_var()`` reads only
the variables a project declares under ``env:`` in odfproj.yaml, and never a secret one: ODF metadata
is published with the dataset, so a secret rendered into a manifest would leak twice (in the plan
comment, then in the chain). Secrets belong in ``${{ env.NAME }}``, which the engine expands at fetch
time.

A variable is secret when the project says so (``secret: true``), when its name starts with
``ODFPROJ_SECRET_`` (dbt's ``DBT_ENV_SECRET_`` convention, which is accepted too), or when its name
says what it is (``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``). Values of secret
variables present in the environment are also redacted from everything the CLI prints or saves, as a
second line of defence for paths no one thought of (an engine error quoting a fetched URL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["REDACTED", "SECRET_PREFIXES", "EnvPolicy", "EnvVar", "Redactor", "parse_env_section"]

SECRET_PREFIXES = ("ODFPROJ_SECRET_", "DBT_ENV_SECRET_")
#: Names that hold credentials whatever a project declares; a PR cannot declare them harmless.
_SENSITIVE_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REDACTED = "*****"
#: Shorter values are not redacted: replacing every "1" or "on" would garble output and hide nothing.
MIN_REDACTED_LENGTH = 4


@dataclass(frozen=True)
class EnvVar:
    """One declared variable: templates may read it unless it is secret."""

    name: str
    secret: bool = False


@dataclass(frozen=True)
class EnvPolicy:
    """The ``env:`` section of odfproj.yaml."""

    declared: Mapping[str, EnvVar] = field(default_factory=lambda: MappingProxyType({}))

    def is_secret(self, name: str) -> bool:
        declared = self.declared.get(name)
        return (
            (declared is not None and declared.secret)
            or name.upper().startswith(SECRET_PREFIXES)
            or _SENSITIVE_NAME.search(name) is not None
        )

    def refusal(self, name: str) -> str | None:
        """Why ``env_var(name)`` may not read the variable, or None when it may."""
        if self.is_secret(name):
            return (
                f"environment variable {name!r} is secret and cannot be rendered into a manifest "
                f"(ODF metadata is not secret); write ${{{{ env.{name} }}}} so the engine reads it at fetch time"
            )
        if name not in self.declared:
            return (
                f"environment variable {name!r} is not declared under 'env:' in odfproj.yaml "
                "(templates read only declared variables)"
            )
        return None

    def secret_values(self, environ: Mapping[str, str]) -> frozenset[str]:
        """Values of the secret variables set in ``environ``, long enough to redact."""
        return frozenset(
            value
            for name, value in environ.items()
            if len(value) >= MIN_REDACTED_LENGTH and self.is_secret(name)
        )


def parse_env_section(raw: object) -> EnvPolicy:
    """``env: [NAME, {name: NAME, secret: true}]``; raises ``ValueError`` with a message for the user."""
    if raw is None:
        return EnvPolicy()
    if not isinstance(raw, list):
        raise ValueError("'env' must be a list of variable names (or {name: NAME, secret: true})")
    declared: dict[str, EnvVar] = {}
    for item in raw:
        if isinstance(item, str):
            var = EnvVar(item)
        elif isinstance(item, dict) and set(item) <= {"name", "secret"} and isinstance(item.get("name"), str):
            secret = item.get("secret", False)
            if not isinstance(secret, bool):
                raise ValueError(f"'env': 'secret' of {item['name']!r} must be true or false")
            var = EnvVar(item["name"], secret)
        else:
            raise ValueError(f"'env': {item!r} is not a variable name or {{name: NAME, secret: true}}")
        if not _NAME.match(var.name):
            raise ValueError(f"'env': {var.name!r} is not an environment variable name")
        declared[var.name] = var
    return EnvPolicy(MappingProxyType(declared))


class Redactor:
    """Replaces secret values in text; the longest first, so a secret containing another goes whole."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: tuple[str, ...] = ()
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        merged = {*self._values, *(v for v in values if len(v) >= MIN_REDACTED_LENGTH)}
        self._values = tuple(sorted(merged, key=len, reverse=True))

    def redact(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text
