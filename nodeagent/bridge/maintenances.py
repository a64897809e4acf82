"""KEP-4212's admission warning, served by every controllers replica beside the eviction
bridge: a NodeMaintenance whose selector takes every node of the cluster is allowed with a
warning, which ``kubectl`` prints as it creates it (a cordon of every node leaves the pods it
drains nowhere to go). Nothing is refused here and nothing is written.

The KEP's other check, that the creator may delete every node the maintenance selects, is not
here: ``packaging/kubernetes/nodemaintenance-policy.yaml`` makes it in the API server itself,
failing closed, whether the controllers run or not. A warning only ever informs, so this
webhook's failurePolicy is Ignore: a replica that is down or slow never holds a maintenance
back (the node agents' own shutdown maintenances are not sent here at all)."""

from __future__ import annotations

import json

from aiohttp import web

from nodeagent.kube.informer import Informer
from nodeagent.kube.resources import Obj
from nodeagent.model.bodies import metadata_of
from nodeagent.model.bridge.review import (
    BadReview,
    Unsupported,
    allowed_review,
    read_maintenance_review,
)
from nodeagent.model.nodemaintenance.selection import admission_warning

__all__ = ["PATH", "MaintenanceAdmission"]

PATH = "/validate-nodemaintenance"
_SOURCE = "nodeagent"


class MaintenanceAdmission:
    """Answers NodeMaintenance reviews from the bridge's informer of nodes."""

    def __init__(self, nodes: Informer) -> None:
        self._nodes = nodes

    def answer(self, body: object) -> tuple[int, Obj]:
        """The HTTP status and the JSON answer to one request body."""
        try:
            uid, nm = read_maintenance_review(body)
        except BadReview as exc:
            return 400, {"error": f"not an AdmissionReview nodeagent can answer: {exc}"}
        except Unsupported as exc:
            return 200, allowed_review(exc.uid, f"not handled ({exc}); allowed", _SOURCE)
        nodes = {str(metadata_of(n).get("name")): n for n in self._nodes.store.list()}
        return 200, allowed_review(uid, admission_warning(nm, nodes), _SOURCE)

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None  # read_maintenance_review says what is wrong
        status, answer = self.answer(body)
        return web.json_response(answer, status=status)
