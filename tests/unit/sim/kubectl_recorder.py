"""Record the request bodies real kubectl sends, for the protobuf decoder's tests.

Recorder is a tiny aiohttp server on 127.0.0.1 that serves just enough discovery for kubectl,
a node `n1` with one pod `p1` (for drain), records every request body, and answers JSON.
CASES are the kubectl commands whose bodies the tests decode; `capture()` runs one and
returns its body, `dry_run()` the JSON kubectl prints for the same object.

Re-capture the stored fixtures (after bumping kubectl) with

    python -m tests.unit.sim.kubectl_recorder
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from nodeagent_testbed.sim.cluster import kubeconfig_dict

FIXTURES = Path(__file__).parent / "protobuf_fixtures"
BINARY = b"\x00\x01\xfe\xff\x80bin"  # a --from-file whose bytes are not UTF-8


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    method: str = "POST"
    dry_run: bool = True  # `--dry-run=client -o json` prints the object kubectl sends


CASES = (
    Case(
        "deployment", ("create", "deployment", "web", "--image=nginx", "--replicas=3", "--port=80")
    ),
    Case(
        "deployment_command",
        ("create", "deployment", "sleeper", "--image=busybox", "--replicas=0", "--", "sleep", "1h"),
    ),
    Case("deployment_images", ("create", "deployment", "multi", "--image=nginx", "--image=redis")),
    Case("namespace", ("create", "namespace", "x")),
    Case(
        "configmap",
        (
            "create",
            "configmap",
            "cm1",
            "--from-literal=a=1",
            "--from-literal=b=héllo wörld",
            "--from-file=bin={binary}",
        ),
    ),
    Case(
        "secret",
        ("create", "secret", "generic", "s1", "--from-literal=user=admin", "--type=Opaque"),
    ),
    Case(
        "secret_docker",
        (
            "create",
            "secret",
            "docker-registry",
            "reg",
            "--docker-server=r.example",
            "--docker-username=u",
            "--docker-password=p",
        ),
    ),
    Case("service", ("create", "service", "clusterip", "svc1", "--tcp=80:8080", "--tcp=443:https")),
    Case(
        "service_nodeport",
        ("create", "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080"),
    ),
    Case("service_headless", ("create", "service", "clusterip", "hl", "--clusterip=None")),
    Case("serviceaccount", ("create", "serviceaccount", "robot")),
    Case(
        "priorityclass",
        (
            "create",
            "priorityclass",
            "low",
            "--value=-5",
            "--description=below zero",
            "--preemption-policy=Never",
        ),
    ),
    Case(
        "pdb_percent",
        ("create", "poddisruptionbudget", "pdb1", "--selector=app=web", "--min-available=50%"),
    ),
    Case(
        "pdb_int",
        ("create", "poddisruptionbudget", "pdb2", "--selector=app=web", "--max-unavailable=1"),
    ),
    # typed Pods().Delete sends DeleteOptions as protobuf (kubectl delete itself sends JSON)
    Case(
        "deleteoptions_grace0",
        ("drain", "n1", "--disable-eviction", "--grace-period=0", "--timeout=30s"),
        method="DELETE",
        dry_run=False,
    ),
    Case(
        "deleteoptions_default",
        ("drain", "n1", "--disable-eviction", "--timeout=30s"),
        method="DELETE",
        dry_run=False,
    ),
    # batch/v1 is not in the decoder's table: the real body must be refused, not half-read
    Case("job", ("create", "job", "j", "--image=busybox"), dry_run=False),
)

_RESOURCES = {
    "v1": [
        ("namespaces", "Namespace", False),
        ("nodes", "Node", False),
        ("pods", "Pod", True),
        ("configmaps", "ConfigMap", True),
        ("secrets", "Secret", True),
        ("services", "Service", True),
        ("serviceaccounts", "ServiceAccount", True),
    ],
    "apps/v1": [("deployments", "Deployment", True)],
    "batch/v1": [("jobs", "Job", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "scheduling.k8s.io/v1": [("priorityclasses", "PriorityClass", False)],
}


def _status(code: int, reason: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "code": code, "reason": reason}
    body["status"] = "Success" if code < 400 else "Failure"
    return web.json_response(body, status=code)


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p1",
            "namespace": "default",
            "uid": "uid-p1",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "rs",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running"},
    }


@dataclass
class Request:
    method: str
    path: str
    content_type: str
    body: bytes


@dataclass
class Recorder:
    requests: list[Request] = field(default_factory=list)
    deleted: bool = False
    port: int = 0
    _runner: web.AppRunner | None = None

    async def __aenter__(self) -> Recorder:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, req: web.Request) -> web.StreamResponse:
        body = await req.read()
        if req.method != "GET":
            self.requests.append(Request(req.method, req.path, req.content_type, body))
        p = req.path
        if p == "/api":
            return web.json_response({"kind": "APIVersions", "versions": ["v1"]})
        if p == "/apis":
            groups = [
                {"name": gv.split("/")[0], "versions": [{"groupVersion": gv, "version": "v1"}]}
                for gv in _RESOURCES
                if gv != "v1"
            ]
            return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        gv = p.removeprefix("/apis/").removeprefix("/api/")
        if gv in _RESOURCES and p in ("/api/v1", f"/apis/{gv}"):
            verbs = ["create", "delete", "get", "list", "patch", "update"]
            resources: list[dict[str, Any]] = [
                {"name": n, "singularName": k.lower(), "namespaced": ns, "kind": k, "verbs": verbs}
                for n, k, ns in _RESOURCES[gv]
            ]
            if gv == "v1":
                resources.append(
                    {
                        "name": "pods/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
            return web.json_response(
                {"kind": "APIResourceList", "groupVersion": gv, "resources": resources}
            )
        if p == "/api/v1/nodes/n1":
            return web.json_response(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}}
            )
        if p == "/api/v1/pods":
            items = [] if self.deleted else [_pod()]
            return web.json_response(
                {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
            )
        if p == "/api/v1/namespaces/default/pods/p1":
            if req.method == "DELETE":
                self.deleted = True
                return web.json_response(_pod())
            return _status(404, "NotFound") if self.deleted else web.json_response(_pod())
        if req.method in ("POST", "PUT") and req.content_type == "application/json":
            return web.json_response(json.loads(body), status=201)
        if req.method in ("POST", "PUT"):
            # kubectl takes a JSON answer to a protobuf request; echo the bare minimum
            return web.json_response(
                {"apiVersion": "v1", "kind": "Status", "status": "Success"}, status=201
            )
        return _status(404, "NotFound")


async def _kubectl(home: Path, url: str | None, *args: str) -> tuple[int, str, str]:
    kubeconfig = home / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_dict(url or "http://127.0.0.1:1")))
    (home / "bin").write_bytes(BINARY)
    args = tuple(a.replace("{binary}", str(home / "bin")) for a in args)
    exe = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
    proc = await asyncio.create_subprocess_exec(
        exe,
        "--cache-dir",
        str(home / "cache"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)},
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def capture(case: Case, home: Path) -> Request:
    """Run the case's kubectl command against a Recorder; the one body of case.method."""
    async with Recorder() as rec:
        code, out, err = await _kubectl(home, rec.url, *case.args)
    assert code == 0, f"kubectl {' '.join(case.args)}: {err}{out}"
    sent = [r for r in rec.requests if r.method == case.method]
    assert len(sent) == 1, f"{case.name}: expected one {case.method}, got {rec.requests}"
    return sent[0]


async def dry_run(case: Case, home: Path) -> dict[str, Any]:
    args = list(case.args)
    at = args.index("--") if "--" in args else len(args)  # flags go before a command
    args[at:at] = ["--dry-run=client", "-o", "json"]
    code, out, err = await _kubectl(home, None, *args)
    assert code == 0, f"kubectl {' '.join(case.args)} --dry-run: {err}{out}"
    obj: dict[str, Any] = json.loads(out)
    return obj


async def _main() -> None:
    FIXTURES.mkdir(exist_ok=True)
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            req = await capture(case, Path(tmp))
            (FIXTURES / f"{case.name}.pb").write_bytes(req.body)
            if case.dry_run:
                expected = await dry_run(case, Path(tmp))
                text = json.dumps(expected, indent=2, sort_keys=True, ensure_ascii=False)
                (FIXTURES / f"{case.name}.json").write_text(text + "\n")
        print(f"{case.name}: {req.content_type}, {len(req.body)} bytes")


if __name__ == "__main__":
    asyncio.run(_main())
