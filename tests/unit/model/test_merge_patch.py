"""`model.bodies.merge_patch`: the patch that turns a status into another, checked against the
simulated API server's RFC 7386 merge patch (the real server's rules)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.bodies import merge_patch
from nodeagent_testbed.sim.patch import json_merge_patch

KEYS = st.sampled_from(["summary", "blockedBy", "entry", "podsLeft", "nodes"])
LEAVES = st.integers(0, 3) | st.text(max_size=3) | st.lists(st.integers(0, 3), max_size=2)
DOCS: st.SearchStrategy[dict[str, Any]] = st.recursive(
    st.dictionaries(KEYS, LEAVES, max_size=4),
    lambda inner: st.dictionaries(KEYS, LEAVES | inner, max_size=4),
    max_leaves=12,
)


def test_a_key_the_new_status_lacks_is_removed() -> None:
    old = {"summary": {"podsLeft": 2, "blockedBy": "pod default/web-0: eviction refused"}}
    new = {"summary": {"podsLeft": 0}}
    assert merge_patch(old, new) == {"summary": {"podsLeft": 0, "blockedBy": None}}
    assert json_merge_patch(old, new) != new  # a plain patch would keep blockedBy


@given(DOCS, DOCS)
def test_the_patch_applied_to_the_old_status_gives_the_new(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert json_merge_patch(old, merge_patch(old, new)) == new
