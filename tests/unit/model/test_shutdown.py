from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model import shutdown as model
from nodeagent.model.names import NODE_LABEL

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
EARLIER_BOOT = "aaaabbbb-cccc-dddd-eeee-ffff00001111"

times = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(
    deadline=times,
    bound=st.floats(min_value=0.01, max_value=1e3),
    since=st.none() | times,
    drained=st.booleans(),
    now=times,
)
def test_the_wait_always_ends(
    deadline: float, bound: float, since: float | None, drained: bool, now: float
) -> None:
    s = model.ReleaseState(deadline, bound, since, drained)
    reason = model.release_reason(s, now)
    if reason is None:
        # holding on: the next decision point comes, and by then the lock goes
        wait = model.next_decision(s, now)
        assert wait > 0
        assert model.release_reason(s, now + wait) is not None
    if now >= deadline:
        assert reason is not None


def test_reasons() -> None:
    s = model.ReleaseState(deadline=100, unreachable_bound=30)
    assert model.release_reason(s, 50) is None
    s.unreachable_since = 60
    assert model.release_reason(s, 89) is None
    assert model.release_reason(s, 90) == "the API server could not be reached"
    s.drained = True
    assert model.release_reason(s, 0) == "the node is drained"


def test_adopt_only_this_boots_live_maintenance() -> None:
    mine = model.shutdown_maintenance("node-1", BOOT, "reboot")
    name = mine["metadata"]["name"]
    assert name == f"nodeagent-shutdown-node-1-{BOOT}"
    other_boot = model.shutdown_maintenance("node-1", EARLIER_BOOT, "reboot")
    assert model.next_step([other_boot], "node-1", BOOT) == ("create", name)
    assert model.next_step([mine, other_boot], "node-1", BOOT) == ("adopt", name)
    # one an earlier version named otherwise is adopted by its labels
    renamed = {**mine, "metadata": {**mine["metadata"], "name": "nodeagent-shutdown-node-1-1a2b"}}
    assert model.next_step([renamed], "node-1", BOOT) == (
        "adopt",
        "nodeagent-shutdown-node-1-1a2b",
    )
    hand_made = {"metadata": {"name": name, "labels": {NODE_LABEL: "node-1"}}}
    assert not model.is_ours(hand_made, "node-1")
    assert model.next_step([hand_made], "node-1", BOOT) == ("create", name)


def test_a_second_shutdown_of_a_boot_replaces_the_cancelled_ones_maintenance() -> None:
    """One name per node and boot: a cancelled shutdown's Complete maintenance is deleted, and
    the next one created under the same name once it is gone."""
    mine = model.shutdown_maintenance("node-1", BOOT, "reboot")
    name = mine["metadata"]["name"]
    done = {**mine, "spec": {**mine["spec"], "stage": "Complete"}}
    assert model.next_step([done], "node-1", BOOT) == ("delete", name)
    going = {**done, "metadata": {**done["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert model.next_step([going], "node-1", BOOT) == ("wait", name)
    live_going = {**mine, "metadata": going["metadata"]}
    assert model.next_step([live_going], "node-1", BOOT) == ("wait", name)


def test_the_configured_drain_plan_goes_into_the_maintenance() -> None:
    plain = model.shutdown_maintenance("node-1", BOOT, "reboot")
    assert "drainPlan" not in plain["spec"]
    planned = model.shutdown_maintenance(
        "node-1", BOOT, "reboot", drain_plan=[{"podPriority": 100}]
    )
    assert planned["spec"]["drainPlan"] == [{"podPriority": 100}]


def test_the_reason_says_what_logind_said() -> None:
    from nodeagent.model.shutdown import shutdown_reason

    assert shutdown_reason("node-1", "reboot") == (
        "Node reboot requested through systemd-logind on node-1"
    )
    assert shutdown_reason("node-1", "unknown") == (
        "Shutdown or reboot of node-1 requested through systemd-logind (logind did not say which)"
    )


def test_the_wait_reaches_the_deadline_despite_rounding() -> None:
    # found by hypothesis: now + (deadline - now) can fall a hair short of the deadline
    now = 212449.74199448974
    s = model.ReleaseState(deadline=906562.6767316825, unreachable_bound=1.0)
    assert now + (s.deadline - now) < s.deadline
    wait = model.next_decision(s, now)
    assert model.release_reason(s, now + wait) is not None
