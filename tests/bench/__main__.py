"""nodeagent benchmarks: `python -m tests.bench [--quick] [--only FIGURES] [--out DIR]`.

FIGURES: a comma-separated subset of drain,requests,reaction,idle,scale. Prints a table and
writes <out>/bench.json and <out>/bench.md (default out: tests/bench/results).

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
from pathlib import Path
from typing import Any

import psutil

from tests.bench import common

FIGURES = ("drain", "requests", "reaction", "idle", "scale")
GOALS = {
    "drain_vs_critical_path": 1.1,
    "drain_vs_kubectl": 0.5,
    "requests_per_pod": 4.0,
    "reaction_p95_ms": 100.0,
    "idle_rss_mib": 60.0,
    "idle_cpu_percent": 0.5,
}


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


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


def rows(results: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(figure, value, goal, verdict) lines of the table."""
    out: list[tuple[str, str, str, str]] = []
    d = results.get("drain")
    if d:
        na, nd, kc = d["nodeagent"], d["nodeagent_default_plan"], d["kubectl"]
        r = d["ratios"]
        out += [
            (
                "drain 110 pods: critical path (priority-ordered plan)",
                f"{d['critical_path_seconds']:.2f} s",
                "",
                "",
            ),
            (
                "drain 110 pods: flat bound (no ordering, kubectl's limit)",
                f"{d['flat_bound_seconds']:.2f} s",
                "",
                "",
            ),
            ("drain: nodeagent, priority-ordered drainPlan", f"{na['seconds']:.2f} s", "", ""),
            ("drain: nodeagent, default drainPlan", f"{nd['seconds']:.2f} s", "", ""),
            ("drain: kubectl drain", f"{kc['seconds']:.2f} s", "", ""),
            (
                "  nodeagent (ordered) / critical path",
                f"{r['nodeagent_vs_critical_path']:.3f}",
                "<= 1.1",
                verdict(r["nodeagent_vs_critical_path"] <= GOALS["drain_vs_critical_path"]),
            ),
            (
                "  nodeagent (default plan) / flat bound",
                f"{r['nodeagent_default_plan_vs_flat_bound']:.3f}",
                "<= 1.1",
                verdict(
                    r["nodeagent_default_plan_vs_flat_bound"] <= GOALS["drain_vs_critical_path"]
                ),
            ),
            (
                "  nodeagent (ordered) / kubectl",
                f"{r['nodeagent_vs_kubectl']:.3f}",
                "<= 0.5",
                verdict(r["nodeagent_vs_kubectl"] <= GOALS["drain_vs_kubectl"]),
            ),
            (
                "  nodeagent (default plan) / kubectl",
                f"{r['nodeagent_default_plan_vs_kubectl']:.3f}",
                "<= 0.5",
                verdict(r["nodeagent_default_plan_vs_kubectl"] <= GOALS["drain_vs_kubectl"]),
            ),
            ("  kubectl / flat bound", f"{r['kubectl_vs_flat_bound']:.3f}", "", ""),
        ]
    if d and "requests" in results.get("_figures", FIGURES):
        na, nd, kc = d["nodeagent"], d["nodeagent_default_plan"], d["kubectl"]
        out += [
            (
                "API requests / drained pod: nodeagent (ordered), to Drained / with clean-up",
                f"{na['requests_per_pod']:.2f} / {na['requests_per_pod_with_cleanup']:.2f}",
                "<= 4",
                verdict(na["requests_per_pod_with_cleanup"] <= GOALS["requests_per_pod"]),
            ),
            (
                "API requests / drained pod: nodeagent (default plan), to Drained / with clean-up",
                f"{nd['requests_per_pod']:.2f} / {nd['requests_per_pod_with_cleanup']:.2f}",
                "<= 4",
                verdict(nd["requests_per_pod_with_cleanup"] <= GOALS["requests_per_pod"]),
            ),
            ("API requests / drained pod: kubectl", f"{kc['requests_per_pod']:.2f}", "", ""),
        ]
    rx = results.get("reaction")
    if rx and "skipped" not in rx:
        p, q = rx["prepare_to_maintenance_ms"], rx["drained_to_lock_released_ms"]
        out += [
            (
                f"PrepareForShutdown -> NodeMaintenance (n={p['n']}) p50 / p95",
                f"{p['p50']:.1f} / {p['p95']:.1f} ms",
                "p95 <= 100 ms",
                verdict(p["p95"] <= GOALS["reaction_p95_ms"]),
            ),
            (
                f"Drained=True -> lock released (n={q['n']}) p50 / p95",
                f"{q['p50']:.1f} / {q['p95']:.1f} ms",
                "p95 <= 100 ms",
                verdict(q["p95"] <= GOALS["reaction_p95_ms"]),
            ),
        ]
    idle = results.get("idle")
    if idle and "skipped" not in idle:
        out += [
            (
                f"idle RSS over {idle['window_seconds']:.0f} s (mean / max)",
                f"{idle['rss_mib']['mean']:.1f} / {idle['rss_mib']['max']:.1f} MiB",
                "<= 60 MB",
                verdict(idle["rss_mib"]["max"] * 2**20 <= GOALS["idle_rss_mib"] * 1e6),
            ),
            (
                f"idle CPU over {idle['window_seconds']:.0f} s",
                f"{idle['cpu_percent_of_one_core']:.3f} % of a core",
                "<= 0.5 %",
                verdict(idle["cpu_percent_of_one_core"] <= GOALS["idle_cpu_percent"]),
            ),
            ("idle API requests", f"{idle['api_requests_per_minute']:.1f} / min", "", ""),
        ]
    sc = results.get("scale")
    if sc:
        for run in sc["runs"]:
            n = run["nodes"]
            out.append(
                (
                    f"scale {n} nodes x 30 pods, 100-node maintenance: Drained / peak RSS",
                    f"{run['drained_seconds']:.1f} s / {run['agent_peak_rss_mib']:.0f} MiB",
                    "",
                    "",
                )
            )
            out.append(
                (
                    f"  {n} nodes: agent sync; agent / sim CPU during drain; req/pod",
                    f"{run['agent_sync_seconds']:.1f} s; {run['agent_cpu_drain_share']:.0%} / "
                    f"{run['sim_cpu_drain_share']:.0%}; {run['requests_per_pod_with_cleanup']:.1f}",
                    "",
                    "",
                )
            )
        g = sc.get("growth_exponent") or {}
        if g:
            out.append(
                (
                    "  growth exponent vs nodes (1 = linear): peak RSS / sync / Drained",
                    f"{g.get('agent_peak_rss_mib')} / {g.get('agent_sync_seconds')} / "
                    f"{g.get('drained_seconds')}",
                    "<= 1",
                    verdict(
                        all(
                            v is not None and v <= 1.15
                            for v in (
                                g.get("agent_peak_rss_mib"),
                                g.get("agent_sync_seconds"),
                                g.get("drained_seconds"),
                            )
                        )
                    ),
                )
            )
    return out


