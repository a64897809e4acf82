"""A real node: kubelet v1.37 (built with the control plane, controlplane/build.py) and
Debian's containerd, runc and CNI plugins in a Debian container with real systemd, logind and
D-Bus (systemd-nspawn), joined to a real control plane with node credentials.

What a kubelet needs on this kind of machine (cgroup v1, no CAP_SYS_RESOURCE, PID 1 not systemd)
is measured in shared/notes/real-node.md; each setting below says which blocker it answers.
The container shares the host's network: the kubelet reaches the API server on 127.0.0.1 and
listens on the host's address; pods get their addresses from a CNI bridge of our own name,
which `sweep` removes with the cgroups the kubelet made, since both outlive the container.
"""

from __future__ import annotations

import base64
import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil
import yaml

from nodeagent_testbed.controlplane.pki import Pki
from nodeagent_testbed.nspawn import remove_cgroup_tree

MANIFEST_DIR = "/etc/kubernetes/manifests"
BRIDGE = "nacni0"  # the pods' bridge on the host network: ours alone, so sweep may delete it
POD_SUBNET = "10.244.0.0/24"
from nodeagent_testbed.realnode.images import PAUSE as PAUSE_IMAGE  # noqa: E402

# logind's own default: a node whose kubelet runs without Graceful Node Shutdown
NO_GNS = (0, 0)

NSPAWN_ARGS = (
    "--capability=all",  # CNI sets up the pods' interfaces on the host network (CAP_NET_ADMIN)
    "--bind-ro=/dev/kmsg",  # the kubelet's OOM watcher opens it
    # runc joins a session keyring per container; nspawn's filter refuses these by default
    "--system-call-filter=add_key keyctl request_key",
)
# the kubelet sets these at start; nspawn mounts /proc/sys read-only, so the host sets them
HOST_SYSCTLS = {"vm.overcommit_memory": "1", "kernel.panic": "10", "kernel.panic_on_oops": "1"}
CGROUP_ROOTS = ("kubepods", "kubepods.slice")  # the kubelet's cgroupfs and systemd names


@dataclass(frozen=True)
class NodeNetwork:
    """A node's own network namespace on the host's bridge (realnode.fleet): its address, the
    host's (its default route), its pods' subnet, and the other nodes' (pod subnet, address)
    to route their pods through."""

    address: str
    gateway: str
    pod_subnet: str
    routes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class NodeSpec:
    """What makes one real node: its name, the control plane it joins, and its kubelet's
    Graceful Node Shutdown periods (seconds; (0, 0) = off, the recommended set-up).
    `network`: None shares the host's network (one node on the host), else the node's own."""

    name: str
    server: str
    pki_dir: Path
    kubelet: Path
    gns: tuple[int, int] = NO_GNS
    network: NodeNetwork | None = None


HOST_LOCK = Path("/run/nodeagent-realnode.lock")


def one_node_at_a_time() -> IO[str]:
    """Wait for, take and return the host's real-node lock (closing the file releases it)."""
    f = HOST_LOCK.open("w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def node_ip() -> str:
    """The host's first non-loopback IPv4 address: a kubelet refuses a loopback node IP."""
    for name, addrs in psutil.net_if_addrs().items():
        stats = psutil.net_if_stats().get(name)
        if stats is None or not stats.isup:
            continue
        for a in addrs:
            if a.family.name == "AF_INET" and not ipaddress.ip_address(a.address).is_loopback:
                return str(a.address)
    raise RuntimeError("no non-loopback IPv4 address on this host: the kubelet needs one")


def prepare_host() -> None:
    for key, value in HOST_SYSCTLS.items():
        Path("/proc/sys", *key.split(".")).write_text(value)


def _write(rootfs: Path, inside: str, text: str, mode: int = 0o644) -> None:
    path = rootfs / inside.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def node_kubeconfig(spec: NodeSpec) -> dict[str, Any]:
    """system:node:<name> in system:nodes: what the Node authorizer and NodeRestriction know."""
    pki = Pki.existing(spec.pki_dir)
    pair = pki.client(f"kubelet-{spec.name}", f"system:node:{spec.name}", "system:nodes")

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "cluster",
                "cluster": {"server": spec.server, "certificate-authority-data": b64(pki.ca)},
            }
        ],
        "users": [
            {
                "name": "kubelet",
                "user": {
                    "client-certificate-data": b64(pair.cert),
                    "client-key-data": b64(pair.key),
                },
            }
        ],
        "contexts": [{"name": "kubelet", "context": {"cluster": "cluster", "user": "kubelet"}}],
        "current-context": "kubelet",
    }


