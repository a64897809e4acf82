"""The user documentation's shape (issue 36): a README short enough to read, beginning with the
quick start, the rest in docs/ pages it links to, and no link that leads nowhere (a page, or a
section of one, renamed or moved)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 400

# the pages the README hands the rest to
PAGES = [
    "install",
    "configuration",
    "operations",
    "fleet",
    "upstream-api",
    "eviction-bridge",
    "security",
    "performance",
    "development",
    "design",
]


def documents() -> list[Path]:
    return sorted(
        {
            README,
            *(ROOT / "docs").glob("*.md"),
            *(ROOT / "packaging").glob("**/README.md"),
            ROOT / "tests" / "bench" / "README.md",
        }
    )


def headings(text: str) -> list[str]:
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*)", line)):
            out.append(m.group(1).strip())
    return out


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(path.read_text()):
        a = anchor(heading)
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")  # a repeated heading's anchor is numbered
    return out


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # no links in code blocks
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_the_readme_is_short_and_begins_with_the_quick_start() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES, "move sections to docs/ pages"
    sections = [h for h in headings(text) if not h.startswith("nodeagent")]
    assert sections[0] == "Quick start", sections
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # from nothing to a graceful reboot: the kubelet's setting, each install, a health check,
    # the reboot and how to watch it, and where the image comes from
    for step in (
        "shutdownGracePeriod: 0s",
        "helm install",
        "kubectl apply -k",
        ".deb",
        "rollout status",
        "systemctl reboot",
        "kubectl get nm -w",
        "docker build",
        "is not published",
    ):
        assert step in quick, step
    order = [s for s in sections if s in ("What it is", "Install", "Configure", "Operate")]
    assert order == ["What it is", "Install", "Configure", "Operate"], sections


def test_the_readme_links_every_docs_page() -> None:
    linked = set(links(README))
    for page in PAGES:
        assert f"docs/{page}.md" in linked, page
        assert (ROOT / "docs" / f"{page}.md").is_file(), page


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_somewhere(doc: Path) -> None:
    broken = []
    for link in links(doc):
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        path, _, fragment = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{link}: no such section in {target.relative_to(ROOT)}")
    assert not broken, broken
