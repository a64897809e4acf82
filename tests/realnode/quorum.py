"""The fleet tests' quorum workload: a three-member etcd cluster, one member a real node (host
network, its data in a hostPath that outlives the node's reboots), under a PodDisruptionBudget
`maxUnavailable: 1`, Ready while the member is healthy (etcd's /health: it has a leader); and a
client on the host that writes throughout and keeps every write etcd acknowledged.

What the client measures: etcd's leader answers a write within milliseconds while a quorum of
members is up; a leader change (the leader's member stopped: etcd hands leadership over first)
costs at most its election timeout (1 s). Each write goes to every member at once and counts at
the first acknowledgement, so a member that stops answering costs the client no failover time.
So the time etcd had no quorum is the time beyond 1 s (and the client's own pause between
writes) of each gap between two acknowledged writes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from nodeagent_testbed.realnode.images import ETCD

APP = "quorum"
CLIENT_PORT, PEER_PORT = 2379, 2380
ELECTION_TIMEOUT = 1.0  # etcd's default --election-timeout (ms 1000)
# raft draws each member's timeout from [T, 2T) (raft.go, resetRandomizedElectionTimeout): a
# leader change may leave up to 2T without an acknowledged write while quorum holds; a member
# too many keeps writes failing until a node is back (tens of seconds)
LEADER_CHANGE_AT_MOST = 2 * ELECTION_TIMEOUT
DATA = "/var/lib/quorum-etcd"  # on each node: its member's data, through reboots


def members(nodes: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """One Deployment per (node name, address): etcd member <node> pinned to that node."""
    cluster = ",".join(f"{n}=http://{a}:{PEER_PORT}" for n, a in nodes)
    return [_member(name, address, cluster) for name, address in nodes]


def _member(node: str, address: str, cluster: str) -> dict[str, Any]:
    labels = {"app": APP, "member": node}
    container = {
        "name": "etcd",
        "image": ETCD,
        "imagePullPolicy": "Never",
        "command": [
            "/usr/local/bin/etcd",
            f"--name={node}",
            "--data-dir=/var/lib/etcd/data",
            f"--listen-client-urls=http://{address}:{CLIENT_PORT}",
            f"--advertise-client-urls=http://{address}:{CLIENT_PORT}",
            f"--listen-peer-urls=http://{address}:{PEER_PORT}",
            f"--initial-advertise-peer-urls=http://{address}:{PEER_PORT}",
            f"--initial-cluster={cluster}",
            "--initial-cluster-state=new",  # ignored once the data directory has a member
            "--initial-cluster-token=nodeagent-fleet",
            "--log-level=warn",
        ],
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": CLIENT_PORT},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
    }
    spec = {
        "hostNetwork": True,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "terminationGracePeriodSeconds": 10,
        "containers": [container],
        "volumes": [{"name": "data", "hostPath": {"path": DATA, "type": "DirectoryOrCreate"}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{APP}-{node}", "namespace": "default"},
        "spec": {
            "replicas": 1,
            # its node is cordoned while it drains: the replacement waits there for it
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


BUDGET = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": APP, "namespace": "default"},
    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}},
}


async def _put_at(session: aiohttp.ClientSession, url: str, body: dict[str, str]) -> bool:
    try:
        async with asyncio.timeout(1.0), session.post(url, json=body) as resp:
            answer = await resp.json(content_type=None)
            return resp.status == 200 and "header" in answer and "error" not in answer
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return False


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


@dataclass
class Writer:
    """Writes w/<n> = <n> to etcd's v3 JSON gateway every `spacing` seconds, through every member
    at once (acknowledged at the first answer; the others' attempts are dropped), each attempt
    bounded by 1 s."""

    endpoints: Sequence[str]  # http://address:2379
    spacing: float = 0.05
    acknowledged: list[int] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)  # time.monotonic() of each
    failures: int = 0
    first: asyncio.Event = field(default_factory=asyncio.Event)  # set at the first ack

    async def run(self, session: aiohttp.ClientSession) -> None:
        n = 0
        while True:
            if await self._put(session, f"w/{n:08d}", str(n)):
                self.acknowledged.append(n)
                self.acked_at.append(time.monotonic())
                self.first.set()
                n += 1
            else:
                self.failures += 1
            # pacing the client's own load (and no busy loop while every member refuses)
            await asyncio.sleep(self.spacing)

    async def _put(self, session: aiohttp.ClientSession, key: str, value: str) -> bool:
        body = {"key": _b64(key), "value": _b64(value)}
        attempts = [
            asyncio.create_task(_put_at(session, f"{url}/v3/kv/put", body))
            for url in self.endpoints
        ]
        try:
            for attempt in asyncio.as_completed(attempts):
                if await attempt:
                    return True
            return False
        finally:
            for task in attempts:
                task.cancel()
            await asyncio.gather(*attempts, return_exceptions=True)

    def quorum_lost_s(self, until: float) -> float:
        """Seconds etcd acknowledged no write beyond a leader change's cost, from the first
        acknowledged write to `until`."""
        times = [*self.acked_at, until]
        allowed = LEADER_CHANGE_AT_MOST + self.spacing
        return sum(max(0.0, b - a - allowed) for a, b in itertools.pairwise(times))

    def longest_gap(self, until: float) -> float:
        times = [*self.acked_at, until]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


@contextlib.asynccontextmanager
async def writing(endpoints: Sequence[str]) -> AsyncIterator[Writer]:
    """A Writer writing from the first acknowledged write until the block ends."""
    writer = Writer(endpoints)
    async with aiohttp.ClientSession() as session:
        task = asyncio.create_task(writer.run(session), name="etcd writer")
        try:
            async with asyncio.timeout(60):
                await writer.first.wait()
            yield writer
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def read_back(endpoints: Sequence[str]) -> set[int]:
    """Every w/<n> etcd holds, read linearizably through the first member that answers."""
    async with aiohttp.ClientSession() as session:
        for endpoint in endpoints:
            try:
                async with (
                    asyncio.timeout(10),
                    session.post(
                        f"{endpoint}/v3/kv/range",
                        json={"key": _b64("w/"), "range_end": _b64("w0")},
                    ) as resp,
                ):
                    body = await resp.json(content_type=None)
                    if resp.status != 200 or "error" in body:
                        continue
                    return {
                        int(base64.b64decode(kv["value"]).decode()) for kv in body.get("kvs", [])
                    }
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue
    raise AssertionError(f"no etcd member answered a read: {list(endpoints)}")
