"""nodeagent benchmarks: `python -m tests.bench [--quick] [--only FIGURES] [--out DIR]`.

FIGURES: a comma-separated subset of drain,requests,reaction,idle,scale,cache,decision,gns,
bridge,fleet. Prints a
table and writes <out>/bench.json and <out>/bench.md (default out: tests/bench/results).

Not part of the test run: nothing here is named test_*. See tests/bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from nodeagent_testbed.controlplane.build import Binaries, BuildError, ensure_built, go_command
from tests.bench import common, imports
from tests.bench.backends import BACKENDS

FIGURES = (
    "drain",
    "requests",
    "reaction",
    "idle",
    "scale",
    "cache",
    "decision",
    "gns",
    "bridge",
    "fleet",
)
GOALS = {
    "drain_vs_critical_path": 1.1,
    "drain_vs_kubectl": 0.5,
    "requests_per_pod": 3.0,
    "reaction_p95_ms": 100.0,
    "idle_rss_mib": 50.0,
    "idle_cpu_percent": 0.2,
    "idle_requests_per_second_at_5000": 10.0,
    "cached_pod_bytes": 2000,
}
# nodes of the scale figure (x 30 pods), per backend
SCALE_SIZES = {"sim": [125, 250, 500], "real": [125, 250, 500]}
QUICK_SCALE_SIZES = {"sim": [100, 200], "real": [100, 200]}


def machine() -> dict[str, Any]:
    def run(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    lscpu = run("lscpu")
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")),
        platform.processor(),
    )
    kubectl = run(common.kubectl_path(), "version", "--client", "-o", "json")
    try:
        kubectl_version = json.loads(kubectl)["clientVersion"]["gitVersion"]
    except (ValueError, KeyError):
        kubectl_version = kubectl[:40]
    return {
        "cpu_model": model,
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "kubectl": kubectl_version,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "lscpu": lscpu,
    }


def source_commit() -> str:
    """The commit measured (`git describe --always --dirty`: `-dirty` when the working tree had
    changes), or "" outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


# a row of the table: (figure, {backend: value}, goal, {backend: verdict})
Row = tuple[str, dict[str, str], str, dict[str, str]]


def _per_backend(
    per: dict[str, Any],
    label: str,
    value: Callable[[dict[str, Any]], str],
    goal: str = "",
    ok: Callable[[dict[str, Any]], bool | None] | None = None,
) -> Row:
    """One figure measured on each backend in `per` ({backend: result})."""
    values, verdicts = {}, {}
    for backend, r in per.items():
        if not r or "skipped" in r or "error" in r:
            continue
        values[backend] = value(r)
        verdicts[backend] = verdict(ok(r)) if ok is not None else ""
    return (label, values, goal, verdicts)


def _sim_only(label: str, value: str, goal: str = "", ok: bool | None = None) -> Row:
    return (label, {"sim": value}, goal, {"sim": verdict(ok) if goal else ""})


