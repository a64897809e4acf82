"""The monitoring kit in packaging/monitoring: the generated files are current; the alert rules
and the dashboard are valid and their PromQL names only metrics nodeagent registers (read from
a fresh registry holding OperatorMetrics, EvictionRequestMetrics and WorkQueueMetricsFactory,
with each labelled family given one series so that its labels are known), plus Prometheus's own
`up`; label matchers and groupings use those metrics' labels or the target labels the
PodMonitor gives; the PodMonitor selects both workloads' pods on a port they have.

The PromQL is checked by a small lexical reading (strings, matchers, ranges and grouping
clauses taken out, then every identifier not followed by `(` is a metric name), not by
Prometheus's parser: a syntax error that keeps the names readable is not caught here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from nodeagent.observability.metrics import (
    EvictionRequestMetrics,
    OperatorMetrics,
    WorkQueueMetricsFactory,
)
from tests.integration.packaging.test_kubernetes_manifests import manifests

ROOT = Path(__file__).resolve().parents[3]
MONITORING = ROOT / "packaging" / "monitoring"
# labels Prometheus puts on every series of a target: its own, the PodMonitor's (job from the
# pod's app.kubernetes.io/name, node from a relabeling) and the operator's defaults
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "endpoint", "node"}
PROMETHEUS_OWN = {"up": set[str]()}
KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_IDENTIFIER = re.compile(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()")


def registered() -> dict[str, set[str]]:
    """Every sample name nodeagent can expose, with its labels."""
    registry = CollectorRegistry()
    operator = OperatorMetrics(registry, "0.0.0")
    operator.maintenances = list
    operator.evictions.labels("refused").inc()
    requests = EvictionRequestMetrics(registry, by_result=operator.evictions)
    requests.observe(
        "ns", "er", "pod", active=["a"], processed=["p"], requesters=["r"], interceptors=["a"]
    )
    requests.eviction_attempt("ns", "er", "pod", "evicted")
    WorkQueueMetricsFactory(registry).for_queue("q")
    out: dict[str, set[str]] = {}
    for family in registry.collect():
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


def check_expr(expr: str, known: dict[str, set[str]]) -> set[str]:
    """The metric names `expr` uses; fails on an unknown name or label."""
    text = _STRING.sub('""', expr)
    names: set[str] = set()
    matcher_labels: list[tuple[str | None, list[str]]] = []
    for m in _SELECTOR.finditer(text):
        labels = re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2))
        matcher_labels.append((m.group(1), labels))
    text = _SELECTOR.sub(lambda m: m.group(1) or "", text)
    text = _RANGE.sub("", text)
    grouping = [g.strip() for m in _GROUPING.finditer(text) for g in m.group(1).split(",")]
    text = _GROUPING.sub("", text)
    names = {n for n in _IDENTIFIER.findall(text) if n.lower() not in KEYWORDS}
    unknown = names - known.keys()
    assert not unknown, f"{expr!r}: metrics nodeagent does not register: {sorted(unknown)}"
    assert names, f"{expr!r} names no metric"
    for name, labels in matcher_labels:
        allowed = (known[name] if name else set().union(*(known[n] for n in names))) | TARGET_LABELS
        assert set(labels) <= allowed, f"{expr!r}: labels {sorted(set(labels) - allowed)}"
    allowed = set().union(*(known[n] for n in names)) | TARGET_LABELS
    assert {g for g in grouping if g} <= allowed, f"{expr!r}: grouping by an unknown label"
    return names


def known_metrics() -> dict[str, set[str]]:
    return {**registered(), **PROMETHEUS_OWN}


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((MONITORING / "nodeagent.rules.yaml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_generated_files_are_current() -> None:
    done = subprocess.run(
        [str(MONITORING / "generate"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    wrapped = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert wrapped["spec"] == yaml.safe_load((MONITORING / "nodeagent.rules.yaml").read_text())


def test_the_reader_sees_what_it_should() -> None:
    known = {"a_total": {"result"}, "b": set[str](), "up": set[str]()}
    expr = 'sum by (result) (rate(a_total{result="x"}[5m])) > 0 and on() b or up == 0'
    assert check_expr(expr, known) == {"a_total", "b", "up"}
    for bad in ("c > 0", 'a_total{stage="x"}', "max by (stage) (b)", "vector(1) > 0"):
        try:
            check_expr(bad, known)
        except AssertionError:
            continue
        raise AssertionError(f"{bad!r} passed")


def test_alert_rules_use_registered_metrics() -> None:
    known = known_metrics()
    used: set[str] = set()
    alerts = rules()
    assert len({r["alert"] for r in alerts}) == len(alerts)
    for rule in alerts:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert re.fullmatch(r"\d+[smh]", rule["for"])
        used |= check_expr(rule["expr"], known)
    # what the operators asked for: leader, the lock, drains, refused evictions
    for name in (
        "nodeagent_leader",
        "nodeagent_shutdown_lock_held",
        "nodeagent_maintenances",
        "nodeagent_drain_duration_seconds_bucket",
        "nodeagent_evictions_total",
    ):
        assert name in used, name


def test_dashboard_uses_registered_metrics() -> None:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    known = known_metrics()
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert exprs
    for expr in exprs:
        check_expr(expr.replace("$__rate_interval", "5m"), known)


def test_podmonitor_selects_both_workloads_on_their_metrics_port() -> None:
    monitor = yaml.safe_load((MONITORING / "podmonitor.yaml").read_text())
    (expression,) = monitor["spec"]["selector"]["matchExpressions"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    workloads = [d for d in manifests() if d["kind"] in ("DaemonSet", "Deployment")]
    assert {d["metadata"]["name"] for d in workloads} == {"nodeagent", "nodeagent-controllers"}
    for workload in workloads:
        template = workload["spec"]["template"]
        assert template["metadata"]["labels"][expression["key"]] in expression["values"]
        assert monitor["spec"]["jobLabel"] in template["metadata"]["labels"]
        (container,) = template["spec"]["containers"]
        assert endpoint["port"] in {p["name"] for p in container["ports"]}
    # the alerts on the node agents (lock, down) select them by their job: the DaemonSet's
    jobs = {
        d["kind"]: d["spec"]["template"]["metadata"]["labels"][monitor["spec"]["jobLabel"]]
        for d in workloads
    }
    assert jobs == {"DaemonSet": "nodeagent", "Deployment": "nodeagent-controllers"}
    node_agent_rules = [r for r in rules() if "lock_held" in r["expr"] or "up{" in r["expr"]]
    assert node_agent_rules
    assert all('job="nodeagent"' in r["expr"] for r in node_agent_rules)
