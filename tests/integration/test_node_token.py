"""A `.deb` agent's token renewal on the real control plane (kube-apiserver enforces RBAC and
packaging/kubernetes/node-token-policy.yaml; the simulated server neither): an agent whose
kubeconfig reads a 10-minute token bound to Node node-1 from a file renews it itself, the new
token is bound to node-1 and is what the agent's client sends from then on; the policy refuses
a node agent's request for another node, an unbound token, a pod- or Secret-bound one, another
ServiceAccount's, one longer than a day, and any request made with a pod's token (the
DaemonSet's pods share the ServiceAccount). A refused renewal leaves the file and the token in
use alone."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from watchfiles import awatch

from nodeagent.kube.client import KubeClient
from nodeagent.kube.connection import load_api_client
from nodeagent.kube.errors import Forbidden
from nodeagent.kube.resources import Resource
from nodeagent.kube.tokenfile import installed
from nodeagent.kube.transport import Transport
from nodeagent.model.token_renewal import read_claims
from nodeagent.node.token_renewal import FileStore, TokenRenewer
from tests.clusters import NAMESPACE, NODE_ACCOUNT, REPO, TestCluster, apply_files

pytestmark = pytest.mark.backends("real")

POLICY = "nodeagent-node-token"
SELF_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False
)


def node_ref(name: str) -> dict[str, str]:
    return {"apiVersion": "v1", "kind": "Node", "name": name}


def jti(token: str) -> str:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["jti"])


async def credential_id(kube: KubeClient) -> str:
    """The `JTI=...` of the token the client sends, as the API server saw it."""
    review = await kube.create(SELF_REVIEWS, {"metadata": {}})
    (found,) = review["status"]["userInfo"]["extra"]["authentication.kubernetes.io/credential-id"]
    return str(found)


def token_kubeconfig(admin: Path, where: Path, token: str) -> Path:
    """The admin kubeconfig's cluster, with a user that reads `token` from the file `token`
    beside it (the .deb's set-up, README.Debian)."""
    (where / "token").write_text(token + "\n")  # as `kubectl create token > token` leaves it
    (where / "token").chmod(0o600)
    doc = yaml.safe_load(admin.read_text())
    doc["users"] = [{"name": "nodeagent", "user": {"tokenFile": "token"}}]
    doc["contexts"][0]["context"]["user"] = "nodeagent"
    path = where / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


async def until_refused(request: Callable[[], Any], timeout: float = 30) -> Forbidden:
    """The policy's refusal of `request`, once kube-apiserver has taken the new policy in
    from its own informer (no event of it reaches us: ask again)."""
    delay = 0.05
    async with asyncio.timeout(timeout):
        while True:
            try:
                await request()
            except Forbidden as e:
                if POLICY in str(e):
                    return e
                raise
            await asyncio.sleep(delay)  # the server's informer, not ours: nothing to wait on
            delay = min(delay * 2, 1.0)


async def test_a_node_bound_token_is_renewed_and_confined(
    backend: TestCluster, tmp_path: Path
) -> None:
    await backend.install_crds()
    pod_bound = await backend.service_account(node="node-1")  # the DaemonSet's pod on node-1
    await asyncio.to_thread(
        apply_files, backend.kubeconfig, [REPO / "packaging/kubernetes/node-token-policy.yaml"]
    )
    admin = backend.client(max_workers=2)
    # the admin's first token (README.Debian), as short as the API allows
    first = (
        await admin.request_token(
            NAMESPACE,
            NODE_ACCOUNT,
            {"expirationSeconds": 600, "boundObjectRef": node_ref("node-1")},
        )
    )["status"]["token"]
    kubeconfig = token_kubeconfig(backend.kubeconfig, tmp_path, first)
    # the agent's client; its transport's clock is the test's, so that the auth header it
    # reuses for a second is asked for again when the test says
    ticks = [0.0]
    loaded = load_api_client(str(kubeconfig))
    token_file = installed(loaded.configuration)
    assert token_file is not None and token_file.path == tmp_path / "token"
    agent = KubeClient(Transport(loaded.configuration, clock=lambda: ticks[0]), max_workers=2)
    try:
        assert await credential_id(agent) == f"JTI={jti(first)}"

        def ask(spec: Mapping[str, Any], account: str = NODE_ACCOUNT) -> Any:
            return lambda: agent.request_token(NAMESPACE, account, spec)

        # the policy confines the agent's requests
        await until_refused(ask({"expirationSeconds": 600, "boundObjectRef": node_ref("node-2")}))
        for spec in (
            {"expirationSeconds": 600},  # unbound
            {"expirationSeconds": 86401, "boundObjectRef": node_ref("node-1")},
            {
                "expirationSeconds": 600,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "x"},
            },
            {
                "expirationSeconds": 600,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "nodeagent-node-1"},
            },
        ):
            with pytest.raises(Forbidden) as refused:
                await ask(spec)()
            assert POLICY in str(refused.value), spec
        # another ServiceAccount's: RBAC already says no
        with pytest.raises(Forbidden) as refused:
            await ask(
                {"expirationSeconds": 600, "boundObjectRef": node_ref("node-1")},
                "nodeagent-controllers",
            )()
        assert POLICY not in str(refused.value)
        # a pod's token (the DaemonSet's pods share the ServiceAccount) may ask for none
        daemonset_pod = backend.client(pod_bound, max_workers=1)
        with pytest.raises(Forbidden) as refused:
            await daemonset_pod.request_token(
                NAMESPACE,
                NODE_ACCOUNT,
                {"expirationSeconds": 600, "boundObjectRef": node_ref("node-1")},
            )
        assert POLICY in str(refused.value)

        # a renewal the policy refuses (longer than a day) changes nothing
        store = FileStore(token_file)
        refused_renewer = TokenRenewer(
            agent, store, expiration=90000, renew_after=0.8, request_timeout=10
        )
        with pytest.raises(Forbidden):
            await refused_renewer.renew(read_claims(first))
        assert (tmp_path / "token").read_text().strip() == first

        # the renewal proper: at once (a thousandth of the life), the token the policy allows
        renewer = TokenRenewer(agent, store, expiration=600, renew_after=0.001, request_timeout=10)
        task = asyncio.create_task(renewer.run())
        try:
            async with asyncio.timeout(30):
                async for _ in awatch(tmp_path, debounce=50, step=20):
                    if (tmp_path / "token").read_text().strip() != first:
                        break
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        renewed = (tmp_path / "token").read_text()
        claims = read_claims(renewed)
        assert (claims.namespace, claims.service_account, claims.node, claims.pod) == (
            NAMESPACE,
            NODE_ACCOUNT,
            "node-1",
            None,
        )
        assert claims.lifetime == 600 and claims.expires_at > time.time() + 500
        assert (tmp_path / "token").stat().st_mode & 0o777 == 0o600
        # the agent's client sends the new token once its one-second header is due again
        ticks[0] += 2
        assert await credential_id(agent) == f"JTI={jti(renewed)}"
        # and a client loaded afresh (an agent restarted) reads it from the file
        assert await credential_id(backend.client(kubeconfig, max_workers=1)) == (
            f"JTI={jti(renewed)}"
        )
    finally:
        await agent.close()
