"""``project.collector``: the collector's thresholds raised while a project loads, then put back."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfproj.project import collector, manifests
from odfproj.project.collector import BULK_THRESHOLDS, fewer_collections
from odfproj.project.config import load_project


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def test_raised_inside_and_put_back(thresholds: None) -> None:
    gc.set_threshold(700, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == BULK_THRESHOLDS
        with fewer_collections():  # nested: unchanged, and the outer one still restores
            assert gc.get_threshold() == BULK_THRESHOLDS
        assert gc.get_threshold() == BULK_THRESHOLDS
    assert gc.get_threshold() == (700, 10, 10)


def test_put_back_after_an_error(thresholds: None) -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_never_lowers_and_leaves_collection_off(thresholds: None) -> None:
    gc.set_threshold(500_000, 5, 100)
    with fewer_collections():
        assert gc.get_threshold() == (500_000, 30, 100)
    gc.set_threshold(0)
    with fewer_collections():
        assert gc.get_threshold()[0] == 0


def test_manifests_load_with_fewer_collections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thresholds: None
) -> None:
    (tmp_path / "odfproj.yaml").write_text("name: p\n")
    (tmp_path / "datasets").mkdir()
    seen = []
    real = manifests._manifest_paths

    def paths(*args: object) -> object:
        seen.append(gc.get_threshold())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(manifests, "_manifest_paths", paths)
    gc.set_threshold(700, 10, 10)
    manifests.load_manifests(load_project(tmp_path))
    assert seen == [collector.BULK_THRESHOLDS]
    assert gc.get_threshold() == (700, 10, 10)