def kubelet_config(spec: NodeSpec) -> dict[str, Any]:
    grace, critical = spec.gns
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # this machine has cgroup v1 only
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "staticPodPath": MANIFEST_DIR,
        # the API server has no kubelet client certificate: `kubectl logs` goes through
        # anonymously (a test bed on loopback, not a node to copy)
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "failSwapOn": False,
        "shutdownGracePeriod": f"{grace}s",
        "shutdownGracePeriodCriticalPods": f"{critical}s",
        # the test machine's disk may be fuller than a node's; nothing here is evicted for it
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "resolvConf": "/etc/resolv.conf",
    }


CONTAINERD = f"""version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # no CAP_SYS_RESOURCE on this machine: never lower a container's oom_score_adj below ours
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
"""


def cni(network: NodeNetwork | None) -> dict[str, Any]:
    """The pods' network: a bridge in the node. On the host's network, no gateway and no
    masquerade: either would turn on the host's IP forwarding (read-only in the container), and
    those test pods talk to nothing. In a network of its own the node forwards for its pods
    (its /proc/sys/net is writable), which reach the other nodes' pods by the routes of
    NodeNetwork, unmasqueraded."""
    subnet = network.pod_subnet if network else POD_SUBNET
    ipam: dict[str, Any] = {"type": "host-local", "ranges": [[{"subnet": subnet}]]}
    if network is not None:
        # isGateway only puts the gateway's address on the bridge: without this route a pod
        # has none beyond its subnet, and its answers to anything else are dropped
        ipam["routes"] = [{"dst": "0.0.0.0/0"}]
    bridge = {
        "type": "bridge",
        "bridge": BRIDGE,
        "isGateway": network is not None,
        "ipMasq": False,
        "ipam": ipam,
    }
    return {"cniVersion": "0.4.0", "name": "nodeagent-test", "plugins": [bridge]}


def network_unit(network: NodeNetwork) -> str:
    """host0 (nspawn's end of the veth on the host's bridge) configured, as nothing in the
    container does it: the node's address, the default route via the host, the other nodes'
    pod subnets via those nodes, forwarding for its own pods."""
    steps = [
        "ip link set lo up",
        f"ip addr add {network.address}/24 dev host0",
        "ip link set host0 up",
        f"ip route add default via {network.gateway}",
        *(f"ip route add {subnet} via {via}" for subnet, via in network.routes),
        "echo 1 > /proc/sys/net/ipv4/ip_forward",
    ]
    return f"""[Unit]
Description=the node's address on the test bed's bridge
DefaultDependencies=no
Before=network.target network-online.target containerd.service kubelet.service nodeagent.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec '{"; ".join(steps)}'
[Install]
WantedBy=sysinit.target
"""


# nspawn mounts the cgroup v1 hierarchies read-only; the kubelet and runc write to them
CGROUPS_RW = """[Unit]
Description=cgroup hierarchies writable for containerd and the kubelet
DefaultDependencies=no
Before=containerd.service kubelet.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec 'mount -o remount,rw /sys/fs/cgroup; for d in /sys/fs/cgroup/*/; do \
mount -o remount,bind,rw "$d"; done'
[Install]
WantedBy=multi-user.target
"""


# nspawn gives a container a boot id of its own (a file over /proc/sys/kernel/random/boot_id),
# which only processes that keep its mounts see: the kubelet here did, while the agent's
# sandboxed unit (ProtectKernelTunables mounts /proc/sys anew) and any pod (runc mounts a
# fresh /proc) read the kernel's. On a machine every process reads the one the kernel writes:
# so does everything here, and a container's reboot is, for the kubelet, what a soft reboot is
# on a machine (the same kernel boot id; the agent tells the two boots apart by PID 1's start)
KERNEL_BOOT_ID = """[Unit]
Description=the kernel's boot id for every process, as on a machine
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target containerd.service kubelet.service nodeagent.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/umount /proc/sys/kernel/random/boot_id
[Install]
WantedBy=sysinit.target
"""


def kubelet_unit(spec: NodeSpec) -> str:
    return f"""[Unit]
Description=kubelet
Wants=containerd.service
Requires=kernel-boot-id.service
After=containerd.service cgroups-rw.service kernel-boot-id.service
[Service]
ExecStart=/usr/local/bin/kubelet --config=/var/lib/kubelet/config.yaml \
--kubeconfig=/etc/kubernetes/kubelet.conf --hostname-override={spec.name} \
--node-ip={spec.network.address if spec.network else node_ip()} --v=2
Restart=always
RestartSec=1
[Install]
WantedBy=multi-user.target
"""


