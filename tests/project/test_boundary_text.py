"""``path_refusal`` judges paths as text for speed; it must give what the rule in Path terms gives."""

from __future__ import annotations

import itertools
from pathlib import Path

from odfproj.project.boundary import PRIVATE_DIRS, path_refusal

NAMES = ("proj", "proj2", ".git", ".gitx", "git", "a", "x.yaml")


def _by_path_rule(resolved: Path, root: Path) -> str | None:
    """The rule as Path operations: inside the root, and not under a private folder."""
    try:
        inside = resolved.relative_to(root).parts
    except ValueError:
        return "outside"
    return "private" if inside and inside[0] in PRIVATE_DIRS else None


def _kind(refusal: str | None) -> str | None:
    if refusal is None:
        return None
    return "outside" if "outside the project folder" in refusal else "private"


def test_text_comparison_agrees_with_the_path_rule_near_every_edge() -> None:
    """Sibling folders sharing a prefix (proj2 beside proj), look-alikes of .git, the root itself, / as root."""
    for root in (Path("/"), Path("/proj"), Path("/a/proj")):
        for depth in range(4):
            for parts in itertools.product(NAMES, repeat=depth):
                resolved = Path("/", *parts)
                got = path_refusal(resolved, root, resolve=lambda p: p)
                assert _kind(got) == _by_path_rule(resolved, root), (resolved, root, got)
