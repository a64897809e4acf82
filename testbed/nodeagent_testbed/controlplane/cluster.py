"""Start and stop a real control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, built from upstream (see build.py).

Everything lives under one directory: certificates, kubeconfigs, etcd's data, one log per
component, and `state.json` with the process ids and the API server's URL, so `down` finds what
`up` started even from another process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import select
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from nodeagent_testbed.controlplane.build import Binaries, ensure_built
from nodeagent_testbed.controlplane.nodes import KWOK_ANNOTATION, create_nodes, wait_settled
from nodeagent_testbed.controlplane.pki import Pair, Pki

STAGES = Path(__file__).with_name("kwok-stages.yaml")
# the alpha APIs and gates of 1.37 that nodeagent's later work needs, where 1.37 has them
FEATURE_GATES = ("EvictionRequestAPI=true",)
RUNTIME_CONFIG = ("lifecycle.k8s.io/v1alpha1=true",)
START_TIMEOUT = 60.0


class ClusterError(RuntimeError):
    pass


_prefixes = itertools.count(1)


def etcd_prefix() -> str:
    """A fresh etcd prefix: API servers of one test session on one etcd share no state."""
    return f"/registry-{next(_prefixes)}"


@dataclass
class State:
    server: str
    kubernetes_version: str
    pids: dict[str, int]


# Below the kernel's ephemeral range (32768-60999 by default), so no outgoing connection takes
# a port between our check and the component's bind; handed out once per process.
_PORTS = range(20000, 32000)
_given: set[int] = set()


def free_port() -> int:
    for _ in range(200):
        port = random.choice(_PORTS)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise ClusterError("no free port on 127.0.0.1 between 20000 and 32000")


def kubeconfig(path: Path, server: str, ca: Path, user: dict[str, str], name: str) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "nodeagent-test",
                "cluster": {"server": server, "certificate-authority": str(ca)},
            }
        ],
        "users": [{"name": name, "user": user}],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": "nodeagent-test", "user": name, "namespace": "default"},
            }
        ],
        "current-context": name,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def cert_user(pair: Pair) -> dict[str, str]:
    return {"client-certificate": str(pair.cert), "client-key": str(pair.key)}


class ControlPlane:
    def __init__(self, dir: Path) -> None:
        self.dir = dir.resolve()
        self.logs = self.dir / "logs"
        self.state_file = self.dir / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    def state(self) -> State | None:
        if not self.state_file.exists():
            return None
        return State(**json.loads(self.state_file.read_text()))

    # --- up ------------------------------------------------------------------------------------

    def up(
        self,
        nodes: int = 3,
        binaries: Binaries | None = None,
        etcd_url: str | None = None,
        etcd_prefix: str = "/registry",
        audit: bool = False,
        kubelets: frozenset[str] = frozenset(),
        apiserver_args: tuple[str, ...] = (),
        address: str | None = None,
    ) -> State:
        """Start everything; with `etcd_url`, use that etcd (under `etcd_prefix`) instead of
        starting one, so tests can have fresh API servers on one etcd. Nodes named in
        `kubelets` are not made for kwok: a real kubelet registers them (realnode).
        `apiserver_args`: more flags of kube-apiserver (e.g. an admission configuration).
        `address`: kube-apiserver also serves there (it listens on every address then, and
        advertises that one): real nodes in network namespaces of their own reach the host
        at its bridge address, not at its loopback (realnode.fleet; `server_at`)."""
        if self.state() is not None:
            raise ClusterError(f"{self.dir} already has a running control plane; run down first")
        bins = binaries or ensure_built()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        pki = Pki(self.dir / "pki", (address,) if address else ())
        admin = pki.client("admin", "nodeagent-admin", "system:masters")
        api_port = free_port()
        server = f"https://127.0.0.1:{api_port}"
        state = State(server, bins.kubernetes_version, {})
        kubeconfig(self.kubeconfig, server, pki.ca, cert_user(admin), "nodeagent-admin")

        def as_component(name: str) -> str:
            """A kubeconfig with the client certificate of user system:<name>."""
            pair = pki.client(name, f"system:{name}")
            return str(
                kubeconfig(self.dir / f"{name}.kubeconfig", server, pki.ca, cert_user(pair), name)
            )

        try:
            if etcd_url is None:
                etcd_url = self.start_etcd(state, bins)
            self._start(
                state,
                "kube-apiserver",
                [
                    str(bins.path("kube-apiserver")),
                    f"--etcd-servers={etcd_url}",
                    f"--etcd-prefix={etcd_prefix}",
                    f"--bind-address={'0.0.0.0' if address else '127.0.0.1'}",
                    f"--advertise-address={address or '127.0.0.1'}",
                    f"--secure-port={api_port}",
                    f"--cert-dir={self.dir / 'pki'}",
                    f"--tls-cert-file={pki.serving.cert}",
                    f"--tls-private-key-file={pki.serving.key}",
                    f"--client-ca-file={pki.ca}",
                    "--authorization-mode=Node,RBAC",
                    "--enable-admission-plugins=NodeRestriction",
                    # new nodes would wait for the node lifecycle controller to lift a not-ready
                    # taint: seconds per test for nothing nodeagent looks at
                    "--disable-admission-plugins=TaintNodesByCondition",
                    # a real kubelet (realnode) is reached at its node's address, not by
                    # a node name no resolver knows
                    "--kubelet-preferred-address-types=InternalIP",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={pki.sa_pub}",
                    f"--service-account-signing-key-file={pki.sa_key}",
                    "--service-cluster-ip-range=10.96.0.0/16",
                    "--allow-privileged=true",
                    "--feature-gates=" + ",".join(FEATURE_GATES),
                    "--runtime-config=" + ",".join(RUNTIME_CONFIG),
                    "--enable-priority-and-fairness=false",
                    "--endpoint-reconciler-type=none",
                    "--profiling=false",
                    "--v=1",
                    *(self._audit_flags() if audit else []),
                    *apiserver_args,
                ],
            )
            self._start(
                state,
                "kube-controller-manager",
                [
                    str(bins.path("kube-controller-manager")),
                    "--kubeconfig=" + as_component("kube-controller-manager"),
                    "--controllers=*,-nodeipam,-ttl,-bootstrapsigner,-tokencleaner",
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={pki.sa_key}",
                    f"--root-ca-file={pki.ca}",
                    "--leader-elect=false",
                    "--secure-port=0",  # nothing here scrapes it
                    "--concurrent-gc-syncs=5",
                    # node changes (a cordon's taint) handled within a second
                    "--node-monitor-period=1s",
                    "--v=1",
                ],
            )
            self._start(
                state,
                "kube-scheduler",
                [
                    str(bins.path("kube-scheduler")),
                    "--kubeconfig=" + as_component("kube-scheduler"),
                    "--leader-elect=false",
                    "--secure-port=0",  # nothing here scrapes it
                    "--v=1",
                ],
            )
            self._start(
                state,
                "kwok",
                [
                    str(bins.path("kwok")),
                    f"--kubeconfig={self.kubeconfig}",
                    "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                    "--node-lease-duration-seconds=40",
                    f"--config={STAGES}",
                    "--v=INFO",
                ],
            )
            # the components wait for the API server themselves: start them all, then wait
            self._wait_ready(server, pki, admin, "/readyz")
            self.state_file.write_text(json.dumps(asdict(state), indent=1))
            create_nodes(self.kubeconfig, nodes, leave=kubelets)
            wait_settled(self.kubeconfig, nodes - len(kubelets), START_TIMEOUT)
        except BaseException:
            self._stop(state)
            raise
        return state

    def server_at(self, address: str) -> str:
        """The API server's URL at `address` (given to `up`) instead of loopback."""
        state = self.state()
        assert state is not None, "the control plane is not up"
        return state.server.replace("127.0.0.1", address, 1)

    @property
    def audit_log(self) -> Path:
        """One JSON line per request stage (Metadata level): who (user agent), what, answer."""
        return self.dir / "audit.log"

    def _audit_flags(self) -> list[str]:
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
            "omitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
        )
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ]

    def start_etcd(self, state: State, bins: Binaries) -> str:
        client, peer = free_port(), free_port()
        self._start(
            state,
            "etcd",
            [
                str(bins.path("etcd")),
                "--name=default",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{client}",
                f"--advertise-client-urls=http://127.0.0.1:{client}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                # test data: losing it on a power cut is fine, fsync on every write is not
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        return f"http://127.0.0.1:{client}"

    def _start(self, state: State, name: str, argv: list[str]) -> None:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives `scripts/cluster up`; down kills the group
            cwd=self.dir,
        )
        log.close()
        state.pids[name] = proc.pid
        self.state_file.write_text(json.dumps(asdict(state), indent=1))

    def _wait_ready(self, server: str, pki: Pki, admin: Pair, path: str) -> None:
        """Wait for the API server's health endpoint (nothing to watch before it serves)."""
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        ctx.load_cert_chain(str(admin.cert), str(admin.key))
        deadline = time.monotonic() + START_TIMEOUT
        delay = 0.05
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(server + path, context=ctx, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as e:
                last = str(e)
            time.sleep(delay)  # nothing announces that it serves: ask again
            delay = min(delay * 1.5, 0.5)
        raise ClusterError(
            f"kube-apiserver not ready after {START_TIMEOUT:.0f} s ({last}); see {self.logs}"
        )

    def _check_alive(self) -> None:
        state = self.state()
        pids = state.pids if state else json.loads(self.state_file.read_text())["pids"]
        for name, pid in pids.items():
            if not _alive(pid):
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-2000:]
                raise ClusterError(f"{name} exited during start-up:\n{tail}")

    # --- down ----------------------------------------------------------------------------------

    def down(self) -> None:
        state = self.state()
        if state is None:
            return
        self._stop(state)

    def _stop(self, state: State) -> None:
        for name in reversed(list(state.pids)):
            _kill_group(state.pids[name])
        self.state_file.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (down from another process): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"
    return waited == 0


def _kill_group(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the component's process group, SIGKILL what is left once its leader has exited
    or after `grace` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    _wait_exit(pid, grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _wait_exit(pid: int, timeout: float) -> None:
    """Return once `pid` has exited (its pidfd turns readable: child or not, reaped or not) or
    after `timeout` seconds."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
