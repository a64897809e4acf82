"""Which node a shutdown maintenance is for: only one labelled as a node's shutdown maintenance
and selecting that node alone counts (the controllers act on that node for it)."""

from __future__ import annotations

import copy

from nodeagent.model.names import NODE_LABEL as LABEL_NODE
from nodeagent.model.shutdown import node_selector, shutdown_maintenance, shutdown_node

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def test_the_agents_own_maintenance_names_its_node() -> None:
    assert shutdown_node(shutdown_maintenance("node-1", BOOT, "reboot")) == "node-1"


def test_anything_else_names_none() -> None:
    nm = shutdown_maintenance("node-1", BOOT, "reboot")
    other_label = copy.deepcopy(nm)
    other_label["metadata"]["labels"][LABEL_NODE] = "node-2"
    wider = copy.deepcopy(nm)
    wider["spec"]["nodeSelector"]["nodeSelectorTerms"].append(
        node_selector("node-2")["nodeSelectorTerms"][0]
    )
    unlabelled = copy.deepcopy(nm)
    del unlabelled["metadata"]["labels"]
    for bad in (other_label, wider, unlabelled, {"metadata": {"name": "x"}}):
        assert shutdown_node(bad) is None
