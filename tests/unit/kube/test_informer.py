"""The informer against a scripted in-memory list/watch source (the simulated API server is
covered by the integration tests)."""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from nodeagent.kube.errors import Gone, KubeError, ServerError, Unreachable
from nodeagent.kube.informer import Informer
from nodeagent.kube.resources import PODS, Resource
from nodeagent.kube.store import namespace_index
from nodeagent.model.backoff import JitteredBackoff
from tests.narrowing import now
from tests.until import until

# no test here waits for time to pass: the loop jumps to its next timer (tests/faketime.py)
pytestmark = pytest.mark.fake_time

Obj = dict[str, Any]


class FakeSource:
    """Objects with a global resourceVersion, an event history, and controllable watches."""

    def __init__(self) -> None:
        self.rv = 10
        self.objects: dict[str, Obj] = {}
        self.history: list[tuple[int, Obj]] = []
        self.floor = 0  # watches from below this get Gone
        self.watchers: set[asyncio.Queue[Obj | None]] = set()
        self.gate = asyncio.Event()  # watches wait here before starting
        self.gate.set()
        self.watch_failures: list[KubeError] = []
        self.list_failures: list[KubeError] = []
        self.watch_calls: list[str | None] = []
        self.lists = 0
        self.uids = 0

    def _event(self, kind: str, obj: Obj) -> None:
        event = {"type": kind, "object": copy.deepcopy(obj)}
        self.history.append((self.rv, event))
        for q in self.watchers:
            q.put_nowait(copy.deepcopy(event))

    def put(self, name: str, **spec: Any) -> None:
        self.rv += 1
        old = self.objects.get(name)
        if old is None:
            self.uids += 1
        uid = old["metadata"]["uid"] if old else f"uid-{self.uids}"
        obj = {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": uid,
                "resourceVersion": str(self.rv),
            },
            "spec": spec,
        }
        self.objects[name] = obj
        self._event("MODIFIED" if old else "ADDED", obj)

    def remove(self, name: str) -> None:
        self.rv += 1
        obj = copy.deepcopy(self.objects.pop(name))
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._event("DELETED", obj)

    def bookmark(self) -> None:
        for q in self.watchers:
            q.put_nowait(
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
            )

    def drop_watches(self) -> None:
        for q in self.watchers:
            q.put_nowait(None)

    def compact(self) -> None:
        self.history.clear()
        self.floor = self.rv

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
        self.lists += 1
        await asyncio.sleep(0)  # a request is a suspension point, even one answered at once
        if self.list_failures:
            raise self.list_failures.pop(0)
        return {
            "kind": "PodList",
            "metadata": {"resourceVersion": str(self.rv)},
            "items": [copy.deepcopy(o) for o in self.objects.values()],
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
        self.watch_calls.append(resource_version)
        await self.gate.wait()
        if self.watch_failures:
            raise self.watch_failures.pop(0)
        since = int(resource_version or 0)
        if since < self.floor:
            raise Gone("too old resource version", status=410, reason="Expired")
        q: asyncio.Queue[Obj | None] = asyncio.Queue()
        backlog = [copy.deepcopy(e) for rv, e in self.history if rv > since]
        self.watchers.add(q)
        try:
            for event in backlog:
                yield event
            while (item := await q.get()) is not None:
                yield item
        finally:
            self.watchers.discard(q)


class Recorder:
    def __init__(self) -> None:
        self.log: list[tuple[str, str, str]] = []
        self.state: dict[str, Obj] = {}

    def on_add(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        assert name not in self.state, "add for an object already known: " + name
        self.state[name] = obj
        self.log.append(("add", name, obj["metadata"]["resourceVersion"]))

    def on_update(self, old: Obj, new: Obj) -> None:
        name = new["metadata"]["name"]
        assert self.state[name] is old or self.state[name] == old
        assert old["metadata"]["resourceVersion"] != new["metadata"]["resourceVersion"]
        self.state[name] = new
        self.log.append(("update", name, new["metadata"]["resourceVersion"]))

    def on_delete(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        assert name in self.state, "delete for an unknown object: " + name
        del self.state[name]
        self.log.append(("delete", name, obj["metadata"]["resourceVersion"]))

    def matches(self, source: FakeSource) -> bool:
        have = {n: o["metadata"]["resourceVersion"] for n, o in self.state.items()}
        want = {n: o["metadata"]["resourceVersion"] for n, o in source.objects.items()}
        return have == want


@pytest.fixture
def fast_backoff() -> JitteredBackoff:
    return JitteredBackoff(base=0.01, cap=0.05, rng=random.Random(1))


async def start(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    async with asyncio.timeout(5):
        await informer.wait_synced()
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_list_then_watch(fast_backoff: JitteredBackoff) -> None:
    src = FakeSource()
    src.put("a")
    src.put("b")
    informer = Informer(src, PODS, indexers={"ns": namespace_index}, backoff=fast_backoff)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    assert not informer.has_synced
    task = await start(informer)
    assert now(informer.has_synced)
    assert rec.log == [("add", "a", "11"), ("add", "b", "12")]
    await until(lambda: src.watchers)
    assert src.watch_calls == ["12"]  # watched from the list's resourceVersion
    src.put("a", x=1)
    src.remove("b")
    src.put("c")
    await until(lambda: rec.matches(src))
    assert rec.log[2:] == [("update", "a", "13"), ("delete", "b", "14"), ("add", "c", "15")]
    assert informer.store.index_keys("ns", "default") == ["default/a", "default/c"]
    stored = informer.store.get("default/a")
    assert stored is not None and stored["kind"] == "Pod"  # filled in for handlers
    await stop(task)
    assert not src.watchers  # the watch was closed on cancellation


async def test_bookmarks_only_advance_the_resource_version(fast_backoff: JitteredBackoff) -> None:
    src = FakeSource()
    src.put("a")
    informer = Informer(src, PODS, backoff=fast_backoff)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    task = await start(informer)
    await until(lambda: src.watchers)
    src.rv = 50  # changes elsewhere that this watch does not select
    src.bookmark()
    await until(lambda: informer.resource_version == "50")
    src.drop_watches()
    await until(lambda: len(src.watch_calls) == 2)
    assert src.watch_calls == ["11", "50"]  # resumed from the bookmark, no relist
    assert src.lists == 1
    assert rec.log == [("add", "a", "11")]
    await stop(task)


async def test_dropped_watch_resumes_without_loss_or_duplicates(
    fast_backoff: JitteredBackoff,
) -> None:
    src = FakeSource()
    informer = Informer(src, PODS, backoff=fast_backoff)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    task = await start(informer)
    for round_ in range(5):
        await until(lambda: src.watchers)
        src.gate.clear()  # the next watch waits until we have made changes
        src.drop_watches()
        await until(lambda: not src.watchers)
        src.put(f"p{round_}")
        src.put("p0", round=round_)
        src.gate.set()
        await until(lambda: rec.matches(src))
    assert src.lists == 1
    versions = [(name, rv) for _, name, rv in rec.log]
    assert len(versions) == len(set(versions)), "an event was delivered twice"
    assert len(rec.log) == 10
    await stop(task)


async def test_gone_relists_and_emits_only_the_differences(fast_backoff: JitteredBackoff) -> None:
    src = FakeSource()
    for name in "abcde":
        src.put(name)
    informer = Informer(src, PODS, backoff=fast_backoff)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    task = await start(informer)
    await until(lambda: src.watchers)
    rec.log.clear()

    src.gate.clear()
    src.drop_watches()
    await until(lambda: not src.watchers)
    # While nobody watches: update one, delete one, add one, recreate one (new uid).
    src.put("a", v=2)
    src.remove("b")
    src.put("f")
    src.remove("c")
    src.put("c")
    src.compact()  # the informer's resourceVersion is now too old
    src.gate.set()

    await until(lambda: rec.matches(src) and src.watchers)
    assert src.lists == 2
    assert sorted(rec.log) == sorted(
        [
            ("update", "a", "16"),
            ("delete", "b", "12"),  # last state known to us
            ("add", "f", "18"),
            ("delete", "c", "13"),
            ("add", "c", "20"),
        ]
    )
    # Unchanged objects (d, e) produced nothing; the new watch starts at the relist version.
    assert src.watch_calls[-1] == "20"
    await stop(task)


async def test_errors_back_off_and_resume_from_last_version(fast_backoff: JitteredBackoff) -> None:
    src = FakeSource()
    src.put("a")
    src.list_failures = [Unreachable("refused"), ServerError("boom", status=500)]
    informer = Informer(src, PODS, backoff=fast_backoff)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    task = await start(informer)
    assert src.lists == 3
    await until(lambda: src.watchers)
    src.watch_failures = [Unreachable("reset"), ServerError("boom", status=503)]
    src.put("a", v=1)
    await until(lambda: rec.matches(src))
    src.drop_watches()
    await until(lambda: len(src.watch_calls) >= 4 and src.watchers)
    assert src.watch_calls == ["11", "12", "12", "12"]  # never relisted, never went back
    assert src.lists == 3
    src.put("b")
    await until(lambda: rec.matches(src))
    await stop(task)


async def test_a_failing_handler_does_not_stop_the_others(fast_backoff: JitteredBackoff) -> None:
    src = FakeSource()
    src.put("a")
    informer = Informer(src, PODS, backoff=fast_backoff)
    seen: list[str] = []

    def broken(obj: Obj) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(on_add=broken)
    informer.add_handler(on_add=lambda o: seen.append(o["metadata"]["name"]))
    task = await start(informer)
    await until(lambda: src.watchers)
    src.put("b")
    await until(lambda: seen == ["a", "b"])
    # A handler registered late first hears about everything already cached.
    late: list[str] = []
    informer.add_handler(on_add=lambda o: late.append(o["metadata"]["name"]))
    assert sorted(late) == ["a", "b"]
    await stop(task)


async def test_watch_that_keeps_ending_at_once_backs_off() -> None:
    src = FakeSource()
    informer = Informer(src, PODS, backoff=JitteredBackoff(base=0.2, cap=0.2, jitter=0.0))
    task = await start(informer)
    await until(lambda: src.watchers)
    loop = asyncio.get_running_loop()
    started = loop.time()
    for calls in range(2, 5):
        src.drop_watches()
        await until(lambda: not src.watchers)
        await until(lambda: src.watchers)
        assert len(src.watch_calls) == calls
    # Each watch lasted well under a second and carried no events, so each reconnect waited.
    assert loop.time() - started >= 0.6
    assert src.lists == 1
    await stop(task)
