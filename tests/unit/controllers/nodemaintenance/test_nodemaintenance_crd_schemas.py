"""The CRDs shipped as package data: structure, schema behaviour, CEL rules, the CLI."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.cli import main
from nodeagent.manifests import crd_documents, crd_stream
from nodeagent_testbed.sim.resources import types_from_crd
from nodeagent_testbed.sim.schema import admit_custom, validate_crd_schema

ROOT = Path(__file__).resolve().parents[4]


def crd(plural: str) -> dict[str, Any]:
    (found,) = [d for d in crd_documents() if d["spec"]["names"]["plural"] == plural]
    return found


def schema(plural: str) -> dict[str, Any]:
    version = crd(plural)["spec"]["versions"][0]
    return dict(version["schema"]["openAPIV3Schema"])


def rules(node: Any) -> list[dict[str, Any]]:
    """Every x-kubernetes-validations rule in a schema, depth first."""
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        out.extend(node.get("x-kubernetes-validations") or [])
        for value in node.values():
            out.extend(rules(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(rules(value))
    return out


@pytest.mark.parametrize("plural", ["nodemaintenances", "evictionrequests"])
def test_structural_schema_with_status_subresource(plural: str) -> None:
    doc = crd(plural)
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["spec"]["group"] == "nodeagent.io"
    (version,) = doc["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    assert validate_crd_schema(version["schema"]["openAPIV3Schema"]) == []
    (rt,) = types_from_crd(doc)
    assert rt.subresources == ("status",)


def test_names_scopes_and_printer_columns() -> None:
    nm, er = crd("nodemaintenances"), crd("evictionrequests")
    assert nm["spec"]["scope"] == "Cluster" and nm["spec"]["names"]["shortNames"] == ["nm"]
    assert er["spec"]["scope"] == "Namespaced" and er["spec"]["names"]["shortNames"] == ["evr"]
    columns = {
        p: [c["name"] for c in crd(p)["spec"]["versions"][0]["additionalPrinterColumns"]]
        for p in ("nodemaintenances", "evictionrequests")
    }
    assert columns == {
        "nodemaintenances": [
            "Stage",
            "Nodes",
            "Pods Left",
            "Entry",
            "Blocked By",
            "Drained",
            "Reason",
            "Age",
        ],
        "evictionrequests": ["Pod", "Active", "Evicted", "Canceled", "Age"],
    }


def nm_obj(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": "m"},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
                ]
            },
            **spec,
        },
    }


def test_nodemaintenance_schema_defaults_and_rejects() -> None:
    s = schema("nodemaintenances")
    obj = nm_obj(drainPlan=[{"podPriority": 5}], unknown=1)
    assert admit_custom(s, obj) == []
    assert obj["spec"]["stage"] == "Idle"
    assert obj["spec"]["drainPlan"] == [{"podPriority": 5, "podType": "Default"}]
    assert "unknown" not in obj["spec"]  # pruned
    bad = nm_obj(stage="Later")
    assert [c[0] for c in admit_custom(s, bad)] == ["spec.stage"]
    bad = nm_obj(drainPlan=[{"podType": "Static"}])
    assert [c[0] for c in admit_custom(s, bad)] == ["spec.drainPlan[0].podPriority"]
    missing = nm_obj()
    del missing["spec"]["nodeSelector"]
    assert [c[0] for c in admit_custom(s, missing)] == ["spec.nodeSelector"]
    status = nm_obj()
    status["status"] = {
        "drainPlanIndex": 3,
        "drainPlanHash": "abc",
        "observedGeneration": 2,
        "summary": {
            "nodes": "0/1 drained",
            "podsLeft": 3,
            "entry": "Default<=1 (4 of 12)",
            "blockedBy": "pod default/web: eviction refused by PodDisruptionBudget web",
        },
        "stageStatuses": [{"name": "Drain", "startTimestamp": "2024-05-01T10:00:00Z"}],
        "nodeStatuses": [
            {
                "nodeRef": {"name": "a"},
                "drainTargets": [{"podPriority": 1, "podType": "Default"}],
                "drainMessage": "Evacuating",
                "podsPendingEvacuation": 1,
                "podsEvacuating": 2,
            }
        ],
        "conditions": [
            {
                "type": "Drained",
                "status": "False",
                "reason": "Draining",
                "message": "",
                "lastTransitionTime": "2024-05-01T10:00:00Z",
            }
        ],
    }
    kept = copy.deepcopy(status)
    assert admit_custom(s, status) == []
    assert status["status"] == kept["status"]
    negative = copy.deepcopy(status)
    negative["status"]["summary"]["podsLeft"] = -1
    assert [c[0] for c in admit_custom(s, negative)] == ["status.summary.podsLeft"]


def test_evictionrequest_schema() -> None:
    s = schema("evictionrequests")
    obj: dict[str, Any] = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {"name": "u1", "namespace": "default"},
        "spec": {
            "target": {"pod": {"name": "p", "uid": "u1"}},
            "requesters": [{"name": "nodemaintenance.k8s.io"}],
        },
        "status": {
            "targetInterceptors": [{"name": "imperative-eviction.k8s.io"}],
            "activeInterceptors": ["imperative-eviction.k8s.io"],
            "processedInterceptors": [],
            "interceptors": [
                {
                    "name": "imperative-eviction.k8s.io",
                    "startTime": "2024-05-01T10:00:00Z",
                    "heartbeatTime": "2024-05-01T10:00:00Z",
                    "message": "evicting",
                }
            ],
        },
    }
    assert admit_custom(s, obj) == []
    two_active = copy.deepcopy(obj)
    two_active["status"]["activeInterceptors"] = ["a.io", "b.io"]
    assert [c[0] for c in admit_custom(s, two_active)] == ["status.activeInterceptors"]
    dup = copy.deepcopy(obj)
    dup["spec"]["requesters"] = [{"name": "a.io"}, {"name": "a.io"}]
    assert [c[0] for c in admit_custom(s, dup)] == ["spec.requesters[1]"]
    no_uid = copy.deepcopy(obj)
    del no_uid["spec"]["target"]["pod"]["uid"]
    assert [c[0] for c in admit_custom(s, no_uid)] == ["spec.target.pod.uid"]


def test_cel_rules_are_where_the_design_says() -> None:
    nm = [r["rule"] for r in rules(schema("nodemaintenances"))]
    assert any("oldSelf == 'Idle'" in r for r in nm)  # stage transitions
    assert any("self.drainPlan == oldSelf.drainPlan" in r for r in nm)
    er = [r["rule"] for r in rules(schema("evictionrequests"))]
    assert "self.metadata.name == self.spec.target.pod.uid" in er
    assert "self == oldSelf" in er  # spec.target
    assert any("targetInterceptors == oldSelf.targetInterceptors" in r for r in er)


def evaluate(rule: str, **activation: Any) -> bool:
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    program = env.program(env.compile(rule))
    return bool(program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()}))


def test_cel_stage_transitions_only_go_forward() -> None:
    stage = schema("nodemaintenances")["properties"]["spec"]["properties"]["stage"]
    (rule,) = [r["rule"] for r in stage["x-kubernetes-validations"]]
    stages = ["Idle", "Cordon", "Drain", "Complete"]
    allowed = {
        old: [new for new in stages if evaluate(rule, self=new, oldSelf=old)] for old in stages
    }
    assert allowed == {
        "Idle": ["Idle", "Cordon", "Drain", "Complete"],
        "Cordon": ["Cordon", "Drain", "Complete"],
        "Drain": ["Drain", "Complete"],
        "Complete": ["Complete"],
    }


def test_cel_drain_plan_is_immutable_and_the_name_is_the_pod_uid() -> None:
    spec = schema("nodemaintenances")["properties"]["spec"]
    (rule,) = [r["rule"] for r in spec["x-kubernetes-validations"]]
    plan = [{"podPriority": 1, "podType": "Default"}]
    assert evaluate(rule, self={"stage": "Drain"}, oldSelf={"stage": "Idle"})
    assert evaluate(rule, self={"drainPlan": plan}, oldSelf={"drainPlan": plan})
    assert not evaluate(rule, self={"drainPlan": plan}, oldSelf={})
    assert not evaluate(rule, self={}, oldSelf={"drainPlan": plan})
    other = [{"podPriority": 2, "podType": "Default"}]
    assert not evaluate(rule, self={"drainPlan": other}, oldSelf={"drainPlan": plan})
    root = schema("evictionrequests")
    (rule,) = [r["rule"] for r in root["x-kubernetes-validations"]]
    target = {"target": {"pod": {"name": "p", "uid": "u1"}}}
    assert evaluate(rule, self={"metadata": {"name": "u1"}, "spec": target})
    assert not evaluate(rule, self={"metadata": {"name": "p"}, "spec": target})


def test_the_stream_and_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    docs = list(yaml.safe_load_all(crd_stream()))
    assert [d["metadata"]["name"] for d in docs] == [
        "nodemaintenances.nodeagent.io",
        "evictionrequests.nodeagent.io",
    ]
    assert main(["manifests", "crds"]) == 0
    assert capsys.readouterr().out == crd_stream()
    with pytest.raises(SystemExit):
        main(["manifests"])
