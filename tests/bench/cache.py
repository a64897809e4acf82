"""Memory per cached pod: realistic pods (what a real cluster serves: containers with env,
probes and mounts, volumes, managedFields, kubectl's last-applied annotation, container
statuses), kept whole against kept as the shared informers keep them
(`kube.cache_transforms`), measured side by side with tracemalloc in one run."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

from nodeagent.kube.cache_transforms import lean_pod
from nodeagent.kube.resources import Obj
from nodeagent.kube.store import Store

PODS = 3000


def _container(name: str, i: int) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example.com/team/{name}:1.{i % 40}.{i % 7}",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/server"],
        "args": ["--port=8080", "--metrics-port=9090", f"--shard={i % 16}", "--log-level=info"],
        "env": [{"name": f"SETTING_{k}", "value": f"value-{k}-{i % 13}"} for k in range(10)]
        + [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            }
        ],
        "ports": [
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 5,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app"},
            {"name": "data", "mountPath": "/var/lib/app"},
            {
                "name": "kube-api-access",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _container_status(name: str, i: int) -> dict[str, Any]:
    return {
        "name": name,
        "state": {"running": {"startedAt": "2026-11-24T10:00:00Z"}},
        "lastState": {},
        "ready": True,
        "restartCount": i % 3,
        "image": f"registry.example.com/team/{name}:1.{i % 40}.{i % 7}",
        "imageID": f"registry.example.com/team/{name}@sha256:{i:064x}",
        "containerID": f"containerd://{i:064x}",
        "started": True,
    }


def realistic_pod(i: int) -> Obj:
    """Pod `i` of a Deployment, about 8 KB of JSON, as kube-apiserver serves it."""
    name = f"web-7d9f8c6b5-{i:05d}"
    spec: dict[str, Any] = {
        "containers": [_container("server", i), _container("sidecar", i)],
        "volumes": [
            {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
            {"name": "data", "emptyDir": {}},
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            },
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "web",
        "nodeName": f"node-{i % 500}",
        "securityContext": {"fsGroup": 2000},
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "web"}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priorityClassName": "standard",
        "priority": 1000,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    fields_v1 = {
        "f:metadata": {"f:labels": {"f:app": {}, "f:pod-template-hash": {}}},
        "f:spec": {
            f'k:{{"name":"{c}"}}': {
                "f:env": {
                    f'k:{{"name":"SETTING_{k}"}}': {".": {}, "f:name": {}, "f:value": {}}
                    for k in range(10)
                }
            }
            for c in ("server", "sidecar")
        },
    }
    last_applied = json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": spec["containers"][:1]}}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": "web-7d9f8c6b5-",
            "namespace": "shop",
            "uid": f"{i:08x}-0000-4000-8000-{i:012x}",
            "resourceVersion": str(100000 + i),
            "creationTimestamp": "2026-11-24T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5", "tier": "front"},
            "annotations": {
                "nodeagent.io/eviction-interceptors": "mover.example.com",
                "prometheus.io/scrape": "true",
                "kubectl.kubernetes.io/last-applied-configuration": last_applied,
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d9f8c6b5",
                    "uid": "6f1d2c3b-0000-4000-8000-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-24T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1,
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-24T10:00:05Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:status": {
                            "f:conditions": {},
                            "f:containerStatuses": {},
                            "f:phase": {},
                            "f:podIP": {},
                        }
                    },
                    "subresource": "status",
                },
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": t,
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-24T10:00:05Z",
                }
                for t in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ],
            "hostIP": f"10.0.{i % 250}.{i % 200}",
            "podIP": f"10.244.{i % 250}.{i % 200}",
            "podIPs": [{"ip": f"10.244.{i % 250}.{i % 200}"}],
            "startTime": "2026-11-24T10:00:00Z",
            "containerStatuses": [_container_status("server", i), _container_status("sidecar", i)],
            "qosClass": "Burstable",
        },
    }


def _bytes_per_pod(texts: list[str], lean: bool) -> float:
    """Memory held by a Store of these pods (decoded from JSON as the client does), per pod."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = Store()
    for text in texts:
        pod = json.loads(text)
        store.upsert(lean_pod(pod) if lean else pod)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(store.list()) == len(texts)
    return held / len(texts)


def run(pods: int = PODS) -> dict[str, Any]:
    texts = [json.dumps(realistic_pod(i)) for i in range(pods)]
    whole = _bytes_per_pod(texts, lean=False)
    lean = _bytes_per_pod(texts, lean=True)
    return {
        "pods": pods,
        "json_bytes_per_pod": round(sum(map(len, texts)) / pods),
        "whole_bytes_per_cached_pod": round(whole),
        "lean_bytes_per_cached_pod": round(lean),
        "lean_vs_whole": round(lean / whole, 3),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
