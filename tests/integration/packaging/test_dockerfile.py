"""The DaemonSet image's Dockerfile. No container engine is available here, so it is parsed and
checked for what makes an image small, reproducible and non-interactive, and for agreement with
the project and the DaemonSet."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ENTRYPOINT = ["nodeagent", "run", "--config", "/etc/nodeagent/config.yaml"]


@dataclass
class Instruction:
    keyword: str
    args: str
    comments: list[str]  # the comment lines right above it
    line: int


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse(text: str) -> tuple[list[str], list[Stage]]:
    """(the whole file's comment lines, the stages). Handles `\\` continuations and comments."""
    all_comments: list[str] = []
    instructions: list[Instruction] = []
    pending: list[str] = []
    current: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#"):
            all_comments.append(stripped)
            if not current:
                pending.append(stripped)
            continue
        if not stripped:
            if not current:
                pending = []
            continue
        if not current:
            start = number
        current.append(stripped.removesuffix("\\").strip())
        if stripped.endswith("\\"):
            continue
        keyword, _, args = " ".join(current).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), pending, start))
        current, pending = [], []
    assert not current, "the file ends in a line continuation"

    stages: list[Stage] = []
    defaults: dict[str, str] = {}  # the ARGs before the first FROM, which FROM lines may use
    for ins in instructions:
        if ins.keyword == "ARG" and not stages:
            key, _, value = ins.args.partition("=")
            defaults[key] = value
        elif ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults[m[1] or m[2]], words[0])
            stages.append(Stage(image, name))
        else:
            assert stages, f"line {ins.line}: {ins.keyword} before the first FROM"
            stages[-1].instructions.append(ins)
    return all_comments, stages


@pytest.fixture(scope="module")
def dockerfile() -> tuple[list[str], list[Stage]]:
    return parse((ROOT / "Dockerfile").read_text())


def run_commands(stages: list[Stage]) -> list[str]:
    return [i.args for s in stages for i in s.all("RUN")]


def test_multi_stage_on_one_pinned_base(dockerfile: tuple[list[str], list[Stage]]) -> None:
    comments, stages = dockerfile
    assert len(stages) >= 2
    names = {s.name for s in stages if s.name}
    bases = {s.image for s in stages if s.image not in names}
    # one base: the virtualenv copied out of the build stage links to the base's python
    assert len(bases) == 1, bases
    (base,) = bases
    m = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim(-\w+)?(@sha256:[0-9a-f]{64})?", base)
    assert m, f"{base}: pin the full version of a slim python image"
    floor = re.search(r">=\s*(\d+)\.(\d+)", PYPROJECT["requires-python"])
    assert floor is not None
    assert (int(m[1]), int(m[2])) >= (int(floor[1]), int(floor[2]))
    if not m[5]:
        # not pinned by digest yet: the file says how to
        assert any("sha256:" in c and ("FROM" in c or "ARG" in c) for c in comments), (
            "digest pin comment"
        )


def test_final_stage_is_the_base_plus_the_virtualenv(
    dockerfile: tuple[list[str], list[Stage]],
) -> None:
    _, stages = dockerfile
    build, final = stages[0], stages[-1]
    assert build.name is not None
    copies = [i.args for i in final.all("COPY")]
    assert f"--from={build.name} /opt/nodeagent /opt/nodeagent" in copies
    assert not final.all("RUN"), "the final stage only copies the virtualenv in"
    env = " ".join(i.args for i in final.all("ENV"))
    assert "PATH=/opt/nodeagent/bin:$PATH" in env
    (entrypoint,) = final.all("ENTRYPOINT")
    assert json.loads(entrypoint.args) == ENTRYPOINT  # exec form, no shell in between
    (user,) = final.all("USER")
    assert user.args in ("0", "0:0", "root")
    assert any("root" in c.lower() for c in user.comments), "say why it runs as root"
    labels = " ".join(i.args for i in final.all("LABEL"))
    assert f'org.opencontainers.image.version="{PYPROJECT["version"]}"' in labels


def test_non_interactive_and_no_caches(dockerfile: tuple[list[str], list[Stage]]) -> None:
    _, stages = dockerfile
    for stage in stages:
        args = [i.args for i in stage.all("ARG")]
        # ARG, not ENV: it must not leak into the running container
        assert "DEBIAN_FRONTEND=noninteractive" in args, stage.image
        assert not any("DEBIAN_FRONTEND" in i.args for i in stage.all("ENV"))
    for command in run_commands(stages):
        words = shlex.split(command)
        for sub in " ".join(words).split("&&"):
            sub_words = sub.split()
            if "apt-get" in sub_words:
                assert "upgrade" not in sub_words and "dist-upgrade" not in sub_words, sub
                if "install" in sub_words:
                    assert "-y" in sub_words and "--no-install-recommends" in sub_words, sub
                    assert "rm -rf /var/lib/apt/lists" in command, command
            if "pip" in sub_words and ("install" in sub_words or "wheel" in sub_words):
                assert "--no-cache-dir" in sub_words, sub
            if "pip" in sub_words and "install" in sub_words:
                # installs come only from the wheels built in this stage
                assert "--no-index" in sub_words, sub


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: a pattern excludes a path when it matches the path or a directory above
    it; `**/` matches any number of directories; the last matching pattern wins, `!` re-includes.
    """
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        p = pattern.removeprefix("!").rstrip("/")
        if p.startswith("**/"):
            tails = {"/".join(q.split("/")[j:]) for q in prefixes for j in range(len(q.split("/")))}
            hit = any(fnmatch.fnmatch(t, p[3:]) for t in tails)
        else:
            hit = any(fnmatch.fnmatch(q, p) for q in prefixes)
        if hit:
            ignored = not negate
    return ignored


def test_build_context_has_what_the_build_copies(
    dockerfile: tuple[list[str], list[Stage]],
) -> None:
    _, stages = dockerfile
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for stage in stages:
        for copy in stage.all("COPY"):
            words = copy.args.split()
            if any(w.startswith("--from=") for w in words):
                continue
            for source in words[:-1]:
                assert (ROOT / source).exists(), source
                assert not dockerignored(source, patterns), f"{source} is .dockerignored"
    for path in ("nodeagent/cli.py", "pyproject.toml", "README.md"):
        assert not dockerignored(path, patterns), path
    for path in (
        ".venv",
        ".git",
        "tests/conftest.py",
        # the image carries the node agent only: no simulated cluster or logind, no demo
        "testbed/pyproject.toml",
        "testbed/nodeagent_testbed/sim/server.py",
        "dist/x.deb",
        "nodeagent/__pycache__/cli.cpython-311.pyc",
    ):
        assert dockerignored(path, patterns), path
