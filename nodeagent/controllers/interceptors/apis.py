"""The APIs our cluster-side interceptors take turns on: our CRD's EvictionRequests (their
`status.interceptors`), and where the server serves `lifecycle.k8s.io/v1alpha1` the upstream
Evictions (their `status.responders`, under our responder names). Each is read as an
:class:`EvictionRequestView`, so one interceptor's decisions serve both."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.informer import Informer
from nodeagent.kube.resources import EVICTIONREQUESTS, EVICTIONS, Obj, Resource
from nodeagent.kube.store import key_of
from nodeagent.model.bodies import items, metadata_of
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.status import InterceptorStatus, with_interceptor_status
from nodeagent.model.lifecycle.eviction import target_index
from nodeagent.model.lifecycle.ourresponders import (
    ResponderNames,
    responder_entry,
    view_of_eviction,
)
from nodeagent.model.memo import ObjectMemo

__all__ = ["CRD", "RequestApi", "TurnSource", "turn_sources", "upstream"]


@dataclass(frozen=True)
class RequestApi:
    """One API: its resource, how an object reads, and the status patch that writes one
    interceptor's entry."""

    resource: Resource
    key_prefix: str
    read: Callable[[Mapping[str, Any]], EvictionRequestView]
    entries_patch: Callable[[Mapping[str, Any], InterceptorStatus], Obj]
    """The status (merge patch) with the entry replaced, from the object's status."""


def _crd_entries(status: Mapping[str, Any], entry: InterceptorStatus) -> Obj:
    return {"interceptors": with_interceptor_status(items(status, "interceptors"), entry)}


def _crd_read(obj: Mapping[str, Any]) -> EvictionRequestView:
    return EvictionRequestView.from_obj(obj)


CRD = RequestApi(EVICTIONREQUESTS, "request/", _crd_read, _crd_entries)


def upstream(names: ResponderNames) -> RequestApi:
    def entries(status: Mapping[str, Any], entry: InterceptorStatus) -> Obj:
        written = responder_entry(entry, names)
        return {
            "responders": [
                written if r.get("name") == written["name"] else dict(r)
                for r in items(status, "responders")
            ]
        }

    return RequestApi(EVICTIONS, "eviction/", lambda e: view_of_eviction(e, names), entries)


class TurnSource:
    """One API's objects as an interceptor controller watches them: the informer, its keys
    (prefixed with the API's) and views read once per object version."""

    def __init__(self, api: RequestApi, informers: SharedInformers) -> None:
        self.api = api
        self.informer: Informer = informers.informer(
            api.resource, indexers={"target": target_index}
        )
        self.view = ObjectMemo(api.read)
        self.informer.add_handler(on_delete=self.view.forget)

    def keys(self, obj: Mapping[str, Any]) -> list[str]:
        return [self.api.key_prefix + key_of(obj)]

    def keys_for_pod(self, pod: Mapping[str, Any]) -> Iterable[str]:
        """The keys of the pod's requests (or Evictions), by its UID."""
        md = metadata_of(pod)
        found = self.informer.store.index_keys("target", f"{md.get('namespace')}/{md.get('uid')}")
        return [self.api.key_prefix + k for k in found]

    def get(self, key: str) -> Obj | None:
        """The object of a key of this source's, None for another's or one gone."""
        if not key.startswith(self.api.key_prefix):
            return None
        return self.informer.store.get(key.removeprefix(self.api.key_prefix))


def turn_sources(informers: SharedInformers, names: ResponderNames | None) -> list[TurnSource]:
    """Our CRD, and the upstream API when `names` says it is served."""
    apis = [CRD] if names is None else [CRD, upstream(names)]
    return [TurnSource(api, informers) for api in apis]
