"""``project.collector``: the collector's thresholds raised while a project loads, then put back."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfproj.project import collector, manifests
from odfproj.project.collector import BULK_THRESHOLDS, fewer_collections
from odfproj.project.config import load_project

#: Seconds a thread waits for the other before the test gives up.
WAIT = 10


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


def test_young_cycles_are_still_collected_inside(thresholds: None) -> None:
    """The body keeps the young generation small: a cycle that became garbage is collected by the next
    young collection, without waiting for the body's end (or for 200,000 new objects)."""

    class Node:
        pass

    gc.set_threshold(700, 10, 10)
    with fewer_collections():
        gc.collect(0)  # an empty young generation: the cycle below stays young until it is garbage
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        ref = weakref.ref(node)
        del node
        keep = [[] for _ in range(3 * 700)]  # a few young collections of CPython's default size
        assert ref() is None
        del keep


def test_overlapping_bodies_in_two_threads_raise_them_until_the_last_ends(thresholds: None) -> None:
    """A warm server plans two runs at once: the first to end must neither lower the thresholds under
    the other's work nor, ending last, leave them raised for good."""
    gc.set_threshold(700, 10, 10)
    a_inside, b_inside, a_done, b_may_end = (threading.Event() for _ in range(4))
    seen: list[tuple[int, ...]] = []

    def a() -> None:
        with fewer_collections():
            a_inside.set()
            b_inside.wait(WAIT)
        a_done.set()

    def b() -> None:
        a_inside.wait(WAIT)
        with fewer_collections():
            b_inside.set()
            a_done.wait(WAIT)
            seen.append(gc.get_threshold())  # A has ended: still raised for B
            b_may_end.wait(WAIT)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    a_done.wait(WAIT)
    b_may_end.set()
    for thread in threads:
        thread.join(WAIT)
    assert seen == [BULK_THRESHOLDS]
    assert gc.get_threshold() == (700, 10, 10)


def test_put_back_after_an_error(thresholds: None) -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_never_lowers_and_leaves_collection_off(thresholds: None) -> None:
    gc.set_threshold(500_000, 5, 100)
    with fewer_collections():
        assert gc.get_threshold() == (500_000, 1000, 100)
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
