"""odfproj.yaml's ``moved:`` list: what can be judged from the file alone is refused when it is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfproj.errors import OdfprojError
from odfproj.project.config import parse_config
from odfproj.project.moves import Move


def _moves(tmp_path: Path, entries: str) -> tuple[Move, ...]:
    return parse_config(tmp_path, f"name: shop\nmoved:\n{entries}").moves


def test_entries_are_read_in_order(tmp_path: Path) -> None:
    moves = _moves(tmp_path, "  - {from: com.example.a, to: com.example.b}\n  - {from: x.y, to: x.z}\n")
    assert moves == (Move("com.example.a", "com.example.b"), Move("x.y", "x.z"))
    assert parse_config(tmp_path, "name: shop\n").moves == ()


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            "  - {from: a, to: b}\n  - {from: b, to: c}\n",
            "a -> b and b -> c form a chain; declare one rename per dataset (a -> c)",
        ),
        ("  - {from: a, to: b}\n  - {from: b, to: a}\n", "a -> b and b -> a form a cycle"),
        ("  - {from: a, to: b}\n  - {from: a, to: c}\n", "moved: a is the 'from' of two entries"),
        ("  - {from: a, to: c}\n  - {from: B, to: C}\n", "moved: c is the 'to' of two entries"),
        (
            "  - {from: a, to: A}\n",
            "moved[0]: a -> A renames nothing (dataset names compare case-insensitively)",
        ),
        ("  - {from: a, to: 'no spaces'}\n", "moved[0]: to: 'no spaces' is not a valid dataset name"),
        ("  - {from: a}\n", "moved.0: 'to' is a required property"),
        ("  {from: a, to: b}\n", "moved: {'from': 'a', 'to': 'b'} is not of type 'array', 'null'"),
    ],
)
def test_entries_no_workspace_could_apply_are_refused_naming_the_file(
    tmp_path: Path, entries: str, message: str
) -> None:
    with pytest.raises(OdfprojError) as caught:
        _moves(tmp_path, entries)
    text = str(caught.value)
    assert text.startswith(f"{tmp_path / 'odfproj.yaml'}: ") and "\n" not in text
    assert message in text
