"""The coordinated reboot's decisions (model.reboot_request): only a live, drained request of
this boot reboots; a requirement gone completes; a Complete request is deleted; a sentinel
older than the boot is stale."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model import reboot_request as rr
from nodeagent.model import shutdown as model

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
OTHER_BOOT = "9a8b7c6d-5e4f-3021-1a2b-3c4d5e6f7a8b"


def request(
    *, stage: str = "Drain", drained: bool = False, deleting: bool = False, node: str = "node-1"
) -> dict[str, Any]:
    nm = model.shutdown_maintenance(node, BOOT, "reboot", trigger=model.TRIGGER_REBOOT)
    nm["spec"]["stage"] = stage
    if drained:
        nm["status"] = {"conditions": [{"type": "Drained", "status": "True"}]}
    if deleting:
        nm["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return nm


requests = st.builds(
    request,
    stage=st.sampled_from(["Drain", "Complete", "Idle", "Cordon"]),
    drained=st.booleans(),
    deleting=st.booleans(),
)


@given(required=st.booleans(), nm=st.none() | requests)
def test_only_a_live_drained_request_reboots_and_only_while_required(
    required: bool, nm: dict[str, Any] | None
) -> None:
    action = rr.next_action(required, nm)
    live = nm is not None and "deletionTimestamp" not in nm["metadata"]
    live = live and nm is not None and nm["spec"]["stage"] != "Complete"
    if action == "reboot":
        assert required and live and nm is not None and model.is_drained(nm)
    if action == "create":
        assert required and nm is None
    if action == "complete":
        assert not required and live
    if action == "delete":
        assert nm is not None and nm["spec"]["stage"] == "Complete"
        assert "deletionTimestamp" not in nm["metadata"]
    if not required:
        assert action in ("complete", "delete", "wait", "idle")
        assert action != "wait" or (nm is not None and "deletionTimestamp" in nm["metadata"])


def test_the_steps() -> None:
    assert rr.next_action(True, None) == "create"
    assert rr.next_action(False, None) == "idle"
    assert rr.next_action(True, request()) == "wait"
    assert rr.next_action(True, request(drained=True)) == "reboot"
    assert rr.next_action(False, request(drained=True)) == "complete"
    assert rr.next_action(False, request()) == "complete"
    assert rr.next_action(True, request(stage="Complete", drained=True)) == "delete"
    assert rr.next_action(True, request(drained=True, deleting=True)) == "wait"


def test_request_of_boot_is_the_agents_own_only() -> None:
    own = request()
    other_node = request(node="node-2")
    earlier = model.shutdown_maintenance(
        "node-1", OTHER_BOOT, "reboot", trigger=model.TRIGGER_REBOOT
    )
    shutdown = model.shutdown_maintenance("node-1", BOOT, "reboot")
    relabelled = request()
    relabelled["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "someone"
    assert rr.request_of_boot([other_node, earlier, shutdown, own], "node-1", BOOT) is own
    assert rr.request_of_boot([other_node, earlier, shutdown, relabelled], "node-1", BOOT) is None


@given(
    modified=st.none() | st.floats(0, 2e9),
    boot=st.none() | st.floats(0, 2e9),
)
def test_a_sentinel_counts_when_written_in_this_boot(
    modified: float | None, boot: float | None
) -> None:
    counts = rr.sentinel_counts(modified, boot)
    assert counts == (modified is not None and (boot is None or modified >= boot))


@given(st.lists(st.sampled_from(["sentinel /x", "nodeagent reboot"]), max_size=2), st.text())
def test_the_reason_is_one_bounded_line(sources: list[str], text: str) -> None:
    reason = rr.requested_reason(sources, text)
    assert "\n" not in reason
    assert len(reason) <= len("Reboot required (): ") + len(", ".join(sources)) + 40 + rr.MAX_REASON
    for s in sources:
        assert s in reason
