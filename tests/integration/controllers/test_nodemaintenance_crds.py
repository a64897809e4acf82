"""`nodeagent manifests crds | kubectl apply -f -` against the simulated cluster."""

from __future__ import annotations

import asyncio
import sys

from nodeagent.manifests import crd_stream
from nodeagent.sim.cluster import SimCluster
from tests.conftest import Kubectl


async def test_kubectl_applies_the_crds_and_serves_the_kinds(
    sim: SimCluster, kubectl: Kubectl
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nodeagent",
        "manifests",
        "crds",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0 and out.decode() == crd_stream()
    applied = await kubectl.ok("apply", "-f", "-", stdin=out.decode())
    assert "nodemaintenances.nodeagent.io created" in applied
    assert "evictionrequests.nodeagent.io created" in applied
    resources = await kubectl.ok("api-resources", "--api-group=nodeagent.io")
    rows = {line.split()[0]: line.split() for line in resources.splitlines()[1:]}
    assert rows["nodemaintenances"][1] == "nm"
    assert rows["evictionrequests"][1] == "evr"
    await kubectl.ok(
        "apply",
        "-f",
        "-",
        stdin="""
apiVersion: nodeagent.io/v1alpha1
kind: NodeMaintenance
metadata: {name: planned}
spec:
  nodeSelector:
    nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  reason: kernel
""",
    )
    out = await kubectl.ok("get", "nm")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "STAGE", "DRAINED", "REASON", "AGE"]
    assert row.split()[:3] == ["planned", "Idle", "kernel"]
    bad = await kubectl.run(
        "patch", "nm", "planned", "--type=merge", "-p", '{"spec":{"stage":"Later"}}'
    )
    assert bad.code != 0 and "Unsupported value" in bad.err
