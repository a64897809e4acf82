"""One policy/v1 eviction of one pod, and what came of it (:class:`EvictionOutcome`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from nodeagent.kube.errors import Conflict, KubeError, NotFound, ServerError, TooManyRequests
from nodeagent.kube.protocols import Evicter, Getter
from nodeagent.kube.resources import PODS
from nodeagent.model.bodies import uid_of
from nodeagent.model.interceptors.imperative import EvictionOutcome

__all__ = ["EvictClient", "evict_pod", "refusal_detail"]


class EvictClient(Evicter, Getter, Protocol):
    """What an eviction needs: the call, and a read of the pod after a 409."""


def refusal_detail(exc: KubeError) -> str:
    """A refused eviction in one line: the status, the message and the budget's cause."""
    text = f"{exc.status} {exc.reason}".strip() if exc.status else (exc.reason or "no response")
    parts = [exc.message] if exc.message else []
    causes = exc.details.get("causes") if isinstance(exc.details, Mapping) else None
    for cause in causes if isinstance(causes, list) else ():
        if isinstance(cause, Mapping) and cause.get("message"):
            parts.append(str(cause["message"]))
    return text + (": " + " ".join(parts) if parts else "")


async def evict_pod(client: EvictClient, namespace: str, name: str, uid: str) -> EvictionOutcome:
    """Evict pod `name` if it is still the one with `uid`."""
    try:
        await client.evict(namespace, name, uid=uid)
    except NotFound as exc:
        return EvictionOutcome("gone", refusal_detail(exc))
    except Conflict as exc:
        # 409: the UID precondition failed (the pod was replaced), or kube-apiserver met a
        # conflict updating the budget or the pod: only the pod itself tells which
        return await _after_conflict(client, namespace, name, uid, exc)
    except (TooManyRequests, ServerError) as exc:
        return EvictionOutcome("refused", refusal_detail(exc))
    except KubeError as exc:
        return EvictionOutcome("error", refusal_detail(exc))
    return EvictionOutcome("evicted")


async def _after_conflict(
    client: EvictClient, namespace: str, name: str, uid: str, exc: Conflict
) -> EvictionOutcome:
    try:
        pod = await client.get(PODS, name, namespace)
    except NotFound:
        return EvictionOutcome("gone", refusal_detail(exc))
    except KubeError as err:
        return EvictionOutcome("error", refusal_detail(err))
    if uid_of(pod) != uid:
        return EvictionOutcome("gone", refusal_detail(exc))
    return EvictionOutcome("refused", refusal_detail(exc))  # same pod: try again later
