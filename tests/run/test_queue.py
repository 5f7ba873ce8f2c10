"""The scheduler's ready queue (JVM-free): dependency counting, failures, cancellation."""

from __future__ import annotations

from odfproj.run.queue import ReadyQueue

#: a -> b, a -> c, b -> d, c -> d (a diamond), and e on its own.
ORDER = ("a", "b", "c", "d", "e")
UPSTREAM = {"b": {"a"}, "c": {"a"}, "d": {"b", "c", "a"}}


def drain(queue: ReadyQueue) -> list[str]:
    out = []
    while queue:
        out.append(queue.pop())
    return out


def test_diamond_releases_each_step_once_all_its_upstream_succeeded() -> None:
    queue = ReadyQueue(ORDER, UPSTREAM)
    assert drain(queue) == ["a", "e"]
    queue.succeeded("a")
    assert drain(queue) == ["b", "c"]
    queue.succeeded("c")
    assert not queue  # d still waits for b
    queue.succeeded("b")
    assert drain(queue) == ["d"]
    queue.succeeded("d")
    queue.succeeded("e")
    assert not queue and queue.pending == ()


def test_with_one_worker_steps_start_in_plan_order() -> None:
    queue = ReadyQueue(ORDER, UPSTREAM)
    started = []
    while queue:
        name = queue.pop()
        started.append(name)
        queue.succeeded(name)
    assert started == list(ORDER)


def test_a_failure_drops_everything_downstream_and_nothing_else() -> None:
    queue = ReadyQueue(ORDER, UPSTREAM)
    assert queue.pop() == "a"
    queue.succeeded("a")
    assert drain(queue) == ["b", "c", "e"]
    assert queue.failed("b") == ("d",)
    queue.succeeded("c")  # d is dropped: c's success must not bring it back
    assert not queue and queue.pending == ()


def test_a_failure_at_the_top_drops_the_whole_diamond_transitively() -> None:
    queue = ReadyQueue(ORDER, {"b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
    assert queue.pop() == "a"
    assert queue.failed("a") == ("b", "c", "d")
    assert drain(queue) == ["e"]


def test_cancel_drops_every_step_not_started() -> None:
    queue = ReadyQueue(ORDER, UPSTREAM)
    assert queue.pop() == "a"
    assert queue.cancel() == ("b", "c", "d", "e")
    queue.succeeded("a")  # the step in flight finishes after the cancel: nothing new starts
    assert not queue and queue.pending == ()


def test_upstream_outside_the_queue_is_ignored() -> None:
    """A derivative's push-only root has no data step: it must not block the derivative."""
    queue = ReadyQueue(("view",), {"view": {"pushed"}})
    assert drain(queue) == ["view"]
