"""`nodeagent demo` as a user runs it: a subprocess, under a minute, exit 0, and output that shows
the drain in plan order, the lock released only after Drained, and the return from the reboot."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from nodeagent_testbed.fakelogind import dbus_daemon_path

if dbus_daemon_path() is None:
    pytest.skip(
        "dbus-daemon is not installed (the demo's logind runs on it)", allow_module_level=True
    )

TYPE_RANK = {"Default": 0, "DaemonSet": 1, "Static": 2}
# a row of the summary's "Order of removal" table:  "   12    6.6s  ns/pod   DaemonSet<=1000  1000"
ROW = re.compile(r"^\s+(\d+)\s+([\d.]+)s\s+(\S+)\s+(Default|DaemonSet|Static)<=(\d+)\s+(-?\d+)")


def test_demo_reboots_node_1_gracefully_in_under_a_minute() -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "nodeagent", "demo"],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    elapsed = time.monotonic() - started
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr}"
    assert elapsed < 60, f"the demo took {elapsed:.1f}s\n{out}"

    lines = out.splitlines()
    # live progress: status lines with the stage, the drain targets and the pods left per node
    status = [ln for ln in lines if re.match(r"^\[\s*[\d.]+s\] node-1 Drain\s+targets: ", ln)]
    assert status, out
    assert any("pods left: node-1 " in ln and "node-2 " in ln for ln in status), out

    # order of removal: every Default pod before every DaemonSet pod before the static pod
    start = lines.index("Order of removal from node-1:")
    rows = [m for ln in lines[start:] if (m := ROW.match(ln))]
    kinds = [m.group(4) for m in rows]
    assert kinds == sorted(kinds, key=TYPE_RANK.__getitem__), out
    assert {"Default", "DaemonSet", "Static"} <= set(kinds), out
    assert kinds[-1] == "Static" and rows[-1].group(3) == "kube-system/etcd-node-1", out
    times = [float(m.group(2)) for m in rows]
    assert times == sorted(times), out
    # priorities: within the plan entries, the Default<=1000000000 pods include several classes
    prios = {int(m.group(6)) for m in rows if m.group(4) == "Default"}
    assert {100, 1000, 100000, 2000000000} <= prios, out

    # disruption budgets held evictions back: no request while they allowed nothing
    evictions = lines.index(next(ln for ln in lines if ln.startswith("Evictions (policy/v1")))
    held = re.search(r"(\d+) pods? waited for a disruption budget", lines[evictions + 1])
    assert held is not None and int(held.group(1)) > 0, out
    assert any(" waits: Waiting for disruption budget " in ln for ln in lines), out

    # the lock goes only after Drained=True, in the live lines and in the summary
    drained = next(i for i, ln in enumerate(lines) if ln.endswith(": Drained=True"))
    released = next(i for i, ln in enumerate(lines) if "released its shutdown lock" in ln)
    assert drained < released, out
    m = re.search(r"Shutdown lock released at [\d.]+s, ([\d.]+)s after Drained", out)
    assert m is not None and float(m.group(1)) >= 0, out

    # the return from the reboot: maintenance completed, node uncordoned, manifest and mirror back
    after_release = "\n".join(lines[released:])
    restored = r"restored: moved .* back to \$DEMO/node-1/manifests/etcd\.yaml"
    assert re.search(restored, after_release), out
    assert "node-1 uncordoned" in after_release, out
    assert "mirror pod kube-system/etcd-node-1 is Running again" in after_release, out
    assert (
        "After the reboot: node-1 uncordoned; etcd.yaml back byte-identical; "
        "mirror pod etcd-node-1" in out
    ), out
