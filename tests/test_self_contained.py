"""The suite needs nothing beside the repository: a user's clone has no ``../shared`` folder.

Two checks: no source or test names the sibling folder, and the whole suite collects from a copy of the
tracked files placed where nothing sits beside it (collection imports every test module and evaluates
every module-level path and parametrisation, which is where a missing folder used to fail).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_DIR

SIBLING_REFERENCE = re.compile(
    r"""\.\./shared\b|parents?\[\d\]\s*/\s*["']shared["']|parent\s*/\s*["']shared["']"""
)


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in out.stdout.splitlines() if line]


def test_no_code_or_test_reaches_beside_the_repository() -> None:
    offenders = []
    for name in _tracked_files():
        if not name.endswith(".py") or not name.startswith(("odfproj/", "tests/", "tools/", "bench/")):
            continue
        path = REPO_DIR / name
        if path == Path(__file__) or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SIBLING_REFERENCE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert not offenders, "reads the folder beside the repository:\n" + "\n".join(offenders)


def test_suite_collects_from_a_clone_with_nothing_beside_it(tmp_path: Path) -> None:
    clone = tmp_path / "lonely" / "repo"
    for name in _tracked_files():
        source, target = REPO_DIR / name, clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():
            shutil.copy2(source, target)
    assert not (clone.parent / "shared").exists()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=300,
    )
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
    assert result.returncode == 0, tail
    assert " tests collected" in result.stdout or "tests collected" in tail, tail
    assert "error" not in tail.lower().split("collected")[-1], tail
