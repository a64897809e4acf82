"""What the static-pod interceptor answers: its node's EvictionRequests of our CRD (label
`nodeagent.io/node`), and where the server serves `lifecycle.k8s.io/v1alpha1` its node's
upstream Evictions (the controllers label them alike), whose `nodeagent.io/static-pod`
responder it is. Queue keys: `evr:<namespace>/<name>` and `ev:<namespace>/<name>`."""

from __future__ import annotations

from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.informer import Informer, ListWatcher
from nodeagent.kube.resources import EVICTIONREQUESTS, EVICTIONS, Obj
from nodeagent.kube.store import key_of
from nodeagent.model.names import NODE_LABEL
from nodeagent.model.staticpods.policy import EvictionView

__all__ = ["NodeRequests"]

_EVR = "evr:"
_EV = "ev:"


class NodeRequests:
    def __init__(self, informers: SharedInformers, node_name: str) -> None:
        self._selector = f"{NODE_LABEL}={node_name}"
        self.crd = informers.informer(EVICTIONREQUESTS, label_selector=self._selector)
        self.upstream: Informer | None = None

    def watch_upstream(self, client: ListWatcher) -> Informer:
        """The informer of the node's Evictions, for the caller to run (asked for once the
        server said it serves them, after the shared informers started)."""
        self.upstream = Informer(client, EVICTIONS, label_selector=self._selector)
        return self.upstream

    @staticmethod
    def crd_keys(request: Obj) -> list[str]:
        return [_EVR + key_of(request)]

    @staticmethod
    def upstream_keys(eviction: Obj) -> list[str]:
        return [_EV + key_of(eviction)]

    def keys(self) -> list[str]:
        out = [_EVR + k for k in self.crd.store.keys()]  # noqa: SIM118 (a Store)
        if self.upstream is not None:
            out += [_EV + k for k in self.upstream.store.keys()]  # noqa: SIM118 (a Store)
        return out

    @staticmethod
    def owns(key: str) -> bool:
        return key.startswith((_EVR, _EV))

    def view(self, key: str) -> EvictionView | None:
        """The request or Eviction of a queue key, None when it is gone."""
        if key.startswith(_EVR):
            request = self.crd.store.get(key.removeprefix(_EVR))
            return EvictionView.of(request) if request is not None else None
        if key.startswith(_EV) and self.upstream is not None:
            eviction = self.upstream.store.get(key.removeprefix(_EV))
            return EvictionView.of_eviction(eviction) if eviction is not None else None
        return None

    @staticmethod
    def key(view: EvictionView) -> str:
        return (_EV if view.upstream else _EVR) + view.key
