"""What each import of `nodeagent run` costs: resident memory, time and modules, step by step.

Each step imports one more thing in the same fresh interpreter, in the order the agent needs
them, so a step's cost is what it adds to what came before (a library shared with an earlier
step counts there). The last step, `nodeagent.app`, is the agent's own code plus whatever it
imports that no step named. Two more fresh interpreters give the whole official client as
`import kubernetes.client, kubernetes.config` loads it, against the modules the agent
imports of it, for comparison; one more, what the webhook sender adds (aiohttp), which the
agent imports only where `notifications.webhooks` are configured.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from typing import Any

# (label, statement run at that step)
STEPS: list[tuple[str, str]] = [
    ("asyncio, logging, json, ssl (stdlib)", "import asyncio, logging, json, ssl"),
    ("PyYAML", "import yaml"),
    ("urllib3", "import urllib3"),
    (
        "kubernetes: transport only (nodeagent.kube.official_client)",
        "from nodeagent.kube import official_client; official_client.install()",
    ),
    (
        "kubernetes.config.incluster_config (agent in a pod)",
        "import kubernetes.config.incluster_config",
    ),
    (
        "kubernetes.config.kube_config (a kubeconfig file: requests, oauthlib)",
        "import kubernetes.config.kube_config",
    ),
    ("prometheus_client", "import prometheus_client"),
    ("dbus_next (shutdown guard)", "import dbus_next.aio"),
    ("watchfiles (static pods)", "import watchfiles"),
    ("psutil", "import psutil"),
    ("nodeagent.app (the agent's code, and the rest)", "import nodeagent.app"),
]

_PROBE = """
import json, os, sys, time
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
out = [{"step": "interpreter", "rss": rss(), "seconds": 0.0, "modules": len(sys.modules)}]
for label, stmt in json.loads(sys.argv[1]):
    r, t, m = rss(), time.perf_counter(), len(sys.modules)
    exec(stmt)
    out.append({"step": label, "rss": rss() - r, "seconds": time.perf_counter() - t,
                "modules": len(sys.modules) - m})
out.append({"step": "total", "rss": rss(), "seconds": sum(s["seconds"] for s in out),
            "modules": len(sys.modules)})
print(json.dumps(out))
"""


async def _probe(steps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        textwrap.dedent(_PROBE),
        json.dumps(steps),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"import probe failed: {err.decode()[-2000:]}")
    return [
        {
            "step": s["step"],
            "rss_mib": round(s["rss"] / 2**20, 1),
            "ms": round(s["seconds"] * 1000, 1),
            "modules": s["modules"],
        }
        for s in json.loads(out.decode().splitlines()[-1])
    ]


async def run(repeat: int = 3) -> dict[str, Any]:
    """The steps, each the median of `repeat` fresh interpreters; and the whole client against
    the agent's part of it (after the stdlib step)."""
    runs = [await _probe(STEPS) for _ in range(repeat)]

    def median(i: int, key: str) -> float:
        xs = sorted(r[i][key] for r in runs)
        return float(xs[len(xs) // 2])

    steps = [
        {**runs[0][i], "rss_mib": median(i, "rss_mib"), "ms": median(i, "ms")}
        for i in range(len(runs[0]))
    ]
    stdlib = STEPS[0]
    whole = await _probe([stdlib, ("whole", "import kubernetes.client, kubernetes.config")])
    parts = await _probe(
        [
            stdlib,
            (
                "parts",
                "from nodeagent.kube import official_client; official_client.install();"
                " import kubernetes.config.kube_config",
            ),
        ]
    )
    webhooks = await _probe([*STEPS, ("webhooks", "import nodeagent.notify")])
    api_client = await _probe([*STEPS, ("api_client", "import kubernetes.client.api_client")])
    return {
        "steps": steps,
        "kubernetes_whole": whole[2],
        "kubernetes_agent_part": parts[2],
        "webhook_sender": webhooks[len(STEPS) + 1],
        "api_client": api_client[len(STEPS) + 1],
    }


def table(imports: dict[str, Any]) -> str:
    lines = [
        "| import (cumulative, in this order) | RSS | time | modules |",
        "|---|---:|---:|---:|",
    ]
    for s in imports["steps"]:
        lines.append(
            f"| {s['step']} | {s['rss_mib']:.1f} MiB | {s['ms']:.0f} ms | {s['modules']} |"
        )
    for key, label in (
        ("kubernetes_whole", "kubernetes.client + kubernetes.config, whole (for comparison)"),
        ("kubernetes_agent_part", "the agent's part of them, kubeconfig loader included"),
        ("webhook_sender", "the webhook sender (aiohttp), only with notifications.webhooks"),
        ("api_client", "the client's ApiClient (pydantic), not imported: nodeagent.kube.transport"),
    ):
        if key not in imports:  # results of an earlier version
            continue
        s = imports[key]
        lines.append(f"| {label} | {s['rss_mib']:.1f} MiB | {s['ms']:.0f} ms | {s['modules']} |")
    return "\n".join(lines)
