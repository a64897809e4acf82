"""The memos decisions keep across decisions: reused only while what they were derived from
is the same."""

from __future__ import annotations

from nodeagent.model.memo import ObjectMemo, Recall


def test_recall_derives_again_only_when_the_key_changes() -> None:
    recall = Recall()
    derived: list[str] = []

    def derive(value: str) -> str:
        derived.append(value)
        return value.upper()

    pods = ({"metadata": {"uid": "a"}},)
    assert recall("node-1", "pods", pods, lambda: derive("a")) == "A"
    assert recall("node-1", "pods", pods, lambda: derive("never")) == "A"  # same object
    equal = ({"metadata": {"uid": "a"}},)
    assert recall("node-1", "pods", equal, lambda: derive("never")) == "A"  # equal content
    changed = ({"metadata": {"uid": "b"}},)
    assert recall("node-1", "pods", changed, lambda: derive("b")) == "B"
    # slots and groups are apart
    assert recall("node-1", "requests", changed, lambda: derive("c")) == "C"
    assert recall("node-2", "pods", changed, lambda: derive("d")) == "D"
    assert derived == ["a", "b", "c", "d"]
    recall.forget("node-1")
    assert len(recall) == 1
    assert recall("node-1", "pods", changed, lambda: derive("e")) == "E"


def test_object_memo_reads_a_replaced_object_anew() -> None:
    memo = ObjectMemo(lambda obj: dict(obj["spec"]))
    first = {"metadata": {"uid": "u"}, "spec": {"x": 1}}
    assert memo(first) == {"x": 1}
    assert memo(first) is memo(first)
    assert memo({"metadata": {"uid": "u"}, "spec": {"x": 2}}) == {"x": 2}
    memo.forget({"metadata": {"uid": "u"}})
    assert len(memo) == 0
