"""The controller runtime: shared informers and the workqueue-driven Controller base."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest

from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import Conflict
from nodeagent.kube.ratelimit import ItemExponentialFailureRateLimiter
from nodeagent.kube.resources import NODES, PODS, Obj, Resource
from nodeagent.kube.store import key_of, namespace_index
from tests.tasks import cancel_and_wait
from tests.until import until

# no test here waits for time to pass: the loop jumps to its next timer (tests/faketime.py)
pytestmark = pytest.mark.fake_time


class FakeSource:
    """Lists what it holds and streams events put after the list; counts the lists."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.rv = 0
        self.lists: list[tuple[str, str | None, str | None]] = []
        self.watchers: list[asyncio.Queue[Obj]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    def put(self, name: str, namespace: str | None = None, **fields: Any) -> None:
        self.rv += 1
        meta: dict[str, Any] = {"name": name, "resourceVersion": str(self.rv), "uid": name}
        if namespace:
            meta["namespace"] = namespace
        obj = {"metadata": meta, **fields}
        kind = "MODIFIED" if key_of(obj) in self.objects else "ADDED"
        self.objects[key_of(obj)] = obj
        for q in self.watchers:
            q.put_nowait({"type": kind, "object": obj})

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        page_size: int = 500,
    ) -> Obj:
        await self.gate.wait()
        self.lists.append((resource.plural, label_selector, field_selector))
        return {
            "metadata": {"resourceVersion": str(self.rv)},
            "items": [o for o in self.objects.values()],
        }

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[Obj, None]:
        q: asyncio.Queue[Obj] = asyncio.Queue()
        self.watchers.append(q)
        try:
            while True:
                yield await q.get()
        finally:
            self.watchers.remove(q)


@contextlib.asynccontextmanager
async def running(*coros: Any) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(c) for c in coros]
    try:
        yield
    finally:
        await cancel_and_wait(tasks)


def test_one_informer_per_resource_namespace_and_selectors() -> None:
    informers = SharedInformers(FakeSource())
    pods = informers.informer(PODS)
    assert informers.informer(PODS) is pods
    assert informers.informer(PODS, label_selector="") is pods
    assert informers.informer(PODS, namespace="kube-system") is not pods
    assert informers.informer(PODS, label_selector="app=x") is not pods
    assert informers.informer(PODS, field_selector="spec.nodeName=n") is not pods
    assert informers.informer(NODES) is not pods
    assert len(informers.informers) == 5


def test_indexers_of_every_user_are_merged_until_the_informers_run() -> None:
    informers = SharedInformers(FakeSource())
    pods = informers.informer(PODS, indexers={"ns": namespace_index})
    assert informers.informer(PODS, indexers={"ns": namespace_index}) is pods

    def by_node(obj: Obj) -> list[str]:
        return [obj.get("spec", {}).get("nodeName", "")]

    store = pods.store  # as a controller keeps it before the next user adds an index
    informers.informer(PODS, indexers={"node": by_node})
    assert pods.store is store
    pods.store.upsert({"metadata": {"name": "p", "namespace": "a"}, "spec": {"nodeName": "n"}})
    assert [o["metadata"]["name"] for o in pods.store.by_index("ns", "a")] == ["p"]
    assert [o["metadata"]["name"] for o in pods.store.by_index("node", "n")] == ["p"]
    with pytest.raises(ValueError, match="index 'ns' is already defined"):
        informers.informer(PODS, indexers={"ns": by_node})


async def test_indexes_cannot_be_added_once_running() -> None:
    informers = SharedInformers(FakeSource())
    informers.informer(PODS)
    async with running(informers.run()):
        await informers.wait_synced()
        with pytest.raises(RuntimeError, match="already runs"):
            informers.informer(PODS, indexers={"ns": namespace_index})


class Recording(Controller):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("test", **kwargs)
        self.calls: list[str] = []
        self.failures: dict[str, int] = {}
        self.active: set[str] = set()
        self.overlap = False
        self.release = asyncio.Event()
        self.release.set()
        self.results: dict[str, list[Result | None]] = {}  # what the next calls return, per key

    async def reconcile(self, key: str) -> Result | None:
        if key in self.active:
            self.overlap = True
        self.active.add(key)
        try:
            self.calls.append(key)
            await self.release.wait()
            if self.failures.get(key, 0) > 0:
                self.failures[key] -= 1
                raise Conflict("try again", status=409)
            results = self.results.get(key)
            return results.pop(0) if results else None
        finally:
            self.active.discard(key)


