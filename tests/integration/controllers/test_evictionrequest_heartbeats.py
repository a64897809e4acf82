"""A drain through the EvictionRequest controller and the DaemonSet interceptor under the CRDs as
shipped, whose CEL rule (KEP-4563) refuses an interceptor's heartbeat moved less than 60 s
forward: none of nodeagent's status writes may be refused. Both servers evaluate the rule."""

from __future__ import annotations

import asyncio

from nodeagent.controllers.evictionrequest import EvictionSettings
from nodeagent.kube.resources import (
    DAEMONSETS,
    DEPLOYMENTS,
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    PDBS,
    PODS,
)
from nodeagent.model.names import DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR
from nodeagent_testbed.sim.actors.kubelet import EXIT_SECONDS
from tests.integration.controllers.evictionrequest_harness import Env, shipped_env
from tests.integration.controllers.test_evictionrequest import (
    bare_pod,
    budget,
    deployment,
    pdb,
    running_ready,
)
from tests.integration.controllers.test_interceptors_cluster import (
    daemonset,
    draining_daemonsets,
    maintenance,
    on_node,
    running,
)
from tests.tasks import cancel_and_wait

__all__ = ["shipped_env"]  # the fixture, re-exported for pytest


async def test_a_drain_makes_no_status_write_the_heartbeat_rule_refuses(shipped_env: Env) -> None:
    """Each interceptor reports first (startTime and heartbeatTime) and completes seconds later,
    when the pod is gone: the completion must leave the heartbeat where it is."""
    env = shipped_env
    await env.create(DAEMONSETS, daemonset("agent"))
    await env.until(lambda: sum(running(p) for p in env.pods(app="agent")) == 3)
    # Pods take a second to stop, so the budget refuses (or holds back) some evictions first.
    await env.create(DEPLOYMENTS, deployment("web", 3, exit_seconds=1))
    await env.until(lambda: sum(running_ready(p) for p in env.pods(app="web")) == 3)
    await env.create(PDBS, pdb("web", maxUnavailable=1))
    await env.until(lambda: budget(env, "web").get("disruptionsAllowed") == 1)
    # A pod already on its way out: the imperative eviction reports that it does not evict it.
    await env.create(PODS, bare_pod("leaving", {EXIT_SECONDS: "2"}))
    await env.until(lambda: running_ready(env.get(PODS, "leaving") or {"metadata": {}}))
    leaving = env.get(PODS, "leaving")
    assert leaving is not None
    await env.delete(PODS, "leaving")
    # The DaemonSet interceptor deletes node-1's DaemonSet pod; no maintenance drains node-2's,
    # so it declines and the imperative eviction reports that the Eviction API cannot help.
    await env.create(NODEMAINTENANCES, maintenance("fix-node-1", "node-1"))
    await draining_daemonsets(env, "fix-node-1", "node-1")
    [drained] = on_node(env, "agent", "node-1")
    [declined] = on_node(env, "agent", "node-2")

    await env.start(EvictionSettings(backoff_base=0.05, backoff_cap=0.4), daemonset=True)
    pods = [*env.pods(app="web"), leaving, drained, declined]
    for p in pods:
        await env.request_for(p)
    uids = [p["metadata"]["uid"] for p in pods]
    declined_uid = declined["metadata"]["uid"]
    await env.until(
        lambda: (
            "Not calling the Eviction API"
            in env.entry(declined_uid, IMPERATIVE_INTERCEPTOR).get("message", "")
        )
    )
    await env.delete(PODS, declined["metadata"]["name"])

    def finished() -> bool:
        return all(env.evicted(uid) and env.active(uid) == [] for uid in uids)

    # whichever comes first: every request done, or a refusal (retried, it would hold a request
    # back until the heartbeat is 60 s old)
    done = asyncio.create_task(env.until(finished, timeout=60))
    refused = asyncio.create_task(
        env.calls.until(lambda: env.calls.refused(EVICTIONREQUESTS.plural) > 0, timeout=60)
    )
    await asyncio.wait((done, refused), return_when=asyncio.FIRST_COMPLETED)
    await cancel_and_wait((done, refused))
    assert env.calls.refused(EVICTIONREQUESTS.plural) == 0, env.calls.counts
    assert finished()
    # the completions were written, with the first heartbeat kept
    for uid, interceptor in [
        *((uid, IMPERATIVE_INTERCEPTOR) for uid in uids[:4]),
        (drained["metadata"]["uid"], DAEMONSET_INTERCEPTOR),
        (declined_uid, IMPERATIVE_INTERCEPTOR),
    ]:
        entry = env.entry(uid, interceptor)
        assert entry.get("completionTime") and entry.get("startTime"), (uid, entry)