def rows(results: dict[str, Any]) -> list[Row]:
    """The table's lines: drain, requests and scale side by side per backend; the shutdown
    reaction and the idle footprint (the agent alone, on the simulated cluster)."""
    out: list[Row] = []
    d = results.get("drain")
    if d and "error" not in d:
        per = {b: d[b] for b in BACKENDS if b in d}
        out += [
            (
                "drain 110 pods: critical path (priority-ordered plan)",
                {b: f"{d['critical_path_seconds']:.2f} s" for b in per},
                "",
                {},
            ),
            (
                "drain 110 pods: flat bound (no ordering, kubectl's limit)",
                {b: f"{d['flat_bound_seconds']:.2f} s" for b in per},
                "",
                {},
            ),
            _per_backend(
                per,
                "drain: nodeagent, priority-ordered drainPlan",
                lambda r: f"{r['nodeagent']['seconds']:.2f} s",
            ),
            _per_backend(
                per,
                "drain: nodeagent, default drainPlan",
                lambda r: f"{r['nodeagent_default_plan']['seconds']:.2f} s",
            ),
            _per_backend(per, "drain: kubectl drain", lambda r: f"{r['kubectl']['seconds']:.2f} s"),
            _per_backend(
                {b: r for b, r in per.items() if r and "upstream_vs_crd" in r},
                "  ordered drain, upstream EvictionRequest API / our CRD: time, requests per pod",
                lambda r: (
                    f"{r['upstream_vs_crd']['seconds']:.3f}, "
                    f"{r['upstream_vs_crd']['requests_per_pod']:.3f} "
                    f"({r['nodeagent']['requests_per_pod_with_cleanup']:.2f} vs "
                    f"{r['nodeagent_crd']['requests_per_pod_with_cleanup']:.2f})"
                ),
            ),
            _per_backend(
                per,
                "  nodeagent (ordered) / critical path",
                lambda r: f"{r['ratios']['nodeagent_vs_critical_path']:.3f}",
                "<= 1.1",
                lambda r: (
                    r["ratios"]["nodeagent_vs_critical_path"] <= GOALS["drain_vs_critical_path"]
                ),
            ),
            _per_backend(
                per,
                "  nodeagent (default plan) / flat bound",
                lambda r: f"{r['ratios']['nodeagent_default_plan_vs_flat_bound']:.3f}",
                "<= 1.1",
                lambda r: (
                    r["ratios"]["nodeagent_default_plan_vs_flat_bound"]
                    <= GOALS["drain_vs_critical_path"]
                ),
            ),
            _per_backend(
                per,
                "  nodeagent (ordered) / kubectl",
                lambda r: f"{r['ratios']['nodeagent_vs_kubectl']:.3f}",
                "<= 0.5",
                lambda r: r["ratios"]["nodeagent_vs_kubectl"] <= GOALS["drain_vs_kubectl"],
            ),
            _per_backend(
                per,
                "  nodeagent (default plan) / kubectl",
                lambda r: f"{r['ratios']['nodeagent_default_plan_vs_kubectl']:.3f}",
                "<= 0.5",
                lambda r: (
                    r["ratios"]["nodeagent_default_plan_vs_kubectl"] <= GOALS["drain_vs_kubectl"]
                ),
            ),
            _per_backend(
                per,
                "  kubectl / flat bound",
                lambda r: f"{r['ratios']['kubectl_vs_flat_bound']:.3f}",
            ),
            _per_backend(
                per,
                "  budget chains, medians: evicted -> budget allows again / -> next eviction",
                lambda r: " | ".join(
                    f"{who} {c['evicted_to_allowed_ms_median']} / "
                    f"{c['allowed_to_evicted_ms_median']} ms"
                    for who, key in (
                        ("ordered", "nodeagent"),
                        ("default", "nodeagent_default_plan"),
                        ("kubectl", "kubectl"),
                    )
                    if (c := r[key].get("budget_chain") or {}).get("steps")
                ),
            ),
        ]
        if "requests" in results.get("_figures", FIGURES):
            for key, name in (
                ("nodeagent", "nodeagent (ordered)"),
                ("nodeagent_default_plan", "nodeagent (default plan)"),
            ):

                def requests(r: dict[str, Any], k: str = key) -> str:
                    return (
                        f"{r[k]['requests_per_pod']:.2f} / "
                        f"{r[k]['requests_per_pod_with_cleanup']:.2f}"
                    )

                def within_goal(r: dict[str, Any], k: str = key) -> bool:
                    with_cleanup: float = r[k]["requests_per_pod_with_cleanup"]
                    return with_cleanup <= GOALS["requests_per_pod"]

                def pods_own(r: dict[str, Any], k: str = key) -> str:
                    return f"{r[k].get('pod_requests_per_pod', float('nan')):.2f}"

                def pods_own_within_goal(r: dict[str, Any], k: str = key) -> bool:
                    own: float = r[k].get("pod_requests_per_pod", float("inf"))
                    return own <= GOALS["requests_per_pod"]

                out.append(
                    _per_backend(
                        per,
                        f"API requests / drained pod: {name}, to Drained / with clean-up",
                        requests,
                        "<= 3",
                        within_goal,
                    )
                )
                out.append(
                    _per_backend(
                        per,
                        "  of which the pods' own (EvictionRequests, evictions, pod reads)",
                        pods_own,
                        "<= 3",
                        pods_own_within_goal,
                    )
                )
            out.append(
                _per_backend(
                    per,
                    "API requests / drained pod: kubectl",
                    lambda r: f"{r['kubectl']['requests_per_pod']:.2f}",
                )
            )
            out.append(
                _per_backend(
                    per,
                    "  evictions refused (429): nodeagent ordered / default plan / kubectl",
                    lambda r: (
                        f"{r['nodeagent']['evictions_refused']} / "
                        f"{r['nodeagent_default_plan']['evictions_refused']} / "
                        f"{r['kubectl']['evictions_refused']}"
                    ),
                )
            )
            out.append(
                _per_backend(
                    per,
                    "  duplicate EvictionRequest creates (409): nodeagent ordered / default plan",
                    lambda r: (
                        f"{r['nodeagent']['requests'].get('duplicate_creates', '-')} / "
                        f"{r['nodeagent_default_plan']['requests'].get('duplicate_creates', '-')}"
                    ),
                )
            )
    rx = results.get("reaction")
    if rx and "skipped" not in rx and "error" not in rx:
        p, q = rx["prepare_to_maintenance_ms"], rx["drained_to_lock_released_ms"]
        out += [
            _sim_only(
                f"PrepareForShutdown -> NodeMaintenance (n={p['n']}) p50 / p95",
                f"{p['p50']:.1f} / {p['p95']:.1f} ms",
                "p95 <= 100 ms",
                p["p95"] <= GOALS["reaction_p95_ms"],
            ),
            _sim_only(
                f"Drained=True -> lock released (n={q['n']}) p50 / p95",
                f"{q['p50']:.1f} / {q['p95']:.1f} ms",
                "p95 <= 100 ms",
                q["p95"] <= GOALS["reaction_p95_ms"],
            ),
        ]
    idle = results.get("idle")
    if idle and "error" not in idle:
        out += idle_rows(idle)
    cache = results.get("cache")
    if cache and "error" not in cache:
        out += [
            _sim_only(
                f"bytes per cached pod ({cache['json_bytes_per_pod']} B JSON pods): whole / kept",
                f"{cache['whole_bytes_per_cached_pod']} / {cache['lean_bytes_per_cached_pod']} B",
                "kept <= 2 KB",
                cache["lean_bytes_per_cached_pod"] <= GOALS["cached_pod_bytes"],
            )
        ]
    sc = results.get("scale")
    if sc and "error" not in sc:
        out += scale_rows({b: sc[b] for b in BACKENDS if b in sc})
    dc = results.get("decision")
    if dc and "error" not in dc:
        out += decision_rows(dc)
    g = results.get("gns")
    if g and "error" not in g and "skipped" not in g:
        out += gns_rows(g)
    fl = results.get("fleet")
    if fl and "error" not in fl and "skipped" not in fl:
        out += fleet_rows(fl)
    br = (results.get("bridge") or {}).get("real")
    if br and "error" not in br:
        for suffix, what in (("_dry_run", "dry run"), ("", "evicted")):
            w, wo = br[f"with_webhook{suffix}"], br[f"without_webhook{suffix}"]
            value = (
                f"{br[f'ratio_median{suffix}']:.3f} ({w['median_ms']:.1f} vs "
                f"{wo['median_ms']:.1f} ms, {br[f'added_ms_median{suffix}']:+.1f} ms)"
            )
            out.append(
                (
                    f"eviction ({what}), pod without interceptors: bridge / none (median)",
                    {"real": value},
                    "",
                    {},
                )
            )
    for name in FIGURES:
        r = results.get(name) or {}
        failed = {"figure": r} if "error" in r else {}
        failed.update({b: r[b] for b in BACKENDS if "error" in (r.get(b) or {})})
        for where, f in failed.items():
            at = where if where in BACKENDS else "sim"
            out.append((f"{name}: not measured ({where})", {at: f["error"][:60]}, "", {}))
    return out


