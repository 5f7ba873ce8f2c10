"""Where a workspace keeps its preview environments: the one path rule both the project and storage use.

``project`` turns ``--env NAME`` into the folder every command then works in, and never imports
``storage`` (reading a project writes nothing); ``storage`` lays the environment out there. So the
rule sits below both, like the error hierarchy.
"""

from __future__ import annotations

import re
from pathlib import Path

from odfproj.errors import InvalidValueError

__all__ = ["ENVS_DIR", "check_environment_name", "environment_root", "production_root"]

#: The folder of a workspace that holds its environments, one folder each.
ENVS_DIR = "envs"
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def check_environment_name(name: str) -> str:
    """``name`` if it can name an environment (lower case, digits, ``.``, ``_``, ``-``; 63 at most)."""
    if not _NAME.match(name):
        raise InvalidValueError(
            f"{name!r} is not an environment name: use lower-case letters, digits, '.', '_' and '-' "
            "(at most 63, starting with a letter or digit), e.g. pr-123"
        )
    return name


def environment_root(production: Path, name: str) -> Path:
    """The folder of environment ``name`` of the workspace at ``production``."""
    return Path(production) / ENVS_DIR / check_environment_name(name)


def production_root(environment: Path) -> Path:
    """The production workspace an environment's folder lies in."""
    return Path(environment).parent.parent