def table(results: dict[str, Any]) -> str:
    lines = rows(results)
    w0 = max((len(r[0]) for r in lines), default=10)
    w1 = max((len(r[1]) for r in lines), default=10)
    w2 = max((len(r[2]) for r in lines), default=4)
    head = f"| {'figure':<{w0}} | {'value':>{w1}} | {'goal':<{w2}} | verdict |"
    sep = f"|{'-' * (w0 + 2)}|{'-' * (w1 + 1)}:|{'-' * (w2 + 2)}|---------|"
    body = [f"| {a:<{w0}} | {b:>{w1}} | {c:<{w2}} | {d:<7} |" for a, b, c, d in lines]
    return "\n".join([head, sep, *body])


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    figures = [f.strip() for f in args.only.split(",")] if args.only else list(FIGURES)
    unknown = set(figures) - set(FIGURES)
    if unknown:
        raise SystemExit(f"unknown figure(s): {', '.join(sorted(unknown))}; known: {FIGURES}")
    results: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "seed": args.seed,
        "machine": machine(),
        "_figures": figures,
    }
    work = Path(tempfile.mkdtemp(prefix="na-bench-"))
    print(f"working directory (logs of every process): {work}", file=sys.stderr)

    async def step(name: str, coro: Any) -> None:
        t = time.monotonic()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        results[name] = await coro
        results.setdefault("durations_seconds", {})[name] = round(time.monotonic() - t, 1)
        print(f"[bench] {name} done in {time.monotonic() - t:.0f} s", file=sys.stderr)

    from tests.bench import drain, idle, reaction, scale

    if "drain" in figures or "requests" in figures:
        await step("drain", drain.run(args.seed, work / "drain"))
    if "reaction" in figures:
        await step("reaction", reaction.run(5 if args.quick else args.runs, work / "reaction"))
    if "idle" in figures:
        await step(
            "idle",
            idle.run(
                10.0 if args.quick else 60.0, work / "idle", warmup=3.0 if args.quick else 10.0
            ),
        )
    if "scale" in figures:
        sizes = [100, 200] if args.quick else [250, 500, 1000]
        await step("scale", scale.run(sizes, work / "scale", seed=args.seed, profile=args.profile))
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
        "--out",
        type=Path,
        default=Path(__file__).parent / "results",
        help="where bench.json and bench.md go (default: tests/bench/results)",
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
    print(text)
    results.pop("_figures", None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    m = results["machine"]
    header = (
        f"nodeagent benchmarks, {results['started']}{' (--quick)' if args.quick else ''}: "
        f"{m['cpu_model']}, {m['logical_cpus']} logical CPUs, {m['memory_gib']} GiB, "
        f"Python {m['python']}, kubectl {m['kubectl']}\n\n"
    )
    (args.out / "bench.md").write_text(header + text + "\n")
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