def idle_rows(idle: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    fp = idle.get("footprint") or {}
    for role, label in (("node", "node agent"), ("controllers", "controllers agent")):
        r = fp.get(role)
        if not r:
            continue
        out += [
            _sim_only(
                f"idle RSS, {label}, over {r['window_seconds']:.0f} s (mean / max)",
                f"{r['rss_mib']['mean']:.1f} / {r['rss_mib']['max']:.1f} MiB",
                "<= 50 MB",
                r["rss_mib"]["max"] * 2**20 <= GOALS["idle_rss_mib"] * 1e6,
            ),
            _sim_only(
                f"idle CPU, {label}",
                f"{r['cpu_percent_of_one_core']:.3f} % of a core",
                "<= 0.2 %",
                r["cpu_percent_of_one_core"] <= GOALS["idle_cpu_percent"],
            ),
            _sim_only(f"idle API requests, {label}", f"{r['api_requests_per_minute']:.1f} / min"),
        ]
    per = idle.get("requests_at_scale") or {}
    key = "requests_per_second_at_5000_nodes"
    implied = "implied_requests_per_second_at_5000_nodes"
    first = next((r for r in per.values() if r and "error" not in r), None)
    if first is not None:
        out += [
            _per_backend(
                per,
                f"idle node agents: requests/s at 5,000 nodes ({first['agents']} agents, "
                f"{first['window_seconds']:.0f} s)",
                lambda r: f"{r[key]:.2f}",
                "< 10",
                lambda r: bool(r[key] < GOALS["idle_requests_per_second_at_5000"]),
            ),
            _per_backend(
                per,
                "idle node agents: requests/s at 5,000 nodes implied by their watches",
                lambda r: (
                    f"{r[implied]:.2f} ({r['watches_per_agent']} watches"
                    f" x 1/{r['mean_watch_seconds']:.0f} s)"
                ),
                "< 10",
                lambda r: bool(r[implied] < GOALS["idle_requests_per_second_at_5000"]),
            ),
            _per_backend(
                per,
                "idle node agents: requests per agent at start-up",
                lambda r: f"{r['startup_requests_per_agent']:.1f}",
            ),
        ]
    for backend, r in per.items():
        if r and "error" in r:
            out.append(("idle requests: not measured", {backend: r["error"][:60]}, "", {}))
    return out


def scale_rows(per: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for backend, sc in per.items():
        for run in sc.get("runs", []):
            by_size.setdefault(run["nodes"], {})[backend] = run
    for n, runs in sorted(by_size.items()):
        m = max(r["maintained_nodes"] for r in runs.values())
        out.append(
            _per_backend(
                runs,
                f"scale {n} nodes x 30 pods, {m}-node maintenance: Drained / agent peak RSS",
                lambda r: f"{r['drained_seconds']:.1f} s / {r['agent_peak_rss_mib']:.0f} MiB",
            )
        )
        out.append(
            _per_backend(
                runs,
                f"  {m}-node maintenance: Drained / its bound (slowest exit)",
                lambda r: f"{r.get('drained_vs_bound') or float('nan'):.1f}x",
                "<= 3",
                lambda r: (r.get("drained_vs_bound") or float("inf")) <= 3,
            )
        )
        out.append(
            _per_backend(
                runs,
                f"  {m}-node maintenance: servers' CPU per pod; the least time it allows",
                lambda r: (
                    f"{r['server_cpu_ms_per_pod']:.1f} ms; {r['server_floor_seconds']:.1f} s "
                    f"on {r['server_cores']} core(s) = "
                    f"{r['server_floor_seconds'] / r['slowest_exit_seconds']:.1f}x bound"
                ),
            )
        )
        out.append(
            _per_backend(
                runs,
                f"  {n} nodes: agent sync; CPU in drain agent / API server; req/pod",
                lambda r: (
                    f"{r['agent_sync_seconds']:.1f} s; {r['agent_cpu_drain_share']:.0%} / "
                    f"{r['server_cpu_drain_share']:.0%}; {r['requests_per_pod_with_cleanup']:.1f}"
                ),
            )
        )
        out.append(
            _per_backend(
                runs,
                f"  {n} nodes: set-up; API server CPU at rest (no agent)",
                lambda r: f"{r['setup_seconds']:.0f} s; {r['server_cpu_share_at_rest']:.0%}",
            )
        )
    for backend, sc in per.items():
        f = sc.get("failed")
        if f:
            out.append(
                (
                    f"scale {f['nodes']} nodes on {backend}: not done",
                    {backend: f"{f['error'][:60]} ({f['progress'].get('stage')})"},
                    "",
                    {},
                )
            )
    keys = ("agent_peak_rss_mib", "agent_sync_seconds", "drained_seconds")
    out.append(
        _per_backend(
            {b: sc for b, sc in per.items() if sc.get("growth_exponent")},
            "  growth exponent vs nodes (1 = linear): peak RSS / sync / Drained",
            lambda sc: " / ".join(str(sc["growth_exponent"].get(k)) for k in keys),
            "<= 1",
            lambda sc: all(
                (v := sc["growth_exponent"].get(k)) is not None and v <= 1.15 for k in keys
            ),
        )
    )
    return out


def decision_rows(dc: dict[str, Any]) -> list[Row]:
    out = [
        _sim_only(
            f"NodeMaintenance decision, {s['nodes']} nodes x 30 pods, all requested: "
            "afresh / incremental",
            f"{s['afresh_ms']:.1f} / {s['incremental_ms']:.1f} ms "
            f"({s['afresh_vs_incremental']:.1f}x)",
        )
        for s in dc["sizes"]
    ]
    k = dc["growth_exponent"]
    if k["afresh_ms"] is not None:
        out.append(
            _sim_only(
                "  decision's growth exponent vs nodes: afresh / incremental",
                f"{k['afresh_ms']} / {k['incremental_ms']}",
            )
        )
    return out


def fleet_rows(fl: dict[str, Any]) -> list[Row]:
    """The fleet figure (three real nodes, so the real column): one line per set-up."""
    out: list[Row] = []
    for name, r in fl["setups"].items():
        if "error" in r:
            out.append((f"fleet: {name} not measured", {"real": r["error"][:60]}, "", {}))
            continue
        value = (
            f"{r['seconds']:.0f} s, quorum lost {r['quorum_lost_s']:.1f} s, "
            f"{r['acknowledged_writes_lost']} writes lost, {r['undrained_reboots']} undrained, "
            f"{r['budget_violations']} over budget"
        )
        ok = None
        if name == "nodeagent":
            ok = r["quorum_lost_s"] == 0 and r["acknowledged_writes_lost"] == 0
            ok = ok and r["undrained_reboots"] == 0
        goal = "0 / 0 / 0" if name == "nodeagent" else ""
        out.append((f"fleet of 3 real nodes: {name}", {"real": value}, goal,
                    {"real": verdict(ok)} if ok is not None else {}))  # fmt: skip
    ratio = (fl.get("ratios") or {}).get("nodeagent_vs_kured_style_seconds")
    if ratio is not None:
        out.append(("  fleet time: nodeagent / kured's way", {"real": f"{ratio:.2f}x"}, "<= 1.2x",
                    {"real": verdict(ratio <= 1.2)}))  # fmt: skip
    return out


def gns_rows(g: dict[str, Any]) -> list[Row]:
    """The GNS figure (a real node, so the real column): nodeagent with the kubelet's GNS off,
    then the kubelet's GNS alone, each as `nodeagent vs kubelet GNS`."""
    a, k = g["nodeagent"], g["kubelet_gns"]
    out: list[Row] = []
    for setup, r in (("nodeagent", a), ("kubelet GNS", k)):
        if "error" in r:
            out.append((f"gns: {setup} not measured", {"real": r["error"][:60]}, "", {}))
    if "error" in a or "error" in k:
        return out

    def both(label: str, value: Callable[[dict[str, Any]], str]) -> Row:
        return (f"  {label}", {"real": f"{value(a)} vs {value(k)}"}, "", {})

    gs, gc = k["kubelet_gns_seconds"]
    out += [
        (
            f"reboot of a real node, {a['pods_on_node']} pods: nodeagent (GNS off) vs "
            f"kubelet GNS {gs}/{gc} s alone",
            {"real": f"{a['reboot_seconds']:.1f} s vs {k['reboot_seconds']:.1f} s"},
            "",
            {},
        ),
        (
            "  systemctl reboot -> reboot: nodeagent / kubelet GNS",
            {"real": f"{g['ratios']['reboot_nodeagent_vs_kubelet_gns']:.2f}x"},
            "",
            {},
        ),
        both(
            "pods evicted / terminated by the kubelet / otherwise / not before the reboot",
            lambda r: "/".join(
                str(r["left"][x]) for x in ("evicted", "terminated_by_kubelet", "other", "not_left")
            ),
        ),
        both(
            "budgets exceeded, as the API shows (most unavailable at once > allowed)",
            lambda r: f"{r['budgets_violated']} of {len(r['budgets'])}",
        ),
        both(
            "budgets exceeded, a pod down from its SIGTERM (the kubelet's log)",
            lambda r: f"{r['budgets_violated_from_sigterm']} of {len(r['budgets'])}",
        ),
        both(
            "most pods of a budget down at once from their SIGTERM, per budget",
            lambda r: ",".join(str(b["max_down_from_sigterm"]) for b in r["budgets"].values()),
        ),
        both(
            "SIGTERMs logged before the watch showed their pod's deletion (most by, s)",
            lambda r: (
                f"{r.get('sigterms_before_their_deletion_was_seen')} "
                f"({r.get('watch_lag_behind_sigterm_max_seconds')})"
            ),
        ),
        both(
            "Deployment pods replaced elsewhere (Running) before the reboot",
            lambda r: f"{r['replaced_elsewhere_before_reboot']}/{r['deployment_pods']}",
        ),
    ]
    return out


def table(results: dict[str, Any]) -> str:
    lines = rows(results)
    backends = [b for b in BACKENDS if any(b in r[1] for r in lines)]
    head = ["figure", "goal"]
    for b in backends:
        head += [b, "verdict"]
    body = []
    for figure, values, goal, verdicts in lines:
        cells = [figure, goal]
        for b in backends:
            cells += [values.get(b, "-" if values else ""), verdicts.get(b, "")]
        body.append(cells)
    widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
    right = {i for i in range(2, len(head), 2)}  # the values

    def fmt(cells: list[str]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(out) + " |"

    sep = (
        "|"
        + "|".join(
            "-" * (w + 1) + ":" if i in right else "-" * (w + 2) for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([fmt(head), sep, *(fmt(c) for c in body)])


def choose_backends(choice: str | None) -> tuple[tuple[str, ...], str | None]:
    """The backends to run, and why `real` is left out if it is. The default is both where the
    control plane can be built (a Go toolchain), else sim; asking for real makes a missing
    toolchain an error."""
    if choice is not None:
        return (BACKENDS if choice == "both" else (choice,)), None
    try:
        go_command()
    except BuildError as e:
        return ("sim",), str(e)
    return BACKENDS, None


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    figures = [f.strip() for f in args.only.split(",")] if args.only else list(FIGURES)
    unknown = set(figures) - set(FIGURES)
    if unknown:
        raise SystemExit(f"unknown figure(s): {', '.join(sorted(unknown))}; known: {FIGURES}")
    backends, why_not_real = choose_backends(args.backend)
    results: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": source_commit(),
        "quick": args.quick,
        "seed": args.seed,
        "backends": list(backends),
        "machine": machine(),
        "_figures": figures,
    }
    if why_not_real:
        results["real_skipped"] = why_not_real
        print(f"[bench] real control plane left out: {why_not_real}", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="na-bench-"))
    print(f"working directory (logs of every process): {work}", file=sys.stderr)

    async def step(name: str, coro: Any) -> None:
        t = time.monotonic()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        try:
            results[name] = await coro
        except Exception as e:  # reported: the other figures stand
            results[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
            print(f"[bench] {name} failed: {results[name]['error']}", file=sys.stderr)
        results.setdefault("durations_seconds", {})[name] = round(time.monotonic() - t, 1)
        print(f"[bench] {name} done in {time.monotonic() - t:.0f} s", file=sys.stderr)

    from tests.bench import bridge, cache, decision, drain, fleet, gns, idle, reaction, scale

    binaries: Binaries | None = None
    on_real = "real" in backends and bool(
        {"drain", "requests", "scale", "idle", "gns", "bridge", "fleet"} & set(figures)
    )
    if on_real:
        t = time.monotonic()
        print("[bench] real control plane binaries (built on first use) ...", file=sys.stderr)
        binaries = await asyncio.to_thread(ensure_built)
        results["controlplane"] = {
            "kubernetes_version": binaries.kubernetes_version,
            "binaries": str(binaries.dir),
            "ensure_built_seconds": round(time.monotonic() - t, 1),
        }
    if "drain" in figures or "requests" in figures:
        await step("drain", drain.run(args.seed, work / "drain", backends, binaries))
    if "reaction" in figures:
        await step("reaction", reaction.run(5 if args.quick else args.runs, work / "reaction"))
    if "idle" in figures:
        await step(
            "idle",
            idle.run(
                10.0 if args.quick else 60.0,
                work / "idle",
                warmup=3.0 if args.quick else 10.0,
                backends=backends,
                binaries=binaries,
                agents=args.idle_agents,
            ),
        )
    if "scale" in figures:
        sizes = {
            b: args.scale_sizes or (QUICK_SCALE_SIZES if args.quick else SCALE_SIZES)[b]
            for b in backends
        }
        await step(
            "scale",
            scale.run(
                sizes,
                work / "scale",
                maintained=args.scale_maintained,
                seed=args.seed,
                profile=args.profile,
                binaries=binaries,
            ),
        )
    if "cache" in figures:
        await step("cache", asyncio.to_thread(cache.run))
    if "decision" in figures:
        await step("decision", asyncio.to_thread(decision.run))
    if "bridge" in figures:
        await step("bridge", bridge.run(work / "bridge", binaries))
    if "gns" in figures:
        if "real" not in backends or binaries is None:
            results["gns"] = {"skipped": "a real node joins a real control plane (--backend real)"}
        else:
            await step("gns", gns.run(args.seed, work / "gns", binaries))
    if "fleet" in figures:
        if "real" not in backends or binaries is None:
            results["fleet"] = {"skipped": "real nodes join a real control plane (--backend real)"}
        else:
            await step("fleet", fleet.run(work / "fleet", binaries))
    results["workdir"] = str(work)
    return results


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    p.add_argument(
        "--quick",
        action="store_true",
        help="shorter: 5 reaction runs, 10 s idle window, scale at 100/200 nodes",
    )
    p.add_argument("--only", help=f"comma-separated subset of {','.join(FIGURES)}")
    p.add_argument(
        "--backend",
        choices=["sim", "real", "both"],
        help="where drain, requests and scale run: the simulated cluster, a real control plane "
        "(built from upstream on first use), or both side by side (default: both where a Go "
        "toolchain can build the control plane, else sim)",
    )
    p.add_argument(
        "--scale-sizes",
        type=lambda v: [int(x) for x in v.split(",") if x],
        help="comma-separated node counts of the scale figure, on every backend (default "
        "125,250,500; --quick 100,200)",
    )
    p.add_argument(
        "--scale-maintained",
        type=int,
        help="nodes in the scale figure's maintenance (default: all the cluster's nodes, so the "
        "maintenance grows with the cluster)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).parent / "results",
        help="where bench.json and bench.md go (default: tests/bench/results)",
    )
    p.add_argument(
        "--idle-agents",
        type=int,
        default=20,
        help="idle node agents whose API requests are counted, per backend (default 20)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the workloads' exit times")
    p.add_argument("--runs", type=int, default=20, help="shutdown reaction repetitions")
    p.add_argument(
        "--profile",
        action="store_true",
        help="record the agent with py-spy during the scale drains (if installed)",
    )
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    results = asyncio.run(main_async(args))
    text = table(results)
    imported = (results.get("idle") or {}).get("imports")
    if imported:
        text += "\n\nWhat `nodeagent run` imports costs (idle figure):\n\n" + imports.table(
            imported
        )
    print(text)
    results.pop("_figures", None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    m = results["machine"]
    header = (
        f"nodeagent benchmarks, {results['started']}{' (--quick)' if args.quick else ''}"
        f"{f' at {c}' if (c := results.get('commit')) else ''}: "
        f"{m['cpu_model']}, {m['logical_cpus']} logical CPUs, {m['memory_gib']} GiB, "
        f"Python {m['python']}, kubectl {m['kubectl']}; backends: {', '.join(results['backends'])}"
        + (
            f" (real: kube-apiserver {results['controlplane']['kubernetes_version']} + etcd + kwok)"
            if "controlplane" in results
            else ""
        )
        + "\n\n"
    )
    (args.out / "bench.md").write_text(header + text + "\n")
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
