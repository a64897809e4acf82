"""A preview as a text table (``nodeagent plan``'s default output)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from nodeagent.model.drainplan import PodType
from nodeagent.model.preview.refusals import MULTIPLE_BUDGETS
from nodeagent.model.preview.results import NodePreview, PodPreview, Preview

__all__ = ["render_text"]

_PRIORITY_WIDTH = len(str(-(2**31)))
_TYPE_WIDTH = max(len(t.value) for t in PodType)
_INDENT = "    "


def _shown_name(pod: PodPreview) -> str:
    return pod.key + (" (terminating)" if pod.terminating else "")


def _refusal_text(pod: PodPreview) -> str:
    if not pod.refused_by:
        return "-"
    names = ", ".join(r.budget for r in pod.refused_by)
    if any(r.reason == MULTIPLE_BUDGETS for r in pod.refused_by):
        return f"{names} (more than one budget)"
    return names


def _rows(
    pods: Iterable[tuple[PodPreview, str]], pod_width: int, last_width: int, width: int
) -> list[str]:
    """One row per pod; a name too long for its column goes on lines of its own (cut where
    longer than the table), and the last column wraps under itself."""
    lines: list[str] = []
    for pod, last in pods:
        name = _shown_name(pod)
        wrapped = textwrap.wrap(last, last_width, break_on_hyphens=False) or [""]
        if len(name) > pod_width:
            room = width - len(_INDENT)
            lines += [_INDENT + name[i : i + room] for i in range(0, len(name), room)]
            name = ""
        head = (
            f"{_INDENT}{name:<{pod_width}}  {pod.priority:>{_PRIORITY_WIDTH}}  "
            f"{pod.pod_type.value:<{_TYPE_WIDTH}}  "
        )
        lines.append(head + wrapped[0])
        lines += [" " * len(head) + w for w in wrapped[1:]]
    return [line.rstrip() for line in lines]


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def render_text(p: Preview, width: int = 100) -> str:
    """The preview as a text table no wider than ``width`` (at least 60) columns: the selected
    nodes, then per node the entries that target pods, in order, and the pods never evicted."""
    width = max(width, 60)
    fixed = len(_INDENT) + 2 + _PRIORITY_WIDTH + 2 + _TYPE_WIDTH + 2
    all_pods = [
        _shown_name(pod)
        for n in p.nodes
        for pod in [*(q for e in n.entries for q in e.pods), *(x.pod for x in n.never_evicted)]
    ]
    pod_width = min(max([len("POD"), *map(len, all_pods)]), (width - fixed) * 3 // 5)
    last_width = width - fixed - pod_width
    lines = _heading(p, width)
    for node in p.nodes:
        lines += _node_lines(node, pod_width, last_width, width)
    return "\n".join(lines) + "\n"


def _heading(p: Preview, width: int) -> list[str]:
    name = p.maintenance or "(unnamed)"
    selected = ", ".join(n.name for n in p.nodes) or "none"
    return [
        *textwrap.wrap(
            f"NodeMaintenance {name} (stage {p.stage}): {len(p.nodes)} of {p.nodes_seen} nodes "
            f"selected: {selected}",
            width,
            subsequent_indent="  ",
            break_on_hyphens=False,
        ),
        *textwrap.wrap(
            f"Drain plan: {len(p.plan)} entries; the order is this maintenance's alone (another "
            f"maintenance sharing a node can hold it back). Nothing was changed.",
            width,
            break_on_hyphens=False,
        ),
    ]


def _node_lines(node: NodePreview, pod_width: int, last_width: int, width: int) -> list[str]:
    """A blank line, the node's summary, then its entries that target pods and the pods never
    evicted, one table with a header at the first of each part."""
    used = [e for e in node.entries if e.pods]
    if not used and not node.never_evicted:
        return ["", *textwrap.wrap(f"node {node.name}: no pods", width)]
    lines = [
        "",
        *textwrap.wrap(
            f"node {node.name}: {_count(node.to_evict, 'pod')} to evict in {len(used)} of "
            f"{len(node.entries)} entries, {len(node.never_evicted)} never evicted",
            width,
        ),
    ]
    header = (
        f"{_INDENT}{'POD':<{pod_width}}  {'PRIORITY':>{_PRIORITY_WIDTH}}  {'TYPE':<{_TYPE_WIDTH}}  "
    )
    for e in used:
        entry = f"  entry {e.index + 1}/{len(node.entries)}: {e.entry.describe()}"
        lines += textwrap.wrap(entry, width, subsequent_indent="    ")
        if e is used[0]:
            lines.append(header + "REFUSED BY (PDB)")
        lines += _rows(((q, _refusal_text(q)) for q in e.pods), pod_width, last_width, width)
    if node.never_evicted:
        lines += ["  never evicted:", header + "WHY"]
        lines += _rows(
            ((x.pod, x.reason) for x in node.never_evicted), pod_width, last_width, width
        )
    return lines