async def test_workers_start_once_the_informers_have_synced() -> None:
    source = FakeSource()
    source.put("a")
    source.gate.clear()
    informers = SharedInformers(source)
    nodes = informers.informer(NODES)
    ctl = Recording(informers=[nodes])
    ctl.enqueue("early")
    async with running(informers.run(), ctl.run()):
        await asyncio.sleep(0.01)  # fake time: the gated list holds the workers back
        assert ctl.calls == []  # the list has not returned yet
        source.gate.set()
        await until(lambda: ctl.calls == ["early"])


async def test_enqueue_on_maps_every_event_to_keys() -> None:
    source = FakeSource()
    source.put("n1", spec={"owner": "m1"})
    informers = SharedInformers(source)
    nodes = informers.informer(NODES)
    ctl = Recording(workers=2)

    def owners(obj: Obj) -> list[str]:
        return [obj["spec"]["owner"]]

    ctl.enqueue_on(nodes, owners)
    async with running(informers.run(), ctl.run()):
        await until(lambda: ctl.calls == ["m1"])
        source.put("n1", spec={"owner": "m2"})  # an update enqueues the old and the new owner
        await until(lambda: sorted(ctl.calls) == ["m1", "m1", "m2"])


async def test_failures_are_retried_with_rate_limiting_and_forgotten_on_success() -> None:
    ctl = Recording(rate_limiter=ItemExponentialFailureRateLimiter(0.001, 0.01))
    ctl.failures["k"] = 3
    async with running(ctl.run()):
        ctl.enqueue("k")
        await until(lambda: ctl.calls == ["k"] * 4)
        await until(lambda: ctl.queue.num_requeues("k") == 0)


async def test_a_key_is_never_reconciled_twice_at_once_and_changes_are_not_lost() -> None:
    ctl = Recording(workers=4)
    ctl.release.clear()
    async with running(ctl.run()):
        ctl.enqueue("k")
        await until(lambda: ctl.calls == ["k"])
        ctl.enqueue("k")  # changed while being reconciled
        ctl.enqueue("k")
        await asyncio.sleep(0.01)  # fake time: no second reconcile may start meanwhile
        assert ctl.calls == ["k"]
        ctl.release.set()
        await until(lambda: ctl.calls == ["k", "k"])
    assert not ctl.overlap


async def test_enqueue_after_delays_the_key() -> None:
    ctl = Recording()
    async with running(ctl.run()):
        loop = asyncio.get_running_loop()
        start = loop.time()
        ctl.enqueue_after("later", 0.05)
        await until(lambda: ctl.calls == ["later"])
        assert loop.time() - start >= 0.045


async def test_a_result_requeues_the_key_after_its_delay() -> None:
    ctl = Recording()
    ctl.results["k"] = [Result(requeue_after=0.05), Result(requeue_after=None)]
    async with running(ctl.run()):
        loop = asyncio.get_running_loop()
        start = loop.time()
        ctl.enqueue("k")
        await until(lambda: ctl.calls == ["k", "k"])
        assert loop.time() - start >= 0.045
        await asyncio.sleep(1)  # fake time: long past any requeue delay
        assert ctl.calls == ["k", "k"]  # neither a result without a delay nor None requeues


async def test_an_error_is_retried_after_the_rate_limiters_delay() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.1, 10.0)
    ctl = Recording(rate_limiter=limiter)
    ctl.failures["k"] = 2
    async with running(ctl.run()):
        loop = asyncio.get_running_loop()
        start = loop.time()
        ctl.enqueue("k")
        # fails twice (retried after 0.1 s, then 0.2 s), then succeeds
        await until(lambda: ctl.calls == ["k"] * 3)
        assert loop.time() - start >= 0.29
        await until(lambda: ctl.queue.num_requeues("k") == 0)


async def test_a_result_forgets_the_keys_failures() -> None:
    ctl = Recording(rate_limiter=ItemExponentialFailureRateLimiter(0.001, 0.01))
    ctl.failures["k"] = 2
    ctl.results["k"] = [Result(requeue_after=0.05), Result()]
    async with running(ctl.run()):
        ctl.enqueue("k")
        # forgotten on the success that asked for more
        await until(lambda: len(ctl.calls) == 3 and ctl.queue.num_requeues("k") == 0)
        await until(lambda: ctl.calls == ["k"] * 4)
        assert ctl.queue.num_requeues("k") == 0


async def test_cancelling_run_shuts_the_queue_down() -> None:
    ctl = Recording()
    task = asyncio.create_task(ctl.run())
    await asyncio.sleep(0)  # one loop turn: run() starts
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert ctl.queue.shutting_down


def test_a_controller_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        Recording(workers=0)