def prepare(rootfs: Path, spec: NodeSpec, images: list[Path]) -> None:
    """Everything the node needs in `rootfs` (a copy of nodeagent_testbed.nspawn.node_rootfs):
    the kubelet, its credentials and configuration, containerd's, the CNI network, units, and
    the images to import at boot (`images`: OCI archives, imported before the kubelet starts)."""
    shutil.copy2(spec.kubelet, rootfs / "usr/local/bin/kubelet")
    _write(rootfs, "/etc/kubernetes/kubelet.conf", yaml.safe_dump(node_kubeconfig(spec)), 0o600)
    _write(rootfs, "/var/lib/kubelet/config.yaml", yaml.safe_dump(kubelet_config(spec)))
    (rootfs / MANIFEST_DIR.lstrip("/")).mkdir(parents=True, exist_ok=True)
    _write(rootfs, "/etc/containerd/config.toml", CONTAINERD)
    _write(
        rootfs, "/etc/cni/net.d/10-nodeagent-test.conflist", json.dumps(cni(spec.network), indent=1)
    )
    _write(rootfs, "/etc/systemd/system/cgroups-rw.service", CGROUPS_RW)
    _write(rootfs, "/etc/systemd/system/kubelet.service", kubelet_unit(spec))
    _write(rootfs, "/etc/systemd/system/kernel-boot-id.service", KERNEL_BOOT_ID)
    early = ["kernel-boot-id.service"]
    if spec.network is not None:
        _write(rootfs, "/etc/systemd/system/node-network.service", network_unit(spec.network))
        early.append("node-network.service")
    sysinit = rootfs / "etc/systemd/system/sysinit.target.wants"
    sysinit.mkdir(parents=True, exist_ok=True)
    for unit in early:
        if not (sysinit / unit).is_symlink():
            (sysinit / unit).symlink_to(f"/etc/systemd/system/{unit}")
    images_dir = rootfs / "var/lib/nodeagent-test/images"
    images_dir.mkdir(parents=True, exist_ok=True)
    for archive in images:
        shutil.copy2(archive, images_dir / archive.name)
    _write(rootfs, "/etc/systemd/system/test-images.service", IMPORT_UNIT)
    wants = rootfs / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit in ("cgroups-rw.service", "kubelet.service", "test-images.service"):
        link = wants / unit
        if not link.is_symlink():
            link.symlink_to(f"/etc/systemd/system/{unit}")


# images come before the kubelet, which would otherwise start pods whose image is not there yet;
# at the first boot only: containerd's store is in the node's root fs and outlives its reboots
IMPORT_UNIT = """[Unit]
Description=import the test images into containerd
After=containerd.service
Requires=containerd.service
Before=kubelet.service
ConditionPathExists=!/var/lib/nodeagent-test/images/.imported
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for f in /var/lib/nodeagent-test/images/*.tar; do \
ctr -n k8s.io images import "$f" || exit 1; done'
ExecStartPost=/bin/touch /var/lib/nodeagent-test/images/.imported
[Install]
WantedBy=multi-user.target
"""


def sweep() -> list[str]:
    """Remove what a real node leaves on the host after its container is gone: the kubelet's
    cgroups (empty once their processes died with the container) and the pods' bridge.
    Returns what it could not remove (a leftover a test should report)."""
    left: list[str] = []
    base = Path("/sys/fs/cgroup")
    for controller in sorted(base.iterdir()) if base.is_dir() else []:
        for root_name in CGROUP_ROOTS:
            for found in controller.rglob(root_name):
                left += remove_cgroup_tree(found)
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        done = subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True, text=True)
        if done.returncode != 0:
            left.append(f"bridge {BRIDGE}: {done.stderr.strip()}")
    return left


def leftovers() -> list[str]:
    """What of a real node is still on the host: processes, mounts, cgroups, the bridge."""
    found: list[str] = []
    for p in psutil.process_iter(["name"]):
        if p.info["name"] in ("kubelet", "containerd", "containerd-shim-runc-v2", "runc"):
            found.append(f"process {p.pid} {p.info['name']}")
    for line in Path("/proc/self/mounts").read_text().splitlines():
        if "/run/containerd" in line or "/var/lib/kubelet" in line:
            found.append(f"mount {line.split()[1]}")
    base = Path("/sys/fs/cgroup")
    for controller in sorted(base.iterdir()) if base.is_dir() else []:
        for root_name in CGROUP_ROOTS:
            found += [f"cgroup {d}" for d in controller.rglob(root_name)]
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        found.append(f"network device {BRIDGE}")
    return found


def is_root() -> bool:
    return os.geteuid() == 0
