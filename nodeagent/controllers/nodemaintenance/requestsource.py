"""Where the NodeMaintenance controller's EvictionRequests are: our CRD's, and, where the
server serves `lifecycle.k8s.io/v1alpha1`, ours on the upstream API shown as the CRD's
(:mod:`nodeagent.model.lifecycle.mirror`), in one store and one stream of events the decision and
the shell read as before. Which API a new request goes to is decided per pod (`upstream`): the
upstream one for pods whose interceptors all respond there too
(:func:`nodeagent.model.lifecycle.ourresponders.upstream_evicts`); mirror pods, and pods
naming interceptors of others, stay on our CRD, where those run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodeagent.controllers.nodemaintenance.signatures import eviction_request_node_index
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.informer import Informer
from nodeagent.kube.resources import EVICTIONREQUESTS, EVICTIONS, UPSTREAM_EVICTIONREQUESTS, Obj
from nodeagent.kube.store import Store
from nodeagent.model.lifecycle.eviction import target_index
from nodeagent.model.lifecycle.mirror import as_crd_request, is_ours
from nodeagent.model.lifecycle.succession import current

__all__ = ["RequestSource", "RequestStore"]

OnAdd = Callable[[Obj], None]
OnUpdate = Callable[[Obj, Obj], None]


class RequestStore:
    """Both stores as one: a request of a pod is in one of them."""

    def __init__(self, crd: Store, mirror: Store) -> None:
        self._stores = (crd, mirror)
        self._mirror = mirror

    def upstream(self, key: str) -> bool:
        """Whether the request under `key` (``namespace/pod-UID``) is ours upstream."""
        return key in self._mirror

    def __contains__(self, key: object) -> bool:
        return any(key in s for s in self._stores)

    def get(self, key: str) -> Obj | None:
        for s in self._stores:
            if (found := s.get(key)) is not None:
                return found
        return None

    def by_index(self, index: str, value: str) -> tuple[Obj, ...]:
        crd, mirror = (s.by_index(index, value) for s in self._stores)
        # unchanged buckets stay the same tuple: decisions recall what they derived from one
        return crd if not mirror else mirror if not crd else crd + mirror


class RequestSource:
    """The CRD's informer, and with `upstream` (which pods' requests go upstream) the mirror
    of ours on `lifecycle.k8s.io`."""

    def __init__(
        self,
        informers: SharedInformers,
        *,
        upstream: Callable[[Mapping[str, Any]], bool] | None,
    ) -> None:
        self.crd = informers.informer(
            EVICTIONREQUESTS, indexers={"node": eviction_request_node_index}
        )
        self.mirror = Store({"node": eviction_request_node_index})
        self.store = RequestStore(self.crd.store, self.mirror)
        self.informers: list[Informer] = [self.crd]
        self.upstream = upstream
        self._handlers: list[tuple[OnAdd | None, OnUpdate | None, OnAdd | None]] = []
        if upstream is not None:
            self._requests = informers.informer(
                UPSTREAM_EVICTIONREQUESTS, indexers={"target": target_index}
            )
            self._evictions = informers.informer(EVICTIONS, indexers={"target": target_index})
            self.informers += [self._requests, self._evictions]
            for inf in (self._requests, self._evictions):
                inf.add_handler(self._sync, lambda _, new: self._sync(new), self._sync)

    def add_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnAdd | None = None,
    ) -> None:
        self.crd.add_handler(on_add, on_update, on_delete)
        self._handlers.append((on_add, on_update, on_delete))

    def goes_upstream(self, pod: Mapping[str, Any] | None) -> bool:
        """Whether a new request for `pod` goes to the upstream API."""
        return self.upstream is not None and pod is not None and self.upstream(pod)

    def _sync(self, obj: Obj) -> None:
        """A request or an Eviction of a pod changed: show ours anew."""
        for key in target_index(obj):
            ours = [r for r in self._requests.store.by_index("target", key) if is_ours(r)]
            old = self.mirror.get(key)
            if not ours:
                if old is not None:
                    self.mirror.delete(key)
                    self._fire(old, None)
                continue
            new = as_crd_request(ours[0], current(self._evictions.store.by_index("target", key)))
            if old == new:
                continue
            self.mirror.upsert(new)
            self._fire(old, new)

    def _fire(self, old: Obj | None, new: Obj | None) -> None:
        for on_add, on_update, on_delete in self._handlers:
            if old is None and new is not None and on_add is not None:
                on_add(new)
            elif old is not None and new is not None and on_update is not None:
                on_update(old, new)
            elif old is not None and new is None and on_delete is not None:
                on_delete(old)
